"""Figures in a page and out of it: Vega-Lite specs embedded offline, exported through vl-convert.

Every figure of the report, ``bcas compare`` and ``bcas latency`` is a :class:`Figure`: a
name unique within its page and a Vega-Lite spec built with Altair
(:mod:`bcas.report.charts`), or, when there is nothing to show, a sentence saying so.  A
page shows a figure as ``<figure class="bcas-figure" data-figure="NAME">`` holding a
``<div class="vega-chart">`` and the spec in a ``<script type="application/json">``
(escaped by Jinja2's ``tojson``, so ``</script>`` in a label cannot end it); the empty
figure is ``<p class="figure-empty">``.  Template: ``templates/_figure.html``.

The page renders the specs at load with vega-embed from the Vega, Vega-Lite and
vega-embed bundle that the ``vl-convert-python`` package ships (:func:`bundle`), inlined
once per page that has a figure, and :data:`LOADER`; both are admitted by their hashes in
the page's Content-Security-Policy, and vega-embed runs with ``ast: true`` (Vega's
expression interpreter), so no ``eval`` is needed and nothing is requested from the
network.  :func:`export` writes a spec as SVG, PDF or PNG through vl-convert (offline:
no base URL is allowed); :func:`page_figures` reads the specs back out of a page
(``bcas figures``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from markupsafe import Markup

from bcas.paths import cache_dir

FORMATS = ("svg", "pdf", "png", "json")  # json: the Vega-Lite spec itself

# Renders every figure of the page (constant code, admitted by its hash): the spec is read as
# JSON (never evaluated), vega-embed draws it as SVG with Vega's expression interpreter (no eval),
# and the only menu entries kept are the exports (no link to an online editor).
LOADER = (
    "(function(){var o={mode:'vega-lite',renderer:'svg',ast:true,"
    "actions:{export:true,source:false,compiled:false,editor:false}};"
    "document.querySelectorAll('figure.bcas-figure').forEach(function(f){"
    "var s=f.querySelector('script[type=\"application/json\"]'),d=f.querySelector('div.vega-chart');"
    "if(!s||!d){return;}"
    "vegaEmbed(d,JSON.parse(s.textContent),o).catch(function(e){"
    "f.setAttribute('data-error','1');d.textContent='This figure could not be drawn: '+e.message;});"
    "});})();"
)


@dataclass(frozen=True)
class Figure:
    """One figure of a page: ``spec`` (a Vega-Lite spec) or, when None, the sentence ``empty``.

    ``name`` is unique within its page and is the stem of its exported files; ``data`` holds
    the filter keys of the page's filter bar (``fr_data``)."""

    name: str
    spec: dict[str, Any] | None
    empty: str = ""
    data: dict[str, str] = field(default_factory=dict)


def slug(text: str) -> str:
    """``text`` as a file-name stem: letters, digits, ``.``, ``_`` and ``-`` kept, runs of anything else ``-``."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-.") or "figure"


def script_hash(code: str) -> str:
    """The Content-Security-Policy source admitting an inline script of exactly ``code``."""
    return "sha256-" + base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii")


def _cache_file(version: str) -> Path:
    return cache_dir(create=False) / f"vega-embed-bundle-vl-convert-{version}.js"


@lru_cache(maxsize=1)
def bundle() -> str:
    """The Vega, Vega-Lite and vega-embed JavaScript that vl-convert ships (about 0.9 MB).

    Built by ``vl_convert.javascript_bundle()`` (about 2 s), kept for the process and in
    bcas's cache folder (:func:`bcas.paths.cache_dir`) per vl-convert version (built again
    when that file is missing, altered or cannot be written)."""
    import vl_convert as vlc

    cache = _cache_file(str(getattr(vlc, "__version__", "unknown")))
    try:
        text = cache.read_text(encoding="utf-8")
        stamp, _, code = text.partition("\n")
        if stamp == hashlib.sha256(code.encode("utf-8")).hexdigest():
            return code
    except OSError:
        pass
    code = str(vlc.javascript_bundle())  # type: ignore[call-arg]  # its snippet is optional
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(hashlib.sha256(code.encode("utf-8")).hexdigest() + "\n" + code, encoding="utf-8")
        tmp.replace(cache)
    except OSError:
        pass
    return code


MARK = '<figure class="bcas-figure'  # how ``_figure.html`` opens a figure with a spec


def page_scripts(*parts: str) -> tuple[Markup, list[str]]:
    """(the script elements a page made of ``parts`` ends with, their CSP hashes): the bundle and
    :data:`LOADER` when a part holds a figure with a spec, nothing otherwise."""
    if not any(MARK in str(p) for p in parts):
        return Markup(""), []
    code = bundle()
    # Both are constants of the package (the bundle holds no "</script"), never data.
    html = Markup("<script>") + Markup(code) + Markup("</script><script>") + Markup(LOADER) + Markup("</script>")
    return html, [script_hash(code), script_hash(LOADER)]


def unique(figures: list[Figure]) -> list[Figure]:
    """``figures`` with each name made unique in the page (``-2``, ``-3``... after a repeat)."""
    seen: dict[str, int] = {}
    out = []
    for f in figures:
        n = seen[f.name] = seen.get(f.name, 0) + 1
        out.append(f if n == 1 else Figure(f"{f.name}-{n}", f.spec, f.empty, f.data))
    return out


class _FigureParser(HTMLParser):
    """Collects (data-figure, spec text) of each ``figure.bcas-figure`` of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, str]] = []
        self._name: str | None = None
        self._in_spec = False
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "figure" and "bcas-figure" in (values.get("class") or "").split():
            self._name = values.get("data-figure") or "figure"
        elif tag == "script" and self._name is not None and values.get("type") == "application/json":
            self._in_spec, self._text = True, []

    def handle_data(self, data: str) -> None:
        if self._in_spec:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._in_spec and self._name is not None:
            self.found.append((self._name, "".join(self._text)))
            self._in_spec = False
        elif tag == "figure":
            self._name = None


def page_figures(html: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, Vega-Lite spec) of every figure of a page written by bcas, in page order."""
    parser = _FigureParser()
    parser.feed(html)
    return [(name, json.loads(text)) for name, text in parser.found]


def export(spec: dict[str, Any], fmt: str) -> bytes:
    """``spec`` as an SVG, PDF or PNG file (``fmt``), or its JSON, through vl-convert with no
    network (no base URL allowed: every figure's data is in its spec)."""
    import vl_convert as vlc

    if fmt == "json":
        return (json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    if fmt == "svg":
        return str(vlc.vegalite_to_svg(spec, allowed_base_urls=[])).encode("utf-8")
    if fmt == "pdf":
        return bytes(vlc.vegalite_to_pdf(spec, allowed_base_urls=[]))
    if fmt == "png":
        return bytes(vlc.vegalite_to_png(spec, scale=2.0, allowed_base_urls=[]))
    raise ValueError(f"unknown figure format {fmt!r}: choose one of {', '.join(FORMATS)}")


def write_figures(source: str | os.PathLike[str], fmt: str, out: str | os.PathLike[str] | None = None) -> list[Path]:
    """Export every figure of a page written by bcas, one ``NAME.FMT`` file each, and return their paths.

    ``source``: a run folder (its ``index.html``) or a page (``bcas compare --html``,
    ``bcas latency --out``); ``out``: the folder written into (default: ``figures/`` beside
    the page).  ``ValueError``: an unknown format, no page, or a page without a figure."""
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    path = Path(source)
    page = path / "index.html" if path.is_dir() else path
    if path.is_dir() and not page.is_file():
        raise ValueError(f"{path}: no index.html (write the report first: bcas report {path})")
    if not page.is_file():
        raise ValueError(f"{path}: no such run folder or page")
    found = page_figures(page.read_text(encoding="utf-8"))
    if not found:
        raise ValueError(f"{page}: no figure to export (every figure of the page had nothing to show)")
    folder = Path(out) if out is not None else page.parent / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, spec in found:
        target = folder / f"{slug(name)}.{fmt}"
        target.write_bytes(export(spec, fmt))
        written.append(target)
    return written


__all__ = [
    "FORMATS",
    "LOADER",
    "MARK",
    "Figure",
    "bundle",
    "export",
    "page_figures",
    "page_scripts",
    "script_hash",
    "slug",
    "write_figures",
]
