"""Streamed build of the phrase-boosted BM25 index, written straight to disk (BCAS §3.5).

``BM25Index.build`` holds every chunk's token list in memory and lets bm25s build its
score matrix there; at a million passages that is gigabytes of Python objects.
:func:`write_bm25_index` reads the chunk texts once as a stream and never holds more
than one block of them; the result is the folder ``BM25Index.save`` writes (bm25s's
own files under ``bm25s/`` plus the phrase arrays), which ``BM25Index.load(folder,
mmap=True)`` memory-maps.  The index is the same one: the same analysis, vocabulary
order, Lucene BM25 weights (bm25s's formula with its float32/float64 arithmetic,
see :func:`lucene_weights`) and phrase pairs, so scores equal the in-memory build's.

Passes (``block_tokens`` bounds the tokens held at a time):

1. tokenise every chunk (:class:`bcas.retrieval.bm25.Analyzer`), assign vocabulary ids in
   order of first occurrence, append the ids to ``tokens.bin`` (int32) and count each
   term's document frequency per block;
2. per block, each (chunk, term) pair's weight ``idf(t) · tf / (k1 · (1 − b + b · |c| /
   avgdl) + tf)`` is placed into the CSC arrays (column = term, rows ascending),
   memory-mapped on disk; the block's in-slop bigram/trigram pairs are sorted and
   written as a run;
3. the runs are merged by key ranges into ``phrase_keys.npy`` / ``phrase_chunks.npy``
   (an external merge: one key range in memory at a time).
"""

from __future__ import annotations

import json
import math
import mmap
import shutil
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bcas.retrieval.bm25 import (
    BM25_B,
    BM25_K1,
    DEFAULT_STEMMER,
    PHRASE_FORMAT_VERSION,
    Analyzer,
    BM25Error,
    hashed_trigrams_for,
    phrase_pairs,
)
from bcas.retrieval.progress import bars_off

BLOCK_TOKENS = 1 << 20  # tokens per block in passes 1 and 2 (~1M: ~6M phrase pairs, ~0.3 GB while sorted)
MERGE_PAIRS = 1 << 23  # phrase pairs per key range in the merge (~0.3 GB with its sort)


class _DiskArray:
    """A ``.npy`` file of a given length, written by position without keeping the pages in this process.

    Writes go through a shared mapping whose pages are released (``MADV_DONTNEED``) after
    every block, so they count in the page cache, not in the builder's resident memory.
    """

    def __init__(self, path: Path, dtype: Any, n: int) -> None:
        header = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n,))
        offset = header.offset
        del header
        self._fh = path.open("r+b")
        self._mm = mmap.mmap(self._fh.fileno(), 0)
        self.array = np.frombuffer(self._mm, dtype=dtype, count=n, offset=offset)

    def release(self) -> None:
        """Drop this process's pages (the data stays in the file: a shared mapping)."""
        if hasattr(mmap, "MADV_DONTNEED"):
            self._mm.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        del self.array
        self._mm.flush()
        self._mm.close()
        self._fh.close()


def lucene_idf_bm25s(doc_freq: np.ndarray, n_docs: int) -> np.ndarray:
    """bm25s's float32 idf array: ``math.log(1 + (N - df + 0.5) / (df + 0.5))`` per term."""
    return np.array([math.log(1 + (n_docs - df + 0.5) / (df + 0.5)) for df in doc_freq.tolist()], dtype=np.float32)


def lucene_weights(
    tf: np.ndarray, doc_len: np.ndarray, idf: np.ndarray, avg_doc_len: np.float64, k1: float, b: float
) -> np.ndarray:
    """Per (chunk, term) pair the Lucene BM25 weight, computed as bm25s computes it.

    bm25s evaluates ``tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf)`` with float32 ``tf``,
    an integer ``l_d`` and a float64 ``l_avg`` (so in float64), multiplies by the float32
    idf and stores float32; the same operations in the same order give the same bits.
    """
    tf32 = tf.astype(np.float32)
    denom = k1 * ((1 - b) + b * doc_len.astype(np.float64) / avg_doc_len) + tf32
    return (idf * (tf32 / denom)).astype(np.float32)


class _Tokens:
    """Pass 1's output: ``tokens.bin`` (int32 ids), chunk lengths, vocabulary, document frequencies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lengths = array("q")
        self.vocab: dict[str, int] = {}
        self.df = np.zeros(0, dtype=np.int64)

    def read(self, texts: Iterable[str], analyzer: Analyzer, block_tokens: int, progress: bool) -> None:
        from tqdm.auto import tqdm

        vocab = self.vocab
        buf = array("i")
        block_lengths = array("q")
        with self.path.open("wb") as out:
            for text in tqdm(texts, desc="bm25: tokenise", unit="chunk", disable=bars_off(progress), leave=False):
                ids = [vocab.setdefault(tok, len(vocab)) for tok in analyzer(text)]
                buf.extend(ids)
                block_lengths.append(len(ids))
                if len(buf) >= block_tokens:
                    self._flush(out, buf, block_lengths)
                    buf, block_lengths = array("i"), array("q")
            self._flush(out, buf, block_lengths)

    def _flush(self, out: Any, buf: array[int], block_lengths: array[int]) -> None:
        out.write(buf.tobytes())
        self.lengths.extend(block_lengths)
        v = len(self.vocab)
        if len(self.df) < v:
            self.df = np.concatenate([self.df, np.zeros(v - len(self.df), dtype=np.int64)])
        if not buf:
            return
        tokens = np.frombuffer(buf, dtype=np.int32).astype(np.int64)
        owner = np.repeat(np.arange(len(block_lengths), dtype=np.int64), np.frombuffer(block_lengths, dtype=np.int64))
        terms = np.unique(owner * v + tokens) % v
        self.df += np.bincount(terms, minlength=v)

    def blocks(self, block_tokens: int) -> Iterable[tuple[int, np.ndarray, np.ndarray]]:
        """(first chunk, chunk lengths, token ids) per block of whole chunks."""
        lengths = np.frombuffer(self.lengths, dtype=np.int64)
        if not len(lengths):
            return
        ends = np.cumsum(lengths)
        start_chunk, start_tok = 0, 0
        while start_chunk < len(lengths):
            stop = int(np.searchsorted(ends, start_tok + block_tokens, side="right"))
            stop = max(stop, start_chunk + 1)
            stop_tok = int(ends[stop - 1])
            tokens = np.fromfile(self.path, dtype=np.int32, count=stop_tok - start_tok, offset=4 * start_tok)
            yield start_chunk, lengths[start_chunk:stop], tokens
            start_chunk, start_tok = stop, stop_tok


def write_bm25_index(
    texts: Iterable[str],
    folder: Path,
    *,
    stemmer: str | None = DEFAULT_STEMMER,
    phrase_slop: int = 1,
    progress: bool = True,
    block_tokens: int = BLOCK_TOKENS,
    merge_pairs: int = MERGE_PAIRS,
) -> dict[str, Any]:
    """Build the index of ``texts`` (chunk texts, in order) into ``folder``; returns its statistics."""
    import bm25s

    if phrase_slop < 0:
        raise BM25Error(f"phrase_slop must be >= 0, got {phrase_slop}")
    folder.mkdir(parents=True, exist_ok=True)
    work = folder / "_build"
    work.mkdir()
    try:
        analyzer = Analyzer(stemmer)
        tok = _Tokens(work / "tokens.bin")
        tok.read(texts, analyzer, block_tokens, progress)
        if not tok.vocab:
            raise BM25Error("the collection has no indexable terms (every chunk is empty or stop words only)")
        v = len(tok.vocab)
        n_docs = len(tok.lengths)
        lengths = np.frombuffer(tok.lengths, dtype=np.int64)
        avg_doc_len = lengths.mean()  # bm25s: np.array([len(ids) ...]).mean()
        idf = lucene_idf_bm25s(tok.df, n_docs)
        nnz = int(tok.df.sum())

        out = folder / "bm25s"
        out.mkdir()
        indptr = np.zeros(v + 1, dtype=np.int64)
        np.cumsum(tok.df, out=indptr[1:])
        data = _DiskArray(out / "data.csc.index.npy", np.float32, nnz)
        rows = _DiskArray(out / "indices.csc.index.npy", np.int32, nnz)
        heads = indptr[:-1].copy()
        hashed = hashed_trigrams_for(v)
        runs: list[_Run] = []
        for first, block_len, block_tok in tok.blocks(block_tokens):
            owner = np.repeat(np.arange(first, first + len(block_len), dtype=np.int64), block_len)
            pairs, tf = np.unique(owner * v + block_tok.astype(np.int64), return_counts=True)
            docs, terms = pairs // v, pairs % v
            weights = lucene_weights(tf, lengths[docs], idf[terms], avg_doc_len, BM25_K1, BM25_B)
            order = np.argsort(terms, kind="stable")  # rows stay ascending within a column
            terms, docs, weights = terms[order], docs[order], weights[order]
            counts = np.bincount(terms, minlength=v)
            group_start = np.cumsum(counts) - counts
            dest = heads[terms] + (np.arange(len(terms)) - group_start[terms])
            data.array[dest] = weights
            rows.array[dest] = docs.astype(np.int32)
            data.release()
            rows.release()
            heads += counts
            keys, chunks = phrase_pairs(block_tok, owner.astype(np.int32), v, phrase_slop, hashed)
            if len(keys):
                runs.append(_Run.write(work, len(runs), keys, chunks))
        if not np.array_equal(heads, indptr[1:]):
            raise BM25Error("internal error: the BM25 matrix was not filled completely")
        data.close()
        rows.close()
        np.save(out / "indptr.csc.index.npy", indptr, allow_pickle=False)
        _write_bm25s_meta(out, tok.vocab, n_docs, bm25s)
        n_pairs = _merge_runs(runs, folder, merge_pairs)
        params = {
            "format": PHRASE_FORMAT_VERSION,
            "stemmer": stemmer,
            "phrase_slop": phrase_slop,
            "vocab_size": v,
            "hashed_trigrams": hashed,
        }
        (folder / "phrase_params.json").write_text(json.dumps(params, sort_keys=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"chunks": n_docs, "tokens": int(lengths.sum()), "vocabulary": v, "postings": nnz, "phrase_pairs": n_pairs}


def _write_bm25s_meta(out: Path, vocab: dict[str, int], n_docs: int, bm25s: Any) -> None:
    """bm25s's ``vocab.index.json`` and ``params.index.json``, as ``BM25.save`` writes them."""
    model = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
    params = {
        "k1": model.k1,
        "b": model.b,
        "delta": model.delta,
        "method": model.method,
        "idf_method": model.idf_method,
        "dtype": model.dtype,
        "int_dtype": model.int_dtype,
        "num_docs": n_docs,
        "version": bm25s.__version__,
        "backend": model.backend,
    }
    (out / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "params.index.json").write_text(json.dumps(params, indent=4))


@dataclass(frozen=True)
class _Run:
    """One block's sorted (key, chunk) pairs in two raw files, and every ``stride``-th key."""

    keys_path: Path
    chunks_path: Path
    n: int
    sample: np.ndarray
    stride: int

    @classmethod
    def write(cls, folder: Path, number: int, keys: np.ndarray, chunks: np.ndarray) -> _Run:
        run = cls(
            folder / f"run-{number:05d}.keys",
            folder / f"run-{number:05d}.chunks",
            len(keys),
            keys[:: max(1, len(keys) // 1024)].copy(),
            max(1, len(keys) // 1024),
        )
        keys.tofile(run.keys_path)
        chunks.tofile(run.chunks_path)
        return run

    def bound(self, key: np.uint64 | None, end: bool) -> int:
        """The first position whose key is >= ``key`` (``None``: 0, or ``n`` when ``end``).

        The sample narrows it to ``stride`` keys, which are read from the file: the
        run is never mapped, so the merge's memory is its key range only.
        """
        if key is None:
            return self.n if end else 0
        i = int(np.searchsorted(self.sample, key, side="left"))  # keys[(i-1)*stride] < key <= keys[i*stride]
        if i == 0:
            return 0
        start = (i - 1) * self.stride + 1
        stop = min(self.n, i * self.stride + 1)
        window = np.fromfile(self.keys_path, dtype=np.uint64, count=stop - start, offset=8 * start)
        return start + int(np.searchsorted(window, key, side="left"))

    def read(self, a: int, z: int) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.fromfile(self.keys_path, dtype=np.uint64, count=z - a, offset=8 * a),
            np.fromfile(self.chunks_path, dtype=np.int32, count=z - a, offset=4 * a),
        )


def _merge_runs(runs: list[_Run], folder: Path, merge_pairs: int) -> int:
    """Merge sorted (key, chunk) runs of increasing chunk ranges into the two phrase arrays.

    Runs cover disjoint, increasing chunk ranges, so a stable sort by key of the runs'
    pairs, taken in run order, is sorted by (key, chunk) and has no duplicates.  Key
    ranges come from the runs' samples, each range about ``merge_pairs`` pairs.
    """
    keys_path, chunks_path = folder / "phrase_keys.npy", folder / "phrase_chunks.npy"
    total = sum(run.n for run in runs)
    if total == 0:
        np.save(keys_path, np.zeros(0, dtype=np.uint64), allow_pickle=False)
        np.save(chunks_path, np.zeros(0, dtype=np.int32), allow_pickle=False)
        return 0
    n_ranges = max(1, -(-total // merge_pairs))
    bounds: list[np.uint64 | None] = [None, None]
    if n_ranges > 1:
        sample = np.sort(np.concatenate([run.sample for run in runs]))
        cuts = np.unique(sample[(np.arange(1, n_ranges) * len(sample)) // n_ranges])
        bounds = [None, *cuts, None]
    out_keys, out_chunks = _DiskArray(keys_path, np.uint64, total), _DiskArray(chunks_path, np.int32, total)
    at = 0
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        parts = [run.read(run.bound(lo, False), run.bound(hi, True)) for run in runs]
        k = np.concatenate([p[0] for p in parts])
        c = np.concatenate([p[1] for p in parts])
        del parts
        order = np.argsort(k, kind="stable")
        out_keys.array[at : at + len(k)] = k[order]
        out_chunks.array[at : at + len(k)] = c[order]
        out_keys.release()
        out_chunks.release()
        at += len(k)
    out_keys.close()
    out_chunks.close()
    if at != total:
        raise BM25Error(f"internal error: phrase merge wrote {at} of {total} pairs")
    return total
