"""Our own JSONL schema (``bcas/resources/data/README.md``), the format the samples ship in.

One JSON object per line with ``id``, ``question``, ``answers``, ``documents``
(``id``, ``title``, ``text``), ``supporting`` and optional ``meta`` and ``gold``
(ids or titles of gold documents in a separate corpus).  ``collect_items`` is the
file-level check every format shares: unique item ids, and one document per document id.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bcas.formats.base import Format, register_format
from bcas.formats.stream import JSONL_HINT, parse_lines
from bcas.items import DatasetError, Document, Item

FIELDS = ("id", "question", "answers", "documents", "supporting", "meta", "gold")
DOCUMENT_FIELDS = ("id", "title", "text")
# ConflictQA's field names, which earlier copies of the conflictqa sample used as titles:
# a title reaches the prompt, and these tell the model which side of the conflict it
# reads (the counter side is the gold one in 302 of 1,000 items).  Read as no title.
ROLE_TITLES = frozenset(
    {
        "parametric_memory",
        "parametric_memory_aligned_evidence",
        "counter_memory",
        "counter_memory_aligned_evidence",
    }
)
_JSON_TYPES = {
    "list": "a JSON array",
    "str": "a JSON string",
    "int": "a number",
    "float": "a number",
    "bool": "true/false",
    "NoneType": "null",
}


def not_an_object(value: object) -> str:
    """The error for a JSONL line that holds a JSON value other than an object."""
    kind = type(value).__name__
    return f"{JSONL_HINT}, got {_JSON_TYPES.get(kind, kind)}"


def _missing(
    path: Path,
    line: int,
    obj: dict[str, Any],
    key: str,
    where: str = "",
    fields: tuple[str, ...] = FIELDS,
    note: str = "",
) -> DatasetError:
    """``missing field 'key'``, naming a misspelt key of the line when one is close (``answer``)."""
    unknown = [k for k in obj if isinstance(k, str) and k not in fields]
    near = difflib.get_close_matches(key, unknown, n=1, cutoff=0.75)
    parts = [note] if note else []
    if near:
        parts.append(f"the line has {near[0]!r}: did you mean {key!r}?")
    return DatasetError(path, line, "is missing" + (f" ({'; '.join(parts)})" if parts else ""), f"{where}{key}")


def _require_str(path: Path, line: int, obj: dict[str, Any], key: str, where: str = "") -> str:
    value = obj.get(key)
    name = f"{where}{key}"
    if key not in obj:
        raise _missing(path, line, obj, key, where, DOCUMENT_FIELDS if where else FIELDS)
    if not isinstance(value, str):
        raise DatasetError(path, line, f"must be a string, got {type(value).__name__}", name)
    return value


def parse_item(path: Path, line: int, obj: Any, allow_no_documents: bool = False) -> Item:
    """One line of our JSONL schema as an ``Item`` (``allow_no_documents``: a question-only
    line, whose documents come from a corpus)."""
    if not isinstance(obj, dict):
        raise DatasetError(path, line, not_an_object(obj))
    if "id" not in obj:
        raise _missing(path, line, obj, "id")
    item_id = obj.get("id")
    if not isinstance(item_id, (str, int)) or str(item_id) == "":
        raise DatasetError(path, line, "must be a non-empty string", "id")
    question = _require_str(path, line, obj, "question")
    if not question.strip():
        raise DatasetError(path, line, "must not be empty", "question")
    if "answers" not in obj:
        raise _missing(path, line, obj, "answers", note="a list of gold answers; for a label task, the label")
    answers = obj.get("answers")
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise DatasetError(path, line, "must be a non-empty list of non-empty strings", "answers")
    if "documents" not in obj and not allow_no_documents:
        raise _missing(path, line, obj, "documents", note="a list of {id, title, text}")
    raw_docs = obj.get("documents", [])
    if not isinstance(raw_docs, list) or (not raw_docs and not allow_no_documents):
        raise DatasetError(path, line, "must be a non-empty list of documents", "documents")
    docs: list[Document] = []
    doc_ids: set[str] = set()
    for j, raw in enumerate(raw_docs):
        where = f"documents[{j}]."
        if not isinstance(raw, dict):
            raise DatasetError(path, line, "must be an object", f"documents[{j}]")
        doc_id = _require_str(path, line, raw, "id", where)
        title = raw.get("title", "")
        if not isinstance(title, str):
            raise DatasetError(path, line, "must be a string", f"{where}title")
        if title.strip() in ROLE_TITLES:
            title = ""
        text = _require_str(path, line, raw, "text", where)
        if not text.strip():
            raise DatasetError(path, line, "must not be empty", f"{where}text")
        if doc_id in doc_ids:
            raise DatasetError(path, line, f"duplicate document id {doc_id!r}", f"{where}id")
        doc_ids.add(doc_id)
        docs.append(Document(doc_id, title, text))
    supporting = obj.get("supporting", [])
    if not isinstance(supporting, list) or not all(isinstance(s, str) for s in supporting):
        raise DatasetError(path, line, "must be a list of document ids", "supporting")
    for s in supporting:
        if s not in doc_ids:
            raise DatasetError(path, line, f"names no document of this item: {s!r}", "supporting")
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise DatasetError(path, line, "must be an object", "meta")
    gold = obj.get("gold", [])
    if not isinstance(gold, list) or not all(isinstance(g, str) and g for g in gold):
        raise DatasetError(path, line, "must be a list of document ids or titles", "gold")
    return Item(str(item_id), question, tuple(answers), tuple(docs), tuple(supporting), meta, tuple(gold))


def parse_items(path: str | Path, data: bytes, allow_no_documents: bool = False) -> tuple[Item, ...]:
    """Validate the JSONL bytes ``data`` read from ``path`` (named in errors)."""
    return collect_items(path, iter_native(Path(path), data, allow_no_documents))


def iter_native(path: Path, data: bytes, allow_no_documents: bool = False) -> Iterator[tuple[int, Item]]:
    """``(line, item)`` of every non-blank line of the JSONL bytes ``data``."""
    for line_no, obj in parse_lines(path, data.split(b"\n")):
        yield line_no, parse_item(path, line_no, obj, allow_no_documents)


def collect_items(path: str | Path, records: Iterable[tuple[int, Item]]) -> tuple[Item, ...]:
    """The items of ``records`` (``(line, item)``), item ids unique across the file.

    A document id may recur in several items when it names the same document (same
    title and text: real datasets share paragraphs, and the collection keeps one copy);
    one id with different content is an error naming both lines.
    """
    items: list[Item] = []
    item_lines: dict[str, int] = {}
    doc_lines: dict[str, tuple[int, Document]] = {}
    for line_no, item in records:
        if item.id in item_lines:
            raise DatasetError(
                path, line_no, f"duplicate item id {item.id!r} (first on line {item_lines[item.id]})", "id"
            )
        item_lines[item.id] = line_no
        for doc in item.documents:
            first = doc_lines.setdefault(doc.id, (line_no, doc))
            if first[1] != doc:
                what = "title" if first[1].text == doc.text else "text"
                raise DatasetError(
                    path,
                    line_no,
                    f"document id {doc.id!r} has a different {what} than on line {first[0]} (an id several "
                    "items share must name the same document)",
                    "documents.id",
                )
        items.append(item)
    if not items:
        raise DatasetError(path, None, "holds no items")
    return tuple(items)


def read_native(path: Path) -> Iterator[tuple[int, Item]]:
    if not path.is_file():
        raise DatasetError(path, None, "no such file")
    return iter_native(path, path.read_bytes())


register_format(
    Format(
        "bcas",
        "our JSONL schema (bcas/resources/data/README.md)",
        read_native,
        lambda k: {"question", "answers", "documents"} <= k,
        infer_labels=True,
        aliases=("jsonl",),
    )
)
