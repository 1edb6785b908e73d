"""Hybrid search (HS): fusing lexical and dense rankings (BCAS §3.5, "Hybrid Search").

BCAS combines its BM25 retriever with dense vector search.  Two fusions, both pure
functions over ranked lists of hashable ids (best first):

- ``rrf_fuse`` — reciprocal rank fusion (Cormack et al., 2009):
  ``RRF(d) = Σ_lists 1 / (rrf_k + rank_list(d))`` with ranks from 1; a list that
  does not hold ``d`` adds nothing.  Rank-only, so it needs no score calibration
  between BM25 (unbounded) and cosine (in [-1, 1]).  **The default** (``fusion="rrf"``,
  ``rrf_k = 60``).
- ``convex_fuse`` — normalised-score convex combination:
  ``CC(d) = α · s̃_bm25(d) + (1 − α) · s̃_dense(d)`` where ``s̃`` is the list's score
  min-max normalised to [0, 1] over that list's candidates (all equal → 1) and 0
  for an id the list does not hold; ``α = fusion_alpha`` weighs the lexical list.

Both return (id, fused score) pairs, best first, ties broken by first appearance
(lexical list first), each id once.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

RRF_K = 60


def rrf_fuse(rankings: Sequence[Sequence[K]], rrf_k: int = RRF_K) -> list[tuple[K, float]]:
    """Reciprocal rank fusion of ranked id lists (best first); duplicates within a list count once."""
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    fused: dict[K, float] = {}
    for ranking in rankings:
        seen: set[K] = set()
        for rank, key in enumerate(ranking, start=1):
            if key in seen:
                continue
            seen.add(key)
            fused[key] = fused.get(key, 0.0) + 1.0 / (rrf_k + rank)
    return _sorted(fused)


def minmax_normalise(scores: Sequence[float]) -> list[float]:
    """Scores mapped linearly onto [0, 1]; a constant list maps to all ones."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def convex_fuse(
    lexical: Sequence[tuple[K, float]], dense: Sequence[tuple[K, float]], alpha: float = 0.5
) -> list[tuple[K, float]]:
    """``α · normalised lexical + (1 − α) · normalised dense`` over the union of both lists."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"fusion_alpha must lie in [0, 1], got {alpha}")
    fused: dict[K, float] = {}
    for weight, ranked in ((alpha, lexical), (1.0 - alpha, dense)):
        first: dict[K, float] = {}
        for key, score in ranked:
            first.setdefault(key, score)
        for key, norm in zip(first, minmax_normalise(list(first.values())), strict=True):
            fused[key] = fused.get(key, 0.0) + weight * norm
    return _sorted(fused)


def _sorted(fused: dict[K, float]) -> list[tuple[K, float]]:
    # dicts keep insertion order, so a stable sort breaks ties by first appearance
    return sorted(fused.items(), key=lambda kv: -kv[1])
