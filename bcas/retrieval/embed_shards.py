"""Chunk embeddings computed in shards on disk, resumable after a kill (BCAS §3.5).

BCAS's dense retriever embeds every chunk of the collection (BGE-M3 in the paper,
MiniLM on our CPU default).  For a large corpus that is hours of work, so
:func:`embed_resumable` writes the vectors in shards of ``shard_size`` rows as it goes:

- shard ``vectors-<first row>.npy`` holds rows ``first .. first + shard_size - 1``
  (the last shard fewer), float32, unit length; it is written to a temporary name and
  renamed, so a shard file is complete or absent, whatever kills the process;
- ``meta.json`` names the embedder (model id, dimension), the row count and the shard
  size; a work folder whose meta differs is cleared, never mixed;
- a rerun keeps the complete shards from row 0 on and continues with the first
  missing one; each shard is encoded by one ``encode`` call on exactly its texts, in
  batches of ``batch_size``, so an interrupted and resumed build computes the same
  batches as an uninterrupted one.

A progress bar (tqdm, on stderr) counts rows, starting from the rows already done; the
finished run logs its speed and returns it (``embedded_chunks``, ``embed_seconds``,
``chunks_per_s``) into the embeddings manifest's ``info``.
:class:`EmbeddingShards` reads the finished shards memory-mapped: block by block
for building a faiss index, or selected rows for training one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from bcas.retrieval.progress import EmbedProgress, bars_off

SHARD_SIZE = 4096
log = logging.getLogger(__name__)
META = "embeddings.json"
_SHARD = re.compile(r"vectors-(\d{12})\.npy")


def shard_name(first: int) -> str:
    return f"vectors-{first:012d}.npy"


def _shard_rows(path: Path) -> tuple[int, int] | None:
    """(rows, dim) of a complete shard file, or None when it cannot be read."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    if arr.dtype != np.float32 or arr.ndim != 2:
        return None
    return int(arr.shape[0]), int(arr.shape[1])


def completed_rows(work: Path, meta: dict[str, Any]) -> int:
    """Rows of the contiguous complete shards from row 0 in ``work`` (after checking ``meta``).

    A work folder written for another embedder, row count or shard size is emptied;
    files past the first missing shard, and temporary files, are removed.
    """
    meta_path = work / META
    try:
        old = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        old = None
    if old != meta:
        for f in work.iterdir():
            f.unlink()
        meta_path.write_text(json.dumps(meta, sort_keys=True))
        return 0
    n, shard, dim = meta["rows"], meta["shard_size"], meta["dim"]
    done: int = 0
    while done < n and _shard_rows(work / shard_name(done)) == (min(shard, n - done), dim):
        done += shard
    done = min(done, n)
    keep = {shard_name(first) for first in range(0, done, shard)} | {META}
    for f in work.iterdir():
        if f.name not in keep:
            f.unlink()
    return done


def embed_resumable(
    embedder: Any,
    texts_from: Callable[[int], Iterator[str]],
    n: int,
    work: Path,
    *,
    shard_size: int = SHARD_SIZE,
    batch_size: int = 64,
    progress: bool = True,
) -> dict[str, Any]:
    """Embed ``n`` texts into shards in ``work``, resuming after the last complete shard.

    ``texts_from(start)`` yields the texts from row ``start`` on.  Returns the meta
    (``embeddings.json``) plus ``resumed_from``, the row the run started at.
    """
    from tqdm.auto import tqdm

    if shard_size <= 0:
        raise ValueError(f"shard_size must be > 0, got {shard_size}")
    work.mkdir(parents=True, exist_ok=True)
    meta = {"model_id": embedder.model_id, "dim": int(embedder.dim), "rows": int(n), "shard_size": int(shard_size)}
    done = completed_rows(work, meta)
    texts = texts_from(done)
    started = time.perf_counter()
    said = EmbedProgress(f"dense index: embedding with {embedder.name}", n, done)
    with tqdm(
        total=n,
        initial=done,
        desc=f"dense: embed ({embedder.name})",
        unit="chunk",
        file=sys.stderr,
        disable=bars_off(progress),
        leave=False,
    ) as bar:
        for first in range(done, n, shard_size):
            block = list(islice(texts, min(shard_size, n - first)))
            if len(block) != min(shard_size, n - first):
                raise ValueError(f"the collection yielded {first + len(block)} texts, {n} expected")
            parts = []  # in pieces, for the progress lines (the first piece small: its speed gives the ETA)
            at = 0
            while at < len(block):
                size = EmbedProgress.PROBE_CHUNKS if said.done == said.first else max(batch_size * 8, 1)
                piece = block[at : at + size]
                parts.append(np.asarray(embedder.encode(piece, batch_size=batch_size), dtype=np.float32))
                said.update(len(piece))
                at += len(piece)
            vectors = np.ascontiguousarray(
                np.concatenate(parts) if parts else np.zeros((0, meta["dim"])), dtype=np.float32
            )
            if vectors.shape != (len(block), meta["dim"]):
                raise ValueError(f"embedder {embedder.name!r} returned shape {vectors.shape} for {len(block)} texts")
            tmp = work / f".{shard_name(first)}.tmp"
            with tmp.open("wb") as fh:
                np.save(fh, vectors, allow_pickle=False)
            os.replace(tmp, work / shard_name(first))
            bar.update(len(block))
    speed = build_speed(n - done, time.perf_counter() - started)
    log.info("dense: embedded %d chunks with %s at %s chunks/s", n - done, embedder.name, speed["chunks_per_s"])
    return {**meta, "resumed_from": done, **speed}


def build_speed(chunks: int, seconds: float) -> dict[str, Any]:
    """What an embedding run realised, for the index manifest: chunks, seconds, chunks/s."""
    rate = round(chunks / seconds, 1) if seconds > 0 else None
    return {"embedded_chunks": chunks, "embed_seconds": round(seconds, 3), "chunks_per_s": rate}


class EmbeddingShards:
    """The finished shards of one collection's embeddings, memory-mapped."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.meta = json.loads((self.folder / META).read_text())
        self.rows, self.dim, shard = int(self.meta["rows"]), int(self.meta["dim"]), int(self.meta["shard_size"])
        self.firsts = list(range(0, self.rows, shard))
        self.shards = [np.load(self.folder / shard_name(f), mmap_mode="r", allow_pickle=False) for f in self.firsts]
        for first, arr in zip(self.firsts, self.shards, strict=True):
            if arr.shape != (min(shard, self.rows - first), self.dim) or arr.dtype != np.float32:
                raise ValueError(f"{self.folder / shard_name(first)}: shape {arr.shape}, dtype {arr.dtype} unexpected")
        self.shard_size = shard
        self.speed: dict[str, Any] | None = None  # set when this process computed them (build_speed)

    def __len__(self) -> int:
        return self.rows

    def blocks(self) -> Iterator[np.ndarray]:
        yield from self.shards

    def take(self, positions: np.ndarray, axis: int = 0) -> np.ndarray:
        """Rows at ``positions`` (an ``ndarray.take``-like signature for faiss training)."""
        if axis != 0:
            raise ValueError("rows only (axis=0)")
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty((len(positions), self.dim), dtype=np.float32)
        which = positions // self.shard_size
        for s in np.unique(which):
            sel = which == s
            out[sel] = self.shards[int(s)][positions[sel] - self.firsts[int(s)]]
        return out

    def array(self) -> np.ndarray:
        """All rows in one in-memory array (small collections and tests)."""
        if not self.shards:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([np.asarray(s) for s in self.shards])


def shard_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if _SHARD.fullmatch(p.name))
