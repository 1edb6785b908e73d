"""BM25 with phrase boosting over bm25s (BCAS §3.5, "BM25 with Phrase Boosting").

BCAS's baseline retriever is BM25 with a query parser that boosts the query's
two- and three-term phrases, so that chunks covering the query's concepts densely
rank first (after Clarke et al.'s cover density ranking).  The lineage code boosts
2-grams ×20 and 3-grams ×60 with a small slop; those are the defaults of
``RetrievalConfig`` (``bigram_boost``, ``trigram_boost``, ``phrase_slop``).

Analysis (the same for chunks and queries): lower-case, split with bm25s's default
pattern ``(?u)\\b\\w\\w+\\b`` (words of two or more characters), drop bm25s's English
stop words, then stem with the PyStemmer ``english`` stemmer (``stemmer=None``
skips stemming).  Every notion of adjacency below is defined on this analysed
token stream: stop words are removed *before* positions are counted, so "Kiss and
Tell" analyses to ``kiss tell`` and its two terms are adjacent.

Scoring.  For a query ``q`` with analysed stream ``q_1 .. q_l`` and a chunk ``c``
with analysed stream ``c_1 .. c_m``::

    score(c, q) = BM25(c, q) + β2 · Σ_{p ∈ P2(q)} [c ⊇ₛ p] · idf(p)
                             + β3 · Σ_{p ∈ P3(q)} [c ⊇ₛ p] · idf(p)

- ``BM25(c, q)`` is bm25s's score (Lucene variant, k1 = 1.5, b = 0.75) summed over
  the query terms found in the collection vocabulary; a term the query repeats
  counts each time, exactly as bm25s scores a tokenised query.
- ``P2(q)`` / ``P3(q)`` are the distinct pairs ``(q_i, q_{i+1})`` and triples
  ``(q_i, q_{i+1}, q_{i+2})`` of consecutive query terms; a phrase with a term
  unknown to the collection cannot match and is skipped (unknown terms keep their
  position, so they never make two other terms adjacent).
- ``[c ⊇ₛ p]`` is 1 when the chunk holds the phrase's terms in order with at most
  ``s`` (``phrase_slop``) other analysed tokens between each consecutive pair,
  i.e. positions ``j_1 < j_2 (< j_3)`` with ``1 ≤ j_{t+1} − j_t ≤ s + 1``; else 0.
  A phrase counts once per chunk however often it occurs (presence, as a boolean
  phrase clause).
- ``idf(p) = Σ_{t ∈ p} idf(t)`` with the Lucene idf ``ln(1 + (N − df_t + 0.5)/(df_t + 0.5))``
  over the ``N`` chunks, so a phrase of rare terms (a name) outweighs one of
  common terms, as a phrase clause's idf does in Lucene-family engines.
- ``β2``, ``β3`` are ``bigram_boost`` and ``trigram_boost``.  With both 0 (or
  ``phrase_boost=False``) the score is exactly plain bm25s: the same code path.

Speed: at build time every chunk's in-slop bigrams and trigrams are packed into
integer keys (``a·V + b`` and ``(a·V + b)·V + c`` over the vocabulary size ``V``)
and stored as one sorted (key, chunk) array.  ``V² + V³`` must fit in 64 bits, so a
vocabulary of ``_MAX_VOCAB_FOR_PHRASE_KEYS`` (2.6M) terms or more (a Wikipedia-sized
corpus) keys trigrams by a 64-bit mix of ``(a·V + b, c)`` with the top bit set instead;
two trigrams then share a key with probability about 2⁻⁶³ per pair, so a chunk could be
boosted for a trigram it lacks about once in 10⁹ queries over 10¹⁰ distinct trigrams.  A query then costs one
``searchsorted`` per order and a ``bincount`` over the matching chunks, on top of
bm25s's own scoring.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from bcas.retrieval.progress import bars_off

PHRASE_FORMAT_VERSION = 1
DEFAULT_STEMMER = "english"
BM25_K1 = 1.5
BM25_B = 0.75
_SPLIT = re.compile(r"(?u)\b\w\w+\b")
_MAX_VOCAB_FOR_PHRASE_KEYS = 2_600_000  # V**2 + V**3 must fit in uint64; above it trigrams are hashed
_MAX_VOCAB_FOR_BIGRAM_KEYS = 3_037_000_499  # V**2 < 2**63: bigram keys stay below the hashed trigrams
_TOP_BIT = np.uint64(1 << 63)


class BM25Error(RuntimeError):
    """The BM25 index cannot be built or loaded; the message says why."""


class Analyzer:
    """Lower-case, split, drop English stop words, stem: the stream BM25 and phrases share."""

    def __init__(self, stemmer: str | None = DEFAULT_STEMMER) -> None:
        from bm25s.stopwords import STOPWORDS_EN

        self.stemmer_name = stemmer
        self._stopwords = frozenset(STOPWORDS_EN)
        if stemmer is None:
            self._stem = None
        else:
            import Stemmer

            try:
                self._stem = Stemmer.Stemmer(stemmer).stemWords
            except KeyError:
                raise BM25Error(
                    f"unknown stemmer {stemmer!r}; PyStemmer knows {sorted(Stemmer.algorithms())}"
                ) from None

    def __call__(self, text: str) -> list[str]:
        words = [w for w in _SPLIT.findall(text.lower()) if w not in self._stopwords]
        return self._stem(words) if self._stem is not None and words else words


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over a uint64 array (wrapping arithmetic)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hashed_trigrams_for(vocab_size: int) -> bool:
    """Whether a vocabulary of ``vocab_size`` terms is too large for packed trigram keys."""
    return vocab_size >= _MAX_VOCAB_FOR_PHRASE_KEYS


def trigram_keys(a: np.ndarray, b: np.ndarray, c: np.ndarray, vocab_size: int, hashed: bool) -> np.ndarray:
    """Keys of trigrams (a, b, c) (uint64 arrays): packed, or hashed for a vocabulary too large to pack."""
    v = np.uint64(vocab_size)
    if not hashed:
        packed: np.ndarray = v * v + (a * v + b) * v + c
        return packed
    with np.errstate(over="ignore"):
        return (_mix64(_mix64(a * v + b) ^ c) >> np.uint64(1)) | _TOP_BIT


def phrase_pairs(
    tokens: np.ndarray, owner: np.ndarray, vocab_size: int, slop: int, hashed: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The sorted, unique (phrase key, chunk) pairs of a token stream (``PhraseIndex``'s arrays).

    ``tokens``: the analysed token ids of consecutive chunks, one stream; ``owner``: the
    chunk of each token (non-decreasing).  A phrase never spans two chunks.  ``hashed``:
    trigram keys hashed (:func:`hashed_trigrams_for`).
    """
    if slop < 0:
        raise BM25Error(f"phrase_slop must be >= 0, got {slop}")
    if vocab_size >= _MAX_VOCAB_FOR_BIGRAM_KEYS:
        raise BM25Error(f"vocabulary of {vocab_size} terms is too large for packed bigram keys")
    tokens = tokens.astype(np.uint64, copy=False)
    v = np.uint64(vocab_size)
    n = len(tokens)
    keys: list[np.ndarray] = []
    chunks: list[np.ndarray] = []
    for g1 in range(1, slop + 2):
        if g1 >= n:
            break
        first = np.flatnonzero(owner[:-g1] == owner[g1:])
        keys.append(tokens[first] * v + tokens[first + g1])
        chunks.append(owner[first])
        for g2 in range(1, slop + 2):
            third = first + g1 + g2
            ok = third < n
            start, third = first[ok], third[ok]
            start, third = start[owner[start] == owner[third]], third[owner[start] == owner[third]]
            keys.append(trigram_keys(tokens[start], tokens[start + g1], tokens[third], vocab_size, hashed))
            chunks.append(owner[start])
    if not keys:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int32)
    k = np.concatenate(keys)
    c = np.concatenate(chunks)
    order = np.lexsort((c, k))
    k, c = k[order], c[order]
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (c[1:] != c[:-1])
    return np.ascontiguousarray(k[keep]), np.ascontiguousarray(c[keep].astype(np.int32))


@dataclass(frozen=True)
class PhraseIndex:
    """Sorted (phrase key, chunk) pairs for the in-slop bigrams and trigrams of every chunk.

    Keys share one space: a bigram ``(a, b)`` is ``a·V + b`` (below ``V²``) and a
    trigram ``(a, b, c)`` is ``V² + (a·V + b)·V + c``, so one sorted array and one
    ``searchsorted`` serve both orders.
    """

    vocab_size: int
    slop: int
    keys: np.ndarray  # uint64, sorted
    chunks: np.ndarray  # int32, the chunk of each key; (key, chunk) pairs are unique
    hashed: bool = False  # trigram keys hashed (a vocabulary too large to pack), fixed at build time

    @classmethod
    def build(cls, chunk_token_ids: Sequence[Sequence[int]], vocab_size: int, slop: int) -> PhraseIndex:
        lengths = np.fromiter((len(t) for t in chunk_token_ids), dtype=np.int64, count=len(chunk_token_ids))
        tokens = np.fromiter((t for ids in chunk_token_ids for t in ids), dtype=np.uint64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(len(chunk_token_ids), dtype=np.int32), lengths)
        hashed = hashed_trigrams_for(vocab_size)
        keys, chunks = phrase_pairs(tokens, owner, vocab_size, slop, hashed)
        return cls(vocab_size, slop, keys, chunks, hashed)

    def query_phrases(
        self, query_ids: np.ndarray, idf: np.ndarray, bigram_boost: float, trigram_boost: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Distinct phrase keys of a query (ids, -1 = unknown term) and their weights ``β·idf(p)``."""
        v = np.uint64(self.vocab_size)
        keys: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        q = query_ids
        if bigram_boost and len(q) >= 2:
            a, b = q[:-1], q[1:]
            ok = (a >= 0) & (b >= 0)
            a, b = a[ok].astype(np.uint64), b[ok].astype(np.uint64)
            keys.append(a * v + b)
            weights.append(bigram_boost * (idf[a] + idf[b]))
        if trigram_boost and len(q) >= 3:
            a, b, c = q[:-2], q[1:-1], q[2:]
            ok = (a >= 0) & (b >= 0) & (c >= 0)
            a, b, c = a[ok].astype(np.uint64), b[ok].astype(np.uint64), c[ok].astype(np.uint64)
            keys.append(trigram_keys(a, b, c, self.vocab_size, self.hashed))
            weights.append(trigram_boost * (idf[a] + idf[b] + idf[c]))
        if not keys:
            return np.zeros(0, dtype=np.uint64), np.zeros(0)
        k, first = np.unique(np.concatenate(keys), return_index=True)
        return k, np.concatenate(weights)[first]

    def boost(
        self, query_ids: np.ndarray, idf: np.ndarray, n_chunks: int, bigram_boost: float, trigram_boost: float
    ) -> np.ndarray | None:
        """The phrase term of the score for every chunk, or ``None`` when no phrase matches."""
        keys, weights = self.query_phrases(query_ids, idf, bigram_boost, trigram_boost)
        if not len(keys):
            return None
        bounds = np.searchsorted(self.keys, np.concatenate([keys, keys + np.uint64(1)]))
        lo, hi = bounds[: len(keys)], bounds[len(keys) :]
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            return None
        # positions lo[i] .. hi[i]-1 of every phrase i, gathered without a Python loop
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
        hits = self.chunks[np.arange(total) + starts]
        return np.bincount(hits, np.repeat(weights, counts), minlength=n_chunks)

    def save(self, folder: Path) -> None:
        np.save(folder / "phrase_keys.npy", self.keys, allow_pickle=False)
        np.save(folder / "phrase_chunks.npy", self.chunks, allow_pickle=False)

    @classmethod
    def load(cls, folder: Path, vocab_size: int, slop: int, mmap: bool = False, hashed: bool = False) -> PhraseIndex:
        mode: Literal["r"] | None = "r" if mmap else None
        keys = np.load(folder / "phrase_keys.npy", allow_pickle=False, mmap_mode=mode)
        chunks = np.load(folder / "phrase_chunks.npy", allow_pickle=False, mmap_mode=mode)
        if keys.dtype != np.uint64 or chunks.dtype != np.int32 or keys.shape != chunks.shape:
            raise BM25Error(f"{folder}: phrase index arrays have the wrong type or shape")
        return cls(vocab_size, slop, keys, chunks, hashed)


def lucene_idf(doc_freq: np.ndarray, n_docs: int) -> np.ndarray:
    """``ln(1 + (N - df + 0.5) / (df + 0.5))``, the idf bm25s's Lucene variant uses."""
    df = doc_freq.astype(np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def top_k(
    scores: np.ndarray, k: int, exclude: np.ndarray | None = None, positive_only: bool = False, ties: bool = False
) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first (ties: lower index first).

    ``exclude`` lists indices never returned; ``positive_only`` drops scores <= 0
    (chunks that share no term with the query).  ``ties``: also every index whose score
    equals the ``k``-th's (so a caller can break the ties itself; more than ``k`` then).
    """
    if exclude is not None and len(exclude):
        scores = scores.astype(np.float64, copy=True)
        scores[exclude] = -np.inf
    candidates = np.flatnonzero(scores > 0) if positive_only else np.flatnonzero(scores > -np.inf)
    if len(candidates) > k:
        part = np.argpartition(-scores[candidates], k - 1)[:k]
        if ties:
            kth = scores[candidates[part]].min()
            candidates = candidates[scores[candidates] >= kth]
        else:
            candidates = candidates[part]
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order]


class BM25Index:
    """bm25s over analysed chunk texts plus the phrase index of the same token streams."""

    def __init__(self, bm25: object, phrases: PhraseIndex, analyzer: Analyzer) -> None:
        self.bm25 = bm25
        self.phrases = phrases
        self.analyzer = analyzer
        self.vocab: dict[str, int] = bm25.vocab_dict  # type: ignore[attr-defined]
        self.n_chunks = int(bm25.scores["num_docs"])  # type: ignore[attr-defined]
        indptr = bm25.scores["indptr"]  # type: ignore[attr-defined]
        self.idf = lucene_idf(np.diff(indptr), self.n_chunks)

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        *,
        stemmer: str | None = DEFAULT_STEMMER,
        phrase_slop: int = 1,
        progress: bool = True,
    ) -> BM25Index:
        import bm25s
        from tqdm.auto import tqdm

        analyzer = Analyzer(stemmer)
        vocab: dict[str, int] = {}
        token_ids: list[list[int]] = []
        for text in tqdm(texts, desc="bm25: tokenise", unit="chunk", disable=bars_off(progress), leave=False):
            token_ids.append([vocab.setdefault(tok, len(vocab)) for tok in analyzer(text)])
        if not vocab:
            raise BM25Error("the collection has no indexable terms (every chunk is empty or stop words only)")
        bm25 = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        bm25.index((token_ids, vocab), create_empty_token=False, show_progress=progress)
        phrases = PhraseIndex.build(token_ids, len(vocab), phrase_slop)
        return cls(bm25, phrases, analyzer)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.bm25.save(str(folder / "bm25s"), show_progress=False)  # type: ignore[attr-defined]
        self.phrases.save(folder)
        params = {
            "format": PHRASE_FORMAT_VERSION,
            "stemmer": self.analyzer.stemmer_name,
            "phrase_slop": self.phrases.slop,
            "vocab_size": self.phrases.vocab_size,
            "hashed_trigrams": self.phrases.hashed,
        }
        (folder / "phrase_params.json").write_text(json.dumps(params, sort_keys=True))

    @classmethod
    def load(cls, folder: Path, mmap: bool = False) -> BM25Index:
        """An index saved by :meth:`save` or written by ``bcas.retrieval.bm25_stream``.

        ``mmap``: memory-map the score matrix and phrase arrays (bm25s's ``mmap=True``)
        instead of reading them into memory; scores are identical either way.
        """
        import bm25s

        params = json.loads((folder / "phrase_params.json").read_text())
        if params.get("format") != PHRASE_FORMAT_VERSION:
            raise BM25Error(f"{folder}: phrase index format {params.get('format')} != {PHRASE_FORMAT_VERSION}")
        bm25 = bm25s.BM25.load(str(folder / "bm25s"), load_corpus=False, mmap=mmap, show_progress=False)
        phrases = PhraseIndex.load(
            folder,
            int(params["vocab_size"]),
            int(params["phrase_slop"]),
            mmap=mmap,
            hashed=bool(params.get("hashed_trigrams", False)),
        )
        if len(bm25.vocab_dict) != phrases.vocab_size:
            raise BM25Error(f"{folder}: bm25s vocabulary and phrase index disagree")
        return cls(bm25, phrases, Analyzer(params["stemmer"]))

    def query_ids(self, query: str) -> np.ndarray:
        """The analysed query as vocabulary ids; -1 keeps the place of a term unknown to the collection."""
        get = self.vocab.get
        return np.array([get(tok, -1) for tok in self.analyzer(query)], dtype=np.int64)

    def unigram_scores(self, query_ids: np.ndarray) -> np.ndarray:
        """Plain bm25s scores of every chunk over the known query terms (repeats count each time)."""
        known = query_ids[query_ids >= 0]
        if not len(known):
            return np.zeros(self.n_chunks, dtype=np.float32)
        scores: np.ndarray = self.bm25.get_scores_from_ids(known)  # type: ignore[attr-defined]
        return scores

    def scores(self, query: str, bigram_boost: float = 0.0, trigram_boost: float = 0.0) -> np.ndarray:
        """``score(c, q)`` of the module docstring for every chunk ``c``."""
        return phrase_boosted_bm25(self, self.query_ids(query), bigram_boost, trigram_boost)

    def search(
        self,
        query: str,
        k: int,
        *,
        bigram_boost: float = 0.0,
        trigram_boost: float = 0.0,
        exclude: np.ndarray | None = None,
        ties: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` chunks sharing at least one term with the query: (indices, scores), best first
        (``ties``: with every chunk tied with the ``k``-th, :func:`top_k`)."""
        scores = self.scores(query, bigram_boost, trigram_boost)
        idx = top_k(scores, k, exclude, positive_only=True, ties=ties)
        return idx, scores[idx]


def phrase_boosted_bm25(
    index: BM25Index, query_ids: np.ndarray, bigram_boost: float, trigram_boost: float
) -> np.ndarray:
    """BM25 plus the phrase boosts of the module docstring, for every chunk of ``index``."""
    scores = index.unigram_scores(query_ids)
    if not (bigram_boost or trigram_boost):
        return scores
    boost = index.phrases.boost(query_ids, index.idf, index.n_chunks, bigram_boost, trigram_boost)
    if boost is None:
        return scores
    boosted: np.ndarray = scores + boost
    return boosted
