"""Field checks and item construction shared by the format readers.

Every check raises ``DatasetError`` naming the file, the line the record starts
on and the field (dotted, with list indexes: ``context[3][1]``).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bcas.formats.stream import iter_records
from bcas.items import DatasetError, Document, Item

_MISSING = object()


class Record:
    """One raw record of a file with the position errors are reported at."""

    def __init__(self, path: Path, line: int, obj: Any, prefix: str = ""):
        if not isinstance(obj, dict):
            what = f"field '{prefix.rstrip('.')}' " if prefix else "a record "
            raise DatasetError(path, line, f"{what}must be a JSON object, got {type(obj).__name__}")
        self.path = path
        self.line = line
        self.obj = obj
        self.prefix = prefix

    def error(self, message: str, field: str | None = None) -> DatasetError:
        return DatasetError(self.path, self.line, message, f"{self.prefix}{field}" if field else None)

    def sub(self, key: str) -> Record:
        """The object member ``key`` as a record whose errors name ``key.field``."""
        return Record(self.path, self.line, self.obj.get(key), prefix=f"{self.prefix}{key}.")

    def get(self, key: str, default: Any = None) -> Any:
        return self.obj.get(key, default)

    def has(self, key: str) -> bool:
        return key in self.obj

    def str(self, key: str, *, where: str = "", obj: dict[str, Any] | None = None, empty_ok: bool = False) -> str:
        """A required string field (``where`` prefixes the field name in errors)."""
        src = self.obj if obj is None else obj
        value = src.get(key, _MISSING)
        name = f"{where}{key}"
        if value is _MISSING:
            raise self.error("is missing", name)
        if not isinstance(value, str):
            raise self.error(f"must be a string, got {type(value).__name__}", name)
        if not empty_ok and not value.strip():
            raise self.error("must not be empty", name)
        return value

    def ident(self, key: builtins.str) -> builtins.str:
        """A required id: a non-empty string or an integer."""
        value = self.obj.get(key, _MISSING)
        if value is _MISSING:
            raise self.error("is missing", key)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
            raise self.error("must be a non-empty string or an integer", key)
        return str(value)

    def list(
        self,
        key: builtins.str,
        *,
        where: builtins.str = "",
        obj: dict[builtins.str, Any] | None = None,
        required: bool = True,
    ) -> list[Any]:
        src = self.obj if obj is None else obj
        value = src.get(key, _MISSING)
        name = f"{where}{key}"
        if value is _MISSING or value is None:
            if required:
                raise self.error("is missing", name)
            return []
        if not isinstance(value, list):
            raise self.error(f"must be a list, got {type(value).__name__}", name)
        return value

    def dict(self, key: builtins.str, *, required: bool = False) -> builtins.dict[builtins.str, Any]:
        value = self.obj.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise self.error("is missing", key)
            return {}
        if not isinstance(value, dict):
            raise self.error(f"must be an object, got {type(value).__name__}", key)
        return value

    def answers(self, key: builtins.str, values: Any = _MISSING) -> builtins.list[builtins.str]:
        """A non-empty list of non-empty answer strings (a single string is one answer)."""
        value = self.obj.get(key, _MISSING) if values is _MISSING else values
        if value is _MISSING:
            raise self.error("is missing", key)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.error(f"must be an answer string or a list of them, got {type(value).__name__}", key)
        if not value:
            raise self.error("must be a non-empty list of answers", key)
        out: list[str] = []
        for j, a in enumerate(value):
            if not isinstance(a, str) or not a.strip():
                raise self.error("must be a non-empty string", f"{key}[{j}]")
            if a not in out:
                out.append(a)
        return out


def records(path: Path, member: str | None = None) -> Iterator[tuple[int, Record]]:
    """``(line, record)`` of every record ``iter_records`` streams from ``path``; a record must be an object."""
    for line, obj in iter_records(path, member):
        yield line, Record(path, line, obj)


def collapse(text: str) -> str:
    """Whitespace collapsed to single spaces (the fixtures' normalisation)."""
    return " ".join(text.split())


def join_sentences(sentences: Iterable[str]) -> str:
    """Sentences of a paragraph as one text (HotpotQA keeps leading spaces; 2Wiki may not)."""
    out = ""
    for s in sentences:
        if out and s and not out[-1].isspace() and not s[0].isspace():
            out += " "
        out += s
    return collapse(out)


def paragraphs(rec: Record, key: str) -> list[tuple[str, str]]:
    """``[[title, [sentence, ...]], ...]`` (HotpotQA / 2Wiki ``context``) or its columnar form.

    The columnar form ``{"title": [...], "sentences"|"content": [[...], ...]}`` is what
    FlashRAG's and Hugging Face's copies store.
    """
    value = rec.obj.get(key)
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        titles = value.get("title")
        bodies = value.get("sentences", value.get("content"))
        if not isinstance(titles, list) or not isinstance(bodies, list) or len(titles) != len(bodies):
            raise rec.error("must hold equally long lists 'title' and 'sentences'", key)
        pairs = list(zip(titles, bodies, strict=True))
    elif isinstance(value, list):
        pairs = []
        for j, entry in enumerate(value):
            if not isinstance(entry, list) or len(entry) != 2:
                raise rec.error("must be a [title, sentences] pair", f"{key}[{j}]")
            pairs.append((entry[0], entry[1]))
    else:
        raise rec.error("must be a list of [title, sentences] pairs", key)
    for j, (title, body) in enumerate(pairs):
        if not isinstance(title, str):
            raise rec.error("must be a string", f"{key}[{j}][0]")
        if isinstance(body, str):
            body = [body]
        if not isinstance(body, list) or not all(isinstance(s, str) for s in body):
            raise rec.error("must be a list of sentence strings", f"{key}[{j}][1]")
        out.append((title, join_sentences(body)))
    return out


def paragraph_objects(rec: Record, key: str, *, strict: bool = True) -> tuple[list[tuple[str, str]], list[int]]:
    """MuSiQue's ``[{"title", "paragraph_text", "is_supporting"}, ...]``: documents and supporting positions.

    ``strict``: ``is_supporting`` must be true or false where present (MuSiQue's own
    files); otherwise only ``true`` marks a paragraph (FlashRAG's copies).
    """
    docs: list[tuple[str, str]] = []
    supporting: list[int] = []
    for j, para in enumerate(rec.list(key)):
        where = f"{key}[{j}]."
        if not isinstance(para, dict):
            raise rec.error("must be an object", f"{key}[{j}]")
        title = rec.str("title", where=where, obj=para, empty_ok=True)
        text = rec.str("paragraph_text", where=where, obj=para, empty_ok=True)
        flag = para.get("is_supporting", False)
        if strict and not isinstance(flag, bool):
            raise rec.error("must be true or false", f"{where}is_supporting")
        if flag is True:
            supporting.append(len(docs))
        docs.append((title, collapse(text)))
    return docs, supporting


def fact_titles(rec: Record, value: Any, key: str) -> list[str]:
    """Titles of ``supporting_facts``: ``[[title, sent_id], ...]`` or ``{"title": [...], ...}``."""
    titles: list[str] = []
    if value is None:
        return titles
    if isinstance(value, dict):
        raw = value.get("title")
        if not isinstance(raw, list):
            raise rec.error("must hold a list 'title'", key)
        entries = [(t, f"{key}.title[{j}]") for j, t in enumerate(raw)]
    elif isinstance(value, list):
        entries = []
        for j, fact in enumerate(value):
            if not isinstance(fact, list) or not fact:
                raise rec.error("must be a [title, sentence id] pair", f"{key}[{j}]")
            entries.append((fact[0], f"{key}[{j}][0]"))
    else:
        raise rec.error("must be a list of [title, sentence id] pairs", key)
    for title, name in entries:
        if not isinstance(title, str):
            raise rec.error("must be a string", name)
        if title not in titles:
            titles.append(title)
    return titles


def make_item(
    rec: Record,
    item_id: str,
    question: str,
    answers: Sequence[str],
    docs: Sequence[tuple[str, str]] = (),
    supporting_index: Iterable[int] = (),
    meta: dict[str, Any] | None = None,
    gold: Iterable[str] = (),
) -> Item:
    """An ``Item`` whose documents are ``(title, text)`` pairs with ids ``<item id>::<n>``.

    Empty-text documents are dropped (the original files hold a few); ``supporting_index``
    names documents by their position in ``docs``.
    """
    if not question.strip():
        raise rec.error("must not be empty", "question")
    documents: list[Document] = []
    index_to_id: dict[int, str] = {}
    for n, (title, text) in enumerate(docs):
        if not text.strip():
            continue
        doc_id = f"{item_id}::{n}"
        index_to_id[n] = doc_id
        documents.append(Document(doc_id, title, text))
    supporting = tuple(dict.fromkeys(index_to_id[n] for n in supporting_index if n in index_to_id))
    refs = tuple(dict.fromkeys(g for g in gold if g))
    return Item(item_id, question, tuple(answers), tuple(documents), supporting, dict(meta or {}), refs)
