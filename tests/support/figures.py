"""What Vega draws from a figure's spec: its marks, read from vl-convert's scenegraph (no browser)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def marks(spec: dict[str, Any]) -> dict[str, list[list[dict[str, Any]]]]:
    """The data marks of ``spec`` as Vega lays them out: mark type -> one list of items per mark
    (a line or area per series; axes, legends and titles left out)."""
    import vl_convert as vlc

    out: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("role") == "mark" and node.get("marktype") != "group":
                out[node["marktype"]].append(list(node.get("items", [])))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(vlc.vegalite_to_scenegraph(spec, allowed_base_urls=[]))
    return dict(out)


def texts(spec: dict[str, Any]) -> list[str]:
    """Every text Vega draws for ``spec``: title, axis titles and labels, legend labels."""
    import vl_convert as vlc

    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("marktype") == "text":
                for item in node.get("items", []):
                    text = item.get("text")
                    found.extend(text if isinstance(text, list) else [str(text)] if text is not None else [])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(vlc.vegalite_to_scenegraph(spec, allowed_base_urls=[]))
    return found
