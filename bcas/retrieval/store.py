"""Chunks on disk: a collection chunked as it streams by, read back by position (BCAS §3.5).

BCAS searches a dataset-specific chunk index; for a corpus of millions of passages
the chunks cannot sit in memory as Python objects.  ``write_chunk_store`` reads the
documents once, chunks each (:func:`bcas.retrieval.chunking.chunk_document`, the
same rules as the in-memory path) and appends it to disk, computing the collection
hash on the way; :class:`ChunkStore` reads a chunk by its position from a
memory-mapped file, so a retriever holds a few arrays, not the text.

Files of a store folder:

- ``chunks.jsonl``: one JSON array ``[id, doc_id, title, text]`` per chunk, in order;
- ``offsets.npy``: int64 byte offset of every line, and the file length (n + 1 entries);
- ``doc_keys.npy`` / ``doc_first.npy`` / ``doc_count.npy``: per document (sorted by
  key), a 64-bit key of its id (the first 8 bytes of its blake2b-128 digest), its
  first chunk's position and its number of chunks, so ``exclude_ids`` finds a
  document's or a chunk's positions by binary search;
- ``store.json``: counts, the collection hash and the chunking parameters.

A document id that occurs twice is an error (as in ``chunk_documents``): the
128-bit digests of all ids are compared after the pass.  :class:`ChunkList` gives an
in-memory list of chunks the same ``positions`` lookup.
"""

from __future__ import annotations

import hashlib
import json
import mmap
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from bcas.data import Document
from bcas.retrieval.chunking import CHUNK_ID_SEP, Chunk, chunk_document, hash_chunk
from bcas.retrieval.progress import bars_off

STORE_FORMAT_VERSION = 1
CHUNKS_FILE = "chunks.jsonl"
STORE_META = "store.json"


def _digest(doc_id: str) -> bytes:
    return hashlib.blake2b(doc_id.encode("utf-8"), digest_size=16).digest()


def doc_key(doc_id: str) -> int:
    """The 64-bit lookup key of a document id."""
    return int.from_bytes(_digest(doc_id)[:8], "little")


def write_chunk_store(
    documents: Iterable[Document],
    folder: Path,
    *,
    chunk_tokens: int = 256,
    chunk_overlap: int = 32,
    progress: bool = True,
) -> dict[str, Any]:
    """Chunk ``documents`` into a store in ``folder``; returns ``store.json``'s content."""
    from tqdm.auto import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    offsets = array("q", [0])
    keys, keys_lo, firsts, counts = array("Q"), array("Q"), array("q"), array("i")
    position = 0
    with (
        (folder / CHUNKS_FILE).open("wb") as out,
        tqdm(desc="chunks: write", unit="doc", disable=bars_off(progress), leave=False) as bar,
    ):
        end = 0
        for doc in documents:
            digest = _digest(doc.id)
            keys.append(int.from_bytes(digest[:8], "little"))
            keys_lo.append(int.from_bytes(digest[8:], "little"))
            firsts.append(position)
            pieces = chunk_document(doc, chunk_tokens, chunk_overlap)
            counts.append(len(pieces))
            for chunk in pieces:
                hash_chunk(h, chunk)
                line = json.dumps([chunk.id, chunk.doc_id, chunk.title, chunk.text], ensure_ascii=False)
                data = line.encode("utf-8") + b"\n"
                out.write(data)
                end += len(data)
                offsets.append(end)
            position += len(pieces)
            bar.update(1)
    key_arr = np.frombuffer(keys, dtype=np.uint64)
    lo_arr = np.frombuffer(keys_lo, dtype=np.uint64)
    order = np.lexsort((lo_arr, key_arr))
    key_arr, lo_arr = key_arr[order], lo_arr[order]
    first_arr = np.frombuffer(firsts, dtype=np.int64)[order]
    count_arr = np.frombuffer(counts, dtype=np.int32)[order]
    same = np.flatnonzero((key_arr[1:] == key_arr[:-1]) & (lo_arr[1:] == lo_arr[:-1]))
    if len(same):
        raise ValueError(_duplicate_message(folder, offsets, first_arr, count_arr, int(same[0])))
    np.save(folder / "offsets.npy", np.frombuffer(offsets, dtype=np.int64), allow_pickle=False)
    np.save(folder / "doc_keys.npy", key_arr, allow_pickle=False)
    np.save(folder / "doc_first.npy", first_arr, allow_pickle=False)
    np.save(folder / "doc_count.npy", count_arr, allow_pickle=False)
    meta = {
        "format": STORE_FORMAT_VERSION,
        "chunks": position,
        "documents": len(key_arr),
        "collection": h.hexdigest(),
        "chunk_tokens": chunk_tokens,
        "chunk_overlap": chunk_overlap,
    }
    (folder / STORE_META).write_text(json.dumps(meta, sort_keys=True))
    return meta


def _duplicate_message(folder: Path, offsets: array[int], first: np.ndarray, count: np.ndarray, at: int) -> str:
    """The error for two documents with one id (named when either has a chunk to read it from)."""
    doc = "(an empty document's id)"
    for j in (at, at + 1):
        if count[j] > 0:
            with (folder / CHUNKS_FILE).open("rb") as fh:
                fh.seek(offsets[int(first[j])])
                doc = repr(json.loads(fh.readline())[1])
            break
    return (
        f"document id {doc} occurs twice in the collection; de-duplicate first "
        "(Dataset.documents does) or give each document a unique id"
    )


class ChunkStore(Sequence[Chunk]):
    """A chunk store folder opened read-only; ``store[i]`` is chunk ``i`` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.meta = json.loads((self.folder / STORE_META).read_text())
        if self.meta.get("format") != STORE_FORMAT_VERSION:
            raise ValueError(f"{self.folder}: chunk store format {self.meta.get('format')} != {STORE_FORMAT_VERSION}")
        self.offsets = np.load(self.folder / "offsets.npy", mmap_mode="r")
        self.doc_keys = np.load(self.folder / "doc_keys.npy", mmap_mode="r")
        self.doc_first = np.load(self.folder / "doc_first.npy", mmap_mode="r")
        self.doc_count = np.load(self.folder / "doc_count.npy", mmap_mode="r")
        n = int(self.meta["chunks"])
        if len(self.offsets) != n + 1 or len(self.doc_keys) != self.meta["documents"]:
            raise ValueError(f"{self.folder}: chunk store arrays disagree with {STORE_META}")
        size = (self.folder / CHUNKS_FILE).stat().st_size
        if int(self.offsets[-1]) != size:
            raise ValueError(f"{self.folder}: {CHUNKS_FILE} has {size} bytes, offsets say {int(self.offsets[-1])}")
        self._fh = (self.folder / CHUNKS_FILE).open("rb")
        self._data = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    @property
    def collection(self) -> str:
        return str(self.meta["collection"])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        return f"ChunkStore({str(self.folder)!r}, chunks={len(self)})"

    def _read(self, i: int) -> Chunk:
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        return Chunk(*json.loads(self._data[start:end]))

    @overload
    def __getitem__(self, index: int) -> Chunk: ...

    @overload
    def __getitem__(self, index: slice) -> list[Chunk]: ...

    def __getitem__(self, index: int | slice) -> Chunk | list[Chunk]:
        n = len(self)
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(n))]
        i = int(index)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"chunk position {index} out of range for {n} chunks")
        return self._read(i)

    def __iter__(self) -> Iterator[Chunk]:
        return (Chunk(*json.loads(line)) for line in self.lines())

    def lines(self, start: int = 0) -> Iterator[bytes]:
        """The raw JSON lines from chunk ``start`` on, read sequentially."""
        with (self.folder / CHUNKS_FILE).open("rb") as fh:
            fh.seek(int(self.offsets[start]))
            yield from fh

    def iter_texts(self, start: int = 0) -> Iterator[str]:
        """``Chunk.indexed_text`` of every chunk from ``start`` on, in order."""
        for line in self.lines(start):
            _, _, title, text = json.loads(line)
            yield f"{title}\n{text}" if title else text

    def _documents(self, doc_id: str) -> list[tuple[int, int]]:
        """(first position, chunk count) of the document ``doc_id``, or [] when it is not stored."""
        key = np.uint64(doc_key(doc_id))
        lo = int(np.searchsorted(self.doc_keys, key, side="left"))
        hi = int(np.searchsorted(self.doc_keys, key, side="right"))
        found = []
        for j in range(lo, hi):
            first, count = int(self.doc_first[j]), int(self.doc_count[j])
            if count and self._read(first).doc_id == doc_id:
                found.append((first, count))
        return found

    def positions(self, keys: Iterable[str]) -> np.ndarray | None:
        """Positions named by chunk ids (``<doc_id>#<n>``) or document ids, as ``Retriever`` excludes them.

        An entry that is a chunk id names that chunk; otherwise it names every chunk of
        the document with that id; unknown ids name nothing.  Sorted, unique; ``None`` if empty.
        """
        out: list[int] = []
        for key in keys:
            doc_id, sep, n = key.rpartition(CHUNK_ID_SEP)
            if sep and n.isdigit() and str(int(n)) == n:
                hit = [first + int(n) for first, count in self._documents(doc_id) if int(n) < count]
                if hit:
                    out.extend(hit)
                    continue
            for first, count in self._documents(key):
                out.extend(range(first, first + count))
        return np.unique(np.asarray(out, dtype=np.int64)) if out else None

    def close(self) -> None:
        if isinstance(self._data, mmap.mmap):
            self._data.close()
        self._fh.close()


class ChunkList(list[Chunk]):
    """An in-memory list of chunks with :meth:`ChunkStore.positions`'s lookup."""

    def __init__(self, chunks: Iterable[Chunk] = ()) -> None:
        super().__init__(chunks)
        self._chunk_pos = {c.id: i for i, c in enumerate(self)}
        self._doc_chunks: dict[str, list[int]] = {}
        for i, c in enumerate(self):
            self._doc_chunks.setdefault(c.doc_id, []).append(i)

    def positions(self, keys: Iterable[str]) -> np.ndarray | None:
        out: list[int] = []
        for key in keys:
            pos = self._chunk_pos.get(key)
            if pos is not None:
                out.append(pos)
            else:
                out.extend(self._doc_chunks.get(key, ()))
        return np.unique(np.asarray(out, dtype=np.int64)) if out else None
