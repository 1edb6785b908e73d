"""Chunking: documents into the retrieval units of one collection (BCAS §3.5).

BCAS returns chunk-level candidates from a dataset-specific index.  The rules here:

- A document is split into paragraphs at blank lines.  A paragraph is one chunk
  unless it holds more than ``chunk_tokens`` white-space tokens; then it is cut into
  windows of ``chunk_tokens`` tokens whose starts are ``chunk_tokens - chunk_overlap``
  apart, the last window ending at the paragraph's end.  Window text is the original
  substring (white space inside a window is kept as it was).
- Chunk ids are ``<doc_id>#<n>`` with ``n`` counting the chunks of one document from 0,
  so a chunk id maps back to its document (``Chunk.doc_id``) and title.
- The title is searchable: ``Chunk.indexed_text`` (what BM25 and the embedder see) is
  the title, a newline, and the chunk text.  Hits return the chunk text without it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bcas.data import Document

CHUNK_ID_SEP = "#"
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class Chunk:
    """One retrieval unit: a paragraph or a window of a long paragraph."""

    id: str
    doc_id: str
    title: str
    text: str

    @property
    def indexed_text(self) -> str:
        """The text that is indexed: title and chunk text, so the title is searchable."""
        return f"{self.title}\n{self.text}" if self.title else self.text


def split_paragraph(text: str, chunk_tokens: int, chunk_overlap: int) -> list[str]:
    """Cut one paragraph into windows of at most ``chunk_tokens`` white-space tokens.

    Consecutive windows share ``chunk_overlap`` tokens; a paragraph that fits is
    returned whole.  Every token lies in at least one window.
    """
    if chunk_tokens <= 0 or not 0 <= chunk_overlap < chunk_tokens:
        raise ValueError(f"need chunk_tokens > chunk_overlap >= 0, got {chunk_tokens} and {chunk_overlap}")
    spans = [m.span() for m in _TOKEN.finditer(text)]
    if not spans:
        return []
    if len(spans) <= chunk_tokens:
        return [text.strip()]
    step = chunk_tokens - chunk_overlap
    windows: list[str] = []
    start = 0
    while True:
        end = min(start + chunk_tokens, len(spans))
        windows.append(text[spans[start][0] : spans[end - 1][1]])
        if end == len(spans):
            return windows
        start += step


def chunk_document(doc: Document, chunk_tokens: int = 256, chunk_overlap: int = 32) -> list[Chunk]:
    """The chunks of one document, in reading order, ids ``<doc_id>#0``, ``#1``, ..."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(doc.text):
        pieces.extend(split_paragraph(paragraph, chunk_tokens, chunk_overlap))
    return [Chunk(f"{doc.id}{CHUNK_ID_SEP}{n}", doc.id, doc.title, piece) for n, piece in enumerate(pieces)]


def chunk_documents(documents: Iterable[Document], chunk_tokens: int = 256, chunk_overlap: int = 32) -> list[Chunk]:
    """Chunk a collection; raise ``ValueError`` if two documents share an id."""
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for doc in documents:
        if doc.id in seen:
            raise ValueError(
                f"document id {doc.id!r} occurs twice in the collection; de-duplicate first "
                "(Dataset.documents does) or give each document a unique id"
            )
        seen.add(doc.id)
        chunks.extend(chunk_document(doc, chunk_tokens, chunk_overlap))
    return chunks


def collection_hash(chunks: Iterable[Chunk]) -> str:
    """sha256 over the chunk ids, titles and texts, in order: the identity of an index's input."""
    h = hashlib.sha256()
    for chunk in chunks:
        hash_chunk(h, chunk)
    return h.hexdigest()


def hash_chunk(h: Any, chunk: Chunk) -> None:
    """Feed one chunk to a running :func:`collection_hash` (``h``: a ``hashlib.sha256()``)."""
    for part in (chunk.id, chunk.title, chunk.text):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
