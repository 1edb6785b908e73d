"""Passage corpora separate from the questions: ``--bcas-corpus PATH``.

BCAS §3.5 searches a dataset-specific index, and the FlashRAG copies of the
benchmarks come with a shared Wikipedia corpus instead of per-question paragraphs;
with ``--bcas-corpus`` every item of a dataset searches this one corpus instead of
its own documents.  Layouts (one JSON object per line; ``PATH`` may be a folder,
whose ``*.jsonl`` files are read in name order):

- ``flashrag``: ``{"id", "contents"}`` with ``contents`` = ``title\\ntext`` (wiki-18
  quotes the title: ``"\\"Aaron\\"\\nAaron is ..."``; the quotes are dropped);
- ``beir``: BEIR's ``corpus.jsonl``, ``{"_id", "title", "text"}``;
- ``documents``: our documents, ``{"id", "title", "text"}``;
- ``fever-wiki``: FEVER's ``wiki-pages/wiki-NNN.jsonl``, ``{"id", "text", "lines"}``;
  the title is the page id with ``_`` and the ``-LRB-``-style tokens undone.

A ``FORMAT:PATH`` names the layout; a bare path is detected from its first record.
The corpus is streamed: iterating it yields ``Document`` objects one at a time
and nothing keeps them, so a 21M-passage corpus never sits in memory as Python
objects.  Documents with empty text are skipped (FEVER's dump has some); a
malformed line is a ``DatasetError`` naming file, line and field.

Gold documents: an item's ``gold_refs`` (its ``gold`` references and the titles of
its supporting documents) are matched against corpus documents by id or by title
(``gold_documents``), in one streamed pass, so evidence recall is computed over
the corpus as over an item's own documents.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bcas.data import load_dataset
from bcas.formats.common import Record
from bcas.formats.stream import first_record, iter_records
from bcas.items import DatasetError, Document, Item

_FEVER_TOKENS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "-COLON-": ":"}


def _flashrag(rec: Record) -> Document:
    doc_id = rec.ident("id")
    contents = rec.str("contents", empty_ok=True)
    title, sep, text = contents.partition("\n")
    if not sep:
        title, text = "", contents
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return Document(doc_id, title, text.strip())


def _beir(rec: Record) -> Document:
    title = rec.get("title", "")
    if not isinstance(title, str):
        raise rec.error("must be a string", "title")
    return Document(rec.ident("_id"), title, rec.str("text", empty_ok=True))


def _documents(rec: Record) -> Document:
    title = rec.get("title", "")
    if not isinstance(title, str):
        raise rec.error("must be a string", "title")
    return Document(rec.ident("id"), title, rec.str("text", empty_ok=True))


def fever_title(page_id: str) -> str:
    """The readable title of a FEVER page id (``Bob_Dylan_-LRB-album-RRB-`` -> ``Bob Dylan (album)``)."""
    title = page_id.replace("_", " ")
    for token, char in _FEVER_TOKENS.items():
        title = title.replace(token, char)
    return title


def _fever_wiki(rec: Record) -> Document | None:
    page = rec.str("id", empty_ok=True)
    text = rec.str("text", empty_ok=True)
    if not page:
        return None
    for token, char in _FEVER_TOKENS.items():
        text = text.replace(token, char)
    return Document(page, fever_title(page), text)


@dataclass(frozen=True)
class CorpusFormat:
    name: str
    description: str
    parse: Callable[[Record], Document | None]
    detect: Callable[[set[str]], bool]
    aliases: tuple[str, ...] = ()


CORPUS_FORMATS: dict[str, CorpusFormat] = {
    f.name: f
    for f in (
        CorpusFormat(
            "flashrag", "FlashRAG corpus JSONL: id, contents = title\\ntext", _flashrag, lambda k: "contents" in k
        ),
        CorpusFormat("beir", "BEIR corpus.jsonl: _id, title, text", _beir, lambda k: {"_id", "text"} <= k),
        CorpusFormat(
            "fever-wiki",
            "FEVER wiki-pages JSONL: id, text, lines",
            _fever_wiki,
            lambda k: {"id", "text", "lines"} <= k,
            aliases=("wiki-pages",),
        ),
        CorpusFormat(
            "documents",
            "our documents JSONL: id, title, text",
            _documents,
            lambda k: {"id", "text"} <= k and not k & {"lines", "contents", "question"},
            aliases=("bcas",),
        ),
    )
}


def lookup_corpus_format(name: str) -> CorpusFormat | None:
    key = name.strip().lower()
    if key in CORPUS_FORMATS:
        return CORPUS_FORMATS[key]
    return next((f for f in CORPUS_FORMATS.values() if key in f.aliases), None)


@dataclass(frozen=True)
class CorpusStats:
    """One validating pass over a corpus: documents kept, skipped (empty text), content hash."""

    documents: int
    skipped: int
    hash: str


_SCANS: dict[tuple[Any, ...], CorpusStats] = {}


class Corpus:
    """A streamed passage corpus (see the module docstring); iterate it for ``Document`` objects."""

    def __init__(self, path: str | Path, fmt: CorpusFormat):
        self.path = Path(path)
        self.format = fmt
        self.files = corpus_files(self.path)

    def __repr__(self) -> str:
        return f"Corpus({str(self.path)!r}, {self.format.name!r})"

    def _records(self) -> Iterator[tuple[Path, int, Any]]:
        for file in self.files:
            for line, obj in iter_records(file):
                yield file, line, obj

    def iter_documents(self, counts: list[int] | None = None) -> Iterator[Document]:
        """Every document, in file order; ``counts`` (if given) gets the number skipped appended."""
        skipped = 0
        for file, line, obj in self._records():
            doc = self.format.parse(Record(file, line, obj))
            if doc is None or not doc.text.strip():
                skipped += 1
                continue
            yield doc
        if counts is not None:
            counts.append(skipped)

    __iter__ = iter_documents

    def _stat_key(self) -> tuple[Any, ...]:
        return (self.format.name,) + tuple(
            (str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in self.files
        )

    def scan(self) -> CorpusStats:
        """Validate every line and compute the content hash (once per process and file state).

        The hash is sha256 over each document's id, title and text (length-prefixed),
        in order: it depends on the passages only, not on the file's formatting or path.
        """
        key = self._stat_key()
        if key not in _SCANS:
            h = hashlib.sha256()
            n = 0
            counts: list[int] = []
            for doc in self.iter_documents(counts):
                for part in (doc.id, doc.title, doc.text):
                    data = part.encode("utf-8")
                    h.update(len(data).to_bytes(8, "little"))
                    h.update(data)
                n += 1
            if n == 0:
                raise DatasetError(self.path, None, "holds no documents with text")
            _SCANS[key] = CorpusStats(n, counts[0] if counts else 0, h.hexdigest())
        return _SCANS[key]

    @property
    def hash(self) -> str:
        return self.scan().hash

    def find(self, refs: Iterable[str]) -> dict[str, set[str]]:
        """ref -> ids of the corpus documents whose id or title is ``ref`` (one streamed pass)."""
        wanted = set(refs)
        by_title: dict[str, list[str]] = {}
        for ref in wanted:
            by_title.setdefault(normalise_title(ref), []).append(ref)
        found: dict[str, set[str]] = {ref: set() for ref in wanted}
        if not wanted:
            return found
        for doc in self.iter_documents():
            if doc.id in found:
                found[doc.id].add(doc.id)
            for ref in by_title.get(normalise_title(doc.title), ()):
                found[ref].add(doc.id)
        return found


def normalise_title(title: str) -> str:
    """Titles compare after Unicode NFC and whitespace collapsing."""
    return " ".join(unicodedata.normalize("NFC", title).split())


def corpus_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".jsonl", ".json"))
        if not files:
            raise DatasetError(path, None, "is a folder without .jsonl files")
        return files
    if not path.is_file():
        raise DatasetError(path, None, "no such file or folder")
    return [path]


def detect_corpus_format(path: Path) -> CorpusFormat:
    """The corpus layout that fits the first record; an error lists the layouts."""
    files = corpus_files(path)
    first = first_record(files[0])
    every = ", ".join(sorted(CORPUS_FORMATS))
    if first is None:
        raise DatasetError(files[0], None, "holds no documents")
    line, obj = first
    if not isinstance(obj, dict):
        raise DatasetError(files[0], line, f"a record must be a JSON object, got {type(obj).__name__}")
    keys = set(obj)
    found = [f for f in CORPUS_FORMATS.values() if f.detect(keys)]
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(sorted(f.name for f in found))
        raise DatasetError(files[0], line, f"the corpus layout is ambiguous: it fits {names}; name one as FORMAT:PATH")
    raise DatasetError(
        files[0],
        line,
        f"no known corpus layout has these keys ({', '.join(sorted(keys)[:12])}); "
        f"name one as FORMAT:PATH; corpus formats: {every}",
    )


def open_corpus(spec: str | Path) -> Corpus:
    """A corpus from ``PATH`` (layout detected) or ``FORMAT:PATH``."""
    text = str(spec)
    head, sep, rest = text.partition(":")
    fmt = lookup_corpus_format(head) if sep and rest else None
    if fmt is not None:
        return Corpus(rest, fmt)
    path = Path(text)
    return Corpus(path, detect_corpus_format(path))


GoldGroups = tuple[frozenset[str], ...]


@dataclass(frozen=True)
class GoldEvidence:
    """An item's gold documents in the searched collection, and the gold references that map to none.

    ``groups``: one group of document ids per gold document (a title may name several
    passages of one article; a paragraph several items share has one id per copy).
    ``unmapped``: the item's gold references (ids or titles) that name no document
    of the collection, counted and reported, never silently dropped.
    """

    groups: GoldGroups = ()
    unmapped: tuple[str, ...] = ()


def _item_evidence(item: Item, ids_of: dict[tuple[str, str], frozenset[str]]) -> GoldEvidence:
    """Gold of one item over its own documents: ``supporting`` ids, then ``gold`` refs by id, else by title."""
    by_id = {d.id: d for d in item.documents}
    by_title: dict[str, list[Document]] = {}
    for doc in item.documents:
        by_title.setdefault(normalise_title(doc.title), []).append(doc)
    groups = {ids_of[(by_id[s].title, by_id[s].text)] for s in item.supporting if s in by_id}
    unmapped: list[str] = []
    for ref in dict.fromkeys(item.gold):
        docs = [by_id[ref]] if ref in by_id else by_title.get(normalise_title(ref), [])
        if not docs:
            unmapped.append(ref)
        groups.update(ids_of[(d.title, d.text)] for d in docs)
    return GoldEvidence(tuple(sorted(groups, key=sorted)), tuple(unmapped))


def gold_evidence(items: Sequence[Item], corpus: Corpus | None = None) -> dict[str, GoldEvidence]:
    """item id -> its :class:`GoldEvidence` in the searched collection.

    Without a corpus the collection is the items' own documents: each supporting
    document, and each ``gold`` reference naming one of the item's documents by id or
    else by normalised title, is a group of the ids that document has in the
    collection (the same title and text in several items is one document).  With a
    corpus each of the item's ``gold_refs`` is a group of the corpus documents with
    that id or normalised title (one streamed pass); references the collection lacks
    are ``unmapped``.
    """
    out: dict[str, GoldEvidence] = {}
    if corpus is None:
        copies: dict[tuple[str, str], set[str]] = {}
        for item in items:
            for doc in item.documents:
                copies.setdefault((doc.title, doc.text), set()).add(doc.id)
        ids_of = {key: frozenset(ids) for key, ids in copies.items()}
        return {item.id: _item_evidence(item, ids_of) for item in items}
    refs = {item.id: item.gold_refs() for item in items}
    found = corpus.find(set().union(*refs.values()) if refs else set())
    for item_id, item_refs in refs.items():
        groups = {frozenset(found[r]) for r in item_refs if found.get(r)}
        unmapped = tuple(sorted({r for r in item_refs if not found.get(r)}))
        out[item_id] = GoldEvidence(tuple(sorted(groups, key=sorted)), unmapped)
    return out


def gold_documents(items: Sequence[Item], corpus: Corpus | None = None) -> dict[str, GoldGroups]:
    """item id -> its gold document groups (:func:`gold_evidence` without the unmapped references)."""
    return {item_id: gold.groups for item_id, gold in gold_evidence(items, corpus).items()}


def evidence_recall(retrieved: Iterable[str], groups: GoldGroups) -> float | None:
    """The fraction of gold groups with at least one retrieved document (None without gold)."""
    if not groups:
        return None
    seen = set(retrieved)
    return sum(1 for group in groups if group & seen) / len(groups)


class InputError(ValueError):
    """A ``--bcas-datasets`` / ``--bcas-corpus`` value cannot run; the message says which and why."""


def check_inputs(datasets: Sequence[str] | None, corpus: str | None) -> None:
    """Validate the session's datasets and corpus before any case runs.

    Every line of every named dataset and of the corpus is read once (parsed items
    are cached for the cases; the corpus scan is cached per file state), so a
    malformed file stops the session with ``file:line: field ...``.  A dataset of
    questions only (no item carries documents) needs a corpus.
    """
    for name in datasets or ():
        try:
            ds = load_dataset(name)
        except DatasetError as exc:
            raise InputError(f"--bcas-datasets: {exc}") from None
        if corpus is None and not any(item.documents for item in ds.items):
            raise InputError(
                f"--bcas-datasets: {name}: its items carry no documents (questions only); "
                "give --bcas-corpus PATH with the passages to search"
            )
    if corpus is not None:
        try:
            open_corpus(corpus).scan()
        except DatasetError as exc:
            raise InputError(f"--bcas-corpus: {exc}") from None
