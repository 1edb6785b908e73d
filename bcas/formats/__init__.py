"""Dataset file formats: our JSONL schema, FlashRAG's, and the benchmarks' official layouts.

``--bcas-datasets FORMAT:PATH`` (or ``load_dataset("FORMAT:PATH")``) reads a file in
one of ``FORMATS``; a bare path is auto-detected from its first record, and a record
that fits several layouts is an error that lists them.  Every reader streams the
file (JSON arrays element by element, see ``bcas.formats.stream``) and reports a
malformed record as ``file:line: field 'x' ...``.  The items' content hash
(``bcas.items.content_hash``) depends only on the parsed content, so it is the same
on every machine.

Modules: ``base`` (the :class:`Format` type and the ``FORMATS`` registry), ``native``
(our schema), ``multihop`` (HotpotQA, 2WikiMultihopQA, MuSiQue), ``qa`` (FlashRAG,
TriviaQA, NQ-open), ``claims`` (FEVER, ConflictQA), ``stream``; each reader module
registers its formats beside its readers.
Passage corpora (FlashRAG, BEIR, FEVER wiki-pages) are read by ``bcas.corpus``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Each reader module registers its formats beside its readers (importing it is the registration).
from bcas.formats import claims, multihop, qa  # noqa: F401
from bcas.formats.base import FORMATS, Format, Reader, register_format
from bcas.formats.native import collect_items
from bcas.formats.stream import first_record
from bcas.items import DatasetError, Item

FEVER_LABEL_SET = {"supports", "refutes", "not enough info"}
YES_NO_SET = {"yes", "no"}


def _formats() -> list[Format]:
    return [FORMATS.get(name) for name in FORMATS.names()]


def format_names() -> list[str]:
    return FORMATS.names()


def lookup_format(name: str) -> Format | None:
    """The format called ``name`` (or one of its aliases), else None."""
    key = name.strip().lower()
    if key in FORMATS:
        return FORMATS.get(key)
    for fmt in _formats():
        if key in fmt.aliases:
            return fmt
    return None


def split_spec(spec: str) -> tuple[Format | None, str]:
    """``"FORMAT:PATH"`` -> (format, path); anything else -> (None, spec)."""
    head, sep, rest = spec.partition(":")
    if sep and rest:
        fmt = lookup_format(head)
        if fmt is not None:
            return fmt, rest
    return None, spec


def detect_format(path: str | Path, default: Format | None = None) -> Format:
    """The one format whose layout fits the file's first record; an error lists the candidates.

    ``default``: the format to read a file with when no layout fits (its reader then
    names the missing or malformed field).
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    first = first_record(path, member="Data")
    if first is None:
        raise DatasetError(path, None, "holds no items")
    line, obj = first
    if not isinstance(obj, dict):
        if default is not None:
            return default
        raise DatasetError(path, line, f"a record must be a JSON object, got {type(obj).__name__}")
    keys = set(obj)
    found = [fmt for fmt in _formats() if fmt.detect(keys)]
    if len(found) == 1:
        return found[0]
    if not found and default is not None:
        return default
    names = ", ".join(sorted(f.name for f in found)) if found else None
    every = ", ".join(format_names())
    if found:
        raise DatasetError(
            path,
            line,
            f"the layout is ambiguous: it fits {names}; name one as FORMAT:PATH "
            f"(e.g. {sorted(f.name for f in found)[0]}:{path}); formats: {every}",
        )
    shown = ", ".join(sorted(keys)[:12])
    raise DatasetError(
        path, line, f"no known dataset layout has these keys ({shown}); name one as FORMAT:PATH; formats: {every}"
    )


def infer_task(fmt: Format, items: tuple[Item, ...]) -> tuple[str, str]:
    """(task, scoring) of a file: the format's, or a label task when every gold is a label."""
    if fmt.infer_labels:
        golds = {a.strip().lower() for item in items for a in item.answers}
        if golds and golds <= FEVER_LABEL_SET:
            return "fact-verification", "label"
        if golds and golds <= YES_NO_SET:
            return "yes-no-conflict", "label"
    return fmt.task, fmt.scoring


def read_format(path: str | Path, fmt: Format) -> tuple[tuple[Item, ...], str, str]:
    """Every item of ``path`` read as ``fmt``, with the task and scoring rule it implies."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    items = collect_items(path, fmt.read(path))
    task, scoring = infer_task(fmt, items)
    return items, task, scoring


def describe() -> list[dict[str, Any]]:
    """One row per format (name, aliases, description) for help texts and the README."""
    return [{"name": f.name, "aliases": list(f.aliases), "description": f.description} for f in _formats()]


__all__ = [
    "FEVER_LABEL_SET",
    "FORMATS",
    "YES_NO_SET",
    "Format",
    "Reader",
    "describe",
    "detect_format",
    "format_names",
    "infer_task",
    "lookup_format",
    "read_format",
    "register_format",
    "split_spec",
]
