"""The data model every dataset loader produces: items, documents, errors, content hash.

``bcas.data`` (the registry and our JSONL schema) and ``bcas.formats`` (readers of
the official and FlashRAG layouts) both build these, and ``bcas.corpus`` yields
``Document`` objects from a passage corpus; this module imports none of them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DatasetError(ValueError):
    """A dataset or corpus file is malformed; the message names file, line and field."""

    def __init__(self, path: str | Path, line: int | None, message: str, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        where = f"{self.path}:{line}" if line is not None else self.path
        if field and message.startswith("is missing"):  # "missing field 'answers'" reads as what it is
            super().__init__(f"{where}: missing field '{field}'{message[len('is missing') :]}")
            return
        what = f"field '{field}' " if field else ""
        super().__init__(f"{where}: {what}{message}")


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Item:
    """One question (or claim) with its answers and, where the format has them, its documents.

    ``supporting``: ids of this item's own documents that support the answer.
    ``gold``: references to gold documents *outside* the item (a corpus given with
    ``--bcas-corpus``): each is matched against a corpus document's id or title.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    documents: tuple[Document, ...]
    supporting: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    gold: tuple[str, ...] = ()

    def canonical(self) -> dict[str, Any]:
        """The item as plain JSON-ready data (the input of the content hash).

        ``gold`` is included only when non-empty, so items without it hash as they
        always have.
        """
        out: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "answers": list(self.answers),
            "documents": [{"id": d.id, "title": d.title, "text": d.text} for d in self.documents],
            "supporting": list(self.supporting),
            "meta": self.meta,
        }
        if self.gold:
            out["gold"] = list(self.gold)
        return out

    def gold_refs(self) -> set[str]:
        """Ids or titles naming this item's gold documents in a separate corpus.

        The explicit ``gold`` references plus the titles of the item's own supporting
        documents (a corpus paragraph with the same title is the same page).
        """
        by_id = {d.id: d for d in self.documents}
        refs = set(self.gold)
        refs.update(by_id[s].title for s in self.supporting if s in by_id and by_id[s].title)
        return refs


def content_hash(items: tuple[Item, ...] | list[Item]) -> str:
    """sha256 over the canonical JSON of the items, in order."""
    h = hashlib.sha256()
    for item in items:
        h.update(json.dumps(item.canonical(), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()
