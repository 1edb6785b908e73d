"""Text and JSON helpers of the ``mock`` backend: its token count (whitespace tokens),
filler words that no parser reads as an action, a score or a verdict, and JSON values
valid under a request's schema, grown or cut to a token target."""

from __future__ import annotations

import json
import re
from typing import Any

FILLER = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit")


def count_tokens(text: str) -> int:
    """The mock's token count: whitespace-separated tokens."""
    return len(text.split())


def cut_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """``(text cut after max_tokens whitespace tokens, was it cut?)``."""
    matches = list(re.finditer(r"\S+", text))
    if len(matches) <= max_tokens:
        return text, False
    return (text[: matches[max_tokens - 1].end()] if max_tokens > 0 else ""), True


def filler(n: int, start: int = 0) -> str:
    return " ".join(FILLER[(start + i) % len(FILLER)] for i in range(max(0, n)))


def instance(schema: dict[str, Any], hint: Any = None) -> Any:
    """A value valid under ``schema`` (the subset the suite uses), following ``hint`` where it fits."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        options = list(schema["enum"])
        return hint if hint in options else options[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        given = hint if isinstance(hint, dict) else {}
        return {name: instance(sub, given.get(name)) for name, sub in props.items()}
    if kind == "array":
        hints = hint if isinstance(hint, list) else []
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        n = max(low, len(hints)) if high is None else min(int(high), max(low, len(hints)))
        sub = schema.get("items") or {}
        return [instance(sub, hints[i] if i < len(hints) else None) for i in range(n)]
    if kind in ("integer", "number"):
        value = hint if isinstance(hint, int | float) and not isinstance(hint, bool) else schema.get("minimum", 0)
        if "maximum" in schema:
            value = min(value, schema["maximum"])
        if "minimum" in schema:
            value = max(value, schema["minimum"])
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return bool(hint)
    if kind == "null":
        return None
    text = "" if hint is None else str(hint)
    if "maxLength" in schema:
        text = text[: int(schema["maxLength"])].rstrip()
    if len(text) < int(schema.get("minLength", 0)):
        text = (text + " " + "x" * int(schema["minLength"])).strip()[: max(int(schema["minLength"]), len(text))]
    return text


def _string_slots(obj: Any, schema: dict[str, Any], name: str = "") -> list[tuple[Any, Any, int | None, str]]:
    """``(container, key, maxLength, property name)`` of every free string in ``obj``."""
    slots: list[tuple[Any, Any, int | None, str]] = []
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for key, value in obj.items():
            sub = props.get(key) or {}
            if isinstance(value, str) and "enum" not in sub and "const" not in sub:
                slots.append((obj, key, sub.get("maxLength"), key))
            else:
                slots.extend(_string_slots(value, sub, key))
    elif isinstance(obj, list):
        sub = schema.get("items") or {}
        for i, value in enumerate(obj):
            if isinstance(value, str) and "enum" not in sub:
                slots.append((obj, i, sub.get("maxLength"), name))
            else:
                slots.extend(_string_slots(value, sub, name))
    return slots


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def fit_json(obj: Any, schema: dict[str, Any], limit: int, target: int | None) -> str:
    """``obj`` as JSON within ``limit`` tokens; with ``target``, free strings grown toward it.

    Growing fills every free string except ``query`` with filler words, in property
    order, up to its ``maxLength`` and the target.  Shrinking drops words from the
    longest strings.  Neither changes the shape, so the result stays valid.
    """
    slots = _string_slots(obj, schema)
    while count_tokens(_dump(obj)) > limit:
        longest = max(slots, key=lambda s: len(s[0][s[1]]), default=None)
        if longest is None or not longest[0][longest[1]]:
            break
        words = longest[0][longest[1]].split()
        excess = count_tokens(_dump(obj)) - limit
        longest[0][longest[1]] = " ".join(words[: max(0, len(words) - excess)])
    if target is None:
        return _dump(obj)
    goal = min(target, limit)
    for container, key, max_chars, name in slots:
        if name == "query":
            continue
        base = container[key]
        room = goal - count_tokens(_dump(obj))
        if room <= 0:
            break
        cap = len(base) + 10 * room + 10 if max_chars is None else int(max_chars)

        def grown(n: int, base: str = base) -> str:
            return f"{base} {filler(n)}".strip() if n else base

        low, high = 0, room + 1  # largest n whose text fits both caps
        while low < high:
            mid = (low + high + 1) // 2
            container[key] = grown(mid)
            if len(container[key]) <= cap and count_tokens(_dump(obj)) <= goal:
                low = mid
            else:
                high = mid - 1
        container[key] = grown(low)
    return _dump(obj)
