"""Score aggregation over the (m documents x 3 agents) assessment matrix.

Pure functions, no model calls.  ``S`` is an m x A matrix of 0-5 scores (A = 3:
Relevance, Consistency, Conflict), given as a nested sequence or a numpy array;
a missing score is ``None`` or NaN.  Every selector returns document indices,
best first, and breaks ties (scores equal to ``TIE_DECIMALS`` decimals) by the
lower index (a stable order).

- ``weighted_scores``: the 3-Agent baseline's weighted sum (MADARA §5.3, weights
  ``BASELINE_WEIGHTS`` = (0.4, 0.3, 0.3)).
- ``sda_select``: Score Distribution Alignment (MADARA §4.2, Appendix B,
  Algorithm 1): per-agent percentile ranks rank/(m-1), weighted (uniform by
  default, §5.5), mapped to [0, 5], top-k.
- ``rrf_select``: Reciprocal Rank Fusion over the agents' rankings (MADARA
  Appendix C), ``RRF_C`` = 60.
- ``atf_filter``: Adaptive Threshold Filtering (MADARA §4.3, Eq. 3):
  keep documents with score >= mu - kappa*sigma, ``ATF_KAPPA`` = 0.5, at least 2
  and at most k.

Missing scores (an agent's output that could not be parsed):

- ``weighted_scores`` replaces a missing score by the mean of the agent's
  present scores for the same query (a neutral value that neither promotes nor
  demotes the document within that agent's scale); a column with no score at all
  becomes the scale midpoint 2.5, a constant that shifts every document equally
  and so leaves the ranking to the other agents.
- ``sda_select`` ranks each agent's present scores among themselves
  (rank/(m_j - 1) with m_j present scores) and gives a missing score the neutral
  percentile 0.5; with no missing score this is exactly Algorithm 1, and it keeps
  SDA invariant to strictly increasing transforms of any agent's scores.
- ``rrf_select`` ranks present scores only; a missing score contributes nothing
  to the document's fused score (the usual RRF convention for an unranked item).

Ties within one agent's scores get the average of the ranks they span (the
convention of ``scipy.stats.rankdata(method="average")``), so tied documents get
equal percentiles and equal RRF contributions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

BASELINE_WEIGHTS: tuple[float, float, float] = (0.4, 0.3, 0.3)
"""3-Agent baseline weights (Relevance, Consistency, Conflict), MADARA §5.3."""

ATF_KAPPA: float = 0.5
"""kappa in the ATF threshold tau = mu - kappa * sigma, MADARA §4.3."""

RRF_C: int = 60
"""The RRF constant k (called c here to avoid a clash with top-k), MADARA Appendix C."""

SCORE_MIN, SCORE_MAX = 0.0, 5.0
SCORE_MID = (SCORE_MIN + SCORE_MAX) / 2

ATF_TOLERANCE = 1e-9
"""Scores within this distance below tau still count as >= tau (floating-point slack:
the mean of equal values can exceed each of them by one ulp)."""


class AggregationError(ValueError):
    """An aggregation input is malformed (shape, weights, k)."""


def as_score_matrix(S: Any) -> np.ndarray:
    """``S`` as a float m x A array with NaN for missing scores."""
    rows = [list(r) for r in S] if not isinstance(S, np.ndarray) else S.tolist()
    if not rows:
        return np.zeros((0, len(BASELINE_WEIGHTS)), dtype=float)
    width = len(rows[0])
    if width == 0 or any(len(r) != width for r in rows):
        raise AggregationError(
            f"score matrix must be rectangular with >= 1 column, got row lengths {[len(r) for r in rows]}"
        )
    out = np.array([[math.nan if v is None else float(v) for v in r] for r in rows], dtype=float)
    if np.isinf(out).any():
        raise AggregationError("score matrix holds an infinite value")
    return out


def average_ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """0-based ranks in ascending order; ties get the average rank they span.

    ``average_ranks([3, 1, 3]) == [1.5, 0.0, 1.5]``.
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    order = np.argsort(x, kind="stable")
    ranks = np.empty(n, dtype=float)
    i = 0
    while i < n:
        j = i
        while j + 1 < n and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


def _check_weights(weights: Sequence[float], n_agents: int) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if w.shape != (n_agents,):
        raise AggregationError(f"need {n_agents} weights (one per agent), got {len(w)}")
    if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
        raise AggregationError(f"weights must be finite, non-negative and not all zero, got {tuple(weights)}")
    return w


def _check_k(k: int) -> None:
    if k < 1:
        raise AggregationError(f"k must be >= 1, got {k}")


TIE_DECIMALS = 10
"""Scores equal to this many decimals are ties (summation order can split equal values by an ulp)."""


def order_best_first(scores: Sequence[float] | np.ndarray) -> list[int]:
    """Indices sorted by descending score; ties (equal to ``TIE_DECIMALS``) by ascending index."""
    s = np.round(np.asarray(scores, dtype=float), TIE_DECIMALS)
    return sorted(range(s.size), key=lambda i: (-s[i], i))


def impute_missing(S: Any) -> np.ndarray:
    """Missing scores replaced by the column mean of present scores (2.5 if none)."""
    M = as_score_matrix(S).copy()
    for j in range(M.shape[1]):
        col = M[:, j]
        present = col[~np.isnan(col)]
        fill = float(present.mean()) if present.size else SCORE_MID
        col[np.isnan(col)] = fill
    return M


def weighted_scores(S: Any, weights: Sequence[float] = BASELINE_WEIGHTS) -> np.ndarray:
    """Per-document weighted score ``S @ w`` (shape (m,)), MADARA §5.3 baseline.

    The weights are used as given (the baseline's sum to 1, keeping the result
    on the 0-5 scale).  Missing scores are imputed as described in the module
    docstring.
    """
    M = impute_missing(S)
    if M.shape[0] == 0:
        return np.zeros(0)
    w = _check_weights(weights, M.shape[1])
    combined: np.ndarray = M @ w
    return combined


def weighted_select(S: Any, k: int, weights: Sequence[float] = BASELINE_WEIGHTS) -> list[int]:
    """Top-k documents by ``weighted_scores`` (the 3-Agent baseline's reranking)."""
    _check_k(k)
    return order_best_first(weighted_scores(S, weights))[:k]


def percentile_ranks(column: Sequence[float] | np.ndarray) -> np.ndarray:
    """Algorithm 1 line 8: rank(s_j)/(m-1) in [0, 1] over the present scores.

    Ties get average ranks; a missing score (NaN) gets 0.5; with fewer than two
    present scores every entry is 0.5 (no order to express).
    """
    col = np.asarray(column, dtype=float)
    out = np.full(col.size, 0.5)
    present = ~np.isnan(col)
    n = int(present.sum())
    if n >= 2:
        out[present] = average_ranks(col[present]) / (n - 1)
    return out


def sda_scores(S: Any, weights: Sequence[float] | None = None) -> np.ndarray:
    """Calibrated SDA scores r_hat in [0, 5] (Algorithm 1, lines 5-12).

    ``weights`` default to uniform (MADARA §5.5, w = (1/3, 1/3, 1/3)); given
    weights are normalised to sum to 1 so r_hat stays on the 0-5 scale.
    """
    M = as_score_matrix(S)
    m, a = M.shape
    if m == 0:
        return np.zeros(0)
    w = np.full(a, 1.0 / a) if weights is None else _check_weights(weights, a)
    w = w / w.sum()
    R = np.column_stack([percentile_ranks(M[:, j]) for j in range(a)])
    ranked: np.ndarray = (R * w).sum(axis=1) * SCORE_MAX
    return ranked


def sda_select(S: Any, k: int, weights: Sequence[float] | None = None) -> list[int]:
    """Score Distribution Alignment top-k (MADARA Algorithm 1, line 15).

    Returns ``min(k, m)`` distinct indices, best first; exact ties in r_hat are
    broken by the lower document index.
    """
    _check_k(k)
    return order_best_first(sda_scores(S, weights))[:k]


def rrf_scores(S: Any, c: int = RRF_C) -> np.ndarray:
    """RRF(d) = sum_j 1 / (c + rank_j(d)), rank_j 1-based by descending score (Appendix C)."""
    if c < 0:
        raise AggregationError(f"RRF constant c must be >= 0, got {c}")
    M = as_score_matrix(S)
    m, a = M.shape
    fused = np.zeros(m)
    for j in range(a):
        col = M[:, j]
        present = ~np.isnan(col)
        if not present.any():
            continue
        # Descending rank: 1 for the best score; ties share their average rank.
        ranks = average_ranks(-col[present]) + 1.0
        fused[present] += 1.0 / (c + ranks)
    return fused


def rrf_select(S: Any, k: int, c: int = RRF_C) -> list[int]:
    """Top-k documents by Reciprocal Rank Fusion of the agents' rankings (Appendix C)."""
    _check_k(k)
    return order_best_first(rrf_scores(S, c))[:k]


def atf_threshold(scores: Sequence[float] | np.ndarray, kappa: float = ATF_KAPPA) -> float:
    """tau = mu(s) - kappa * sigma(s) (MADARA Eq. 3), sigma the population standard deviation."""
    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        raise AggregationError("ATF needs at least one score")
    if not np.isfinite(s).all():
        raise AggregationError("ATF scores must be finite; impute missing scores first (weighted_scores does)")
    return float(s.mean() - kappa * s.std())


def atf_filter(scores: Sequence[float] | np.ndarray, k: int, kappa: float = ATF_KAPPA) -> list[int]:
    """Adaptive Threshold Filtering (MADARA §4.3): indices kept, best first.

    ``scores`` are the aggregated per-document scores (e.g. ``weighted_scores``)
    of all m retrieved documents; tau is computed over all of them.  Documents
    are taken in descending score order; those with score >= tau are kept, at
    most ``k``; if fewer than ``min(2, m)`` pass, the best remaining documents
    pad the selection up to that minimum (the paper's "minimum 2").  ``k < 2``
    caps the result at ``k``.
    """
    _check_k(k)
    s = np.asarray(scores, dtype=float)
    tau = atf_threshold(s, kappa)
    ranked = order_best_first(s)
    passing = [i for i in ranked if s[i] >= tau - ATF_TOLERANCE]
    floor = min(2, s.size)
    if len(passing) < floor:
        passing = ranked[:floor]
    return passing[:k]
