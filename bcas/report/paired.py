"""Accuracy and paired comparisons over items that may have several epochs.

With one epoch an item's outcome is binary, and the suite uses the papers' statistics:
Wilson intervals for an accuracy (BCAS Figure 2) and, for two configurations or two
models on the same items, the Newcombe (1998) paired interval with an exact McNemar test
(BCAS Figure 3, MADARA §6).

With several epochs (``--bcas-epochs N``: the same item sampled N times, as MADARA's
T = 0.6 decoding invites), the N outcomes of one item are not independent, so:

* **accuracy** is the mean of per-item means (each item weighs the same);
* its **interval is clustered by item**: ``mean ± t(n-1) · SE`` with
  ``SE = sqrt(Σ (m_i − m̄)² / (n (n − 1)))`` over the n per-item means ``m_i`` -- the
  cluster-robust standard error of a mean with equal cluster sizes (what statsmodels'
  OLS with ``cov_type="cluster"`` gives for a constant), clipped to [0, 1];
* **paired tests use per-item means**: a paired t-test on the per-item differences
  ``d_i = m_i(A) − m_i(B)`` (two-sided), with the interval ``d̄ ± t(n-1) · sd(d)/√n``.
  McNemar's test needs a binary outcome per item, which a per-item mean is not; the
  paired t-test on per-item differences is the clustered analysis of the same design.

A metric that is not pass/fail per item (token F1, evidence recall, cost, tokens:
:mod:`bcas.metrics.values`) is compared with a **paired bootstrap over items**
(:func:`paired_bootstrap`; Koehn 2004, "Statistical Significance Tests for Machine
Translation Evaluation", paired bootstrap resampling; Efron & Tibshirani 1993, "An
Introduction to the Bootstrap", ch. 13 percentile intervals and ch. 16 bootstrap tests):
the per-item differences ``d_i`` are resampled with replacement, the interval is the
percentile interval of the resampled mean differences, and the two-sided p-value is the
share of mean differences, centred on the observed one, at least as far from 0 as it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from bcas.stats import mcnemar_exact, newcombe_paired_diff, wilson_interval

N_RESAMPLES = 2000

Outcome = Callable[[dict[str, Any]], "bool | None"]


def per_item_means(records: Iterable[dict[str, Any]], outcome: Outcome) -> dict[str, float]:
    """Item id -> mean outcome over its epochs; an outcome of ``None`` (not graded) is left out."""
    sums: dict[str, list[float]] = defaultdict(list)
    for rec in records:
        value = outcome(rec)
        if value is not None:
            sums[str(rec.get("item_id"))].append(1.0 if value else 0.0)
    return {item: sum(v) / len(v) for item, v in sums.items()}


def epochs_of(records: Iterable[dict[str, Any]]) -> int:
    """The largest number of epochs any item has among ``records``."""
    counts: dict[str, int] = defaultdict(int)
    for rec in records:
        counts[str(rec.get("item_id"))] += 1
    return max(counts.values(), default=0)


def _t_quantile(df: int, alpha: float) -> float:
    from scipy.stats import t

    return float(t.ppf(1 - alpha / 2, df))


def clustered_interval(means: Mapping[str, float] | list[float], alpha: float = 0.05) -> tuple[float, float, float]:
    """(mean, lo, hi) of per-item means with the item-clustered t interval (module docstring)."""
    values = list(means.values()) if isinstance(means, Mapping) else list(means)
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0, 1.0
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / (n * (n - 1)))
    half = _t_quantile(n - 1, alpha) * se
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def accuracy(records: list[dict[str, Any]], outcome: Outcome, alpha: float = 0.05) -> tuple[float, float, float, str]:
    """(accuracy, lo, hi, method): Wilson for one epoch, clustered t for several."""
    means = per_item_means(records, outcome)
    if epochs_of(records) <= 1:
        k = sum(1 for v in means.values() if v >= 1.0)
        n = len(means)
        lo, hi = wilson_interval(k, n, alpha) if n else (0.0, 0.0)
        return (k / n if n else 0.0), lo, hi, "wilson"
    mean, lo, hi = clustered_interval(means, alpha)
    return mean, lo, hi, "clustered-t"


@dataclass
class PairedResult:
    """Candidate − reference on the items both have.

    Binary (one epoch): ``a`` both right, ``b`` candidate only, ``c`` reference only,
    ``d`` neither; exact McNemar.  Several epochs: ``b``/``c`` count items whose
    per-item mean is higher for the candidate / the reference; paired t-test.
    """

    n_paired: int
    a: int
    b: int
    c: int
    d: int
    diff: float
    ci_lo: float
    ci_hi: float
    p_value: float
    test: str


def paired_table(candidate: Mapping[str, bool], reference: Mapping[str, bool]) -> tuple[int, int, int, int]:
    """(a, b, c, d) over the items both record: a both right, b candidate only, c reference only, d neither."""
    a = b = c = d = 0
    for item_id in sorted(set(candidate) & set(reference)):
        x, y = candidate[item_id], reference[item_id]
        if x and y:
            a += 1
        elif x:
            b += 1
        elif y:
            c += 1
        else:
            d += 1
    return a, b, c, d


def paired(
    candidate: Mapping[str, float], reference: Mapping[str, float], binary: bool, alpha: float = 0.05
) -> PairedResult:
    """Paired comparison of two per-item outcome maps (module docstring)."""
    shared = sorted(set(candidate) & set(reference))
    if binary:
        a, b, c, d = paired_table({i: candidate[i] >= 1.0 for i in shared}, {i: reference[i] >= 1.0 for i in shared})
        diff, lo, hi = newcombe_paired_diff(a, b, c, d, alpha=alpha) if shared else (0.0, 0.0, 0.0)
        return PairedResult(len(shared), a, b, c, d, diff, lo, hi, mcnemar_exact(b, c), "mcnemar-exact")
    diffs = [candidate[i] - reference[i] for i in shared]
    n = len(diffs)
    b = sum(1 for x in diffs if x > 0)
    c = sum(1 for x in diffs if x < 0)
    if n == 0:
        return PairedResult(0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 1.0, "paired-t")
    mean = sum(diffs) / n
    if n < 2:
        return PairedResult(n, 0, b, c, n - b - c, mean, -1.0, 1.0, 1.0, "paired-t")
    sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1))
    if sd == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        return PairedResult(n, 0, b, c, n - b - c, mean, mean, mean, p, "paired-t")
    from scipy.stats import t

    stat = mean / (sd / math.sqrt(n))
    p = float(2 * t.sf(abs(stat), n - 1))
    half = _t_quantile(n - 1, alpha) * sd / math.sqrt(n)
    return PairedResult(n, 0, b, c, n - b - c, mean, max(-1.0, mean - half), min(1.0, mean + half), p, "paired-t")


def order_bounds(resampled: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The percentile interval of ``resampled`` statistics, sorted ascending: its ``alpha/2`` and
    ``1 - alpha/2`` order statistics (indices ``floor(alpha/2 (R-1))`` and ``ceil((1-alpha/2)(R-1))``)."""
    r = int(resampled.size)
    return float(resampled[int(math.floor(alpha / 2 * (r - 1)))]), float(
        resampled[int(math.ceil((1 - alpha / 2) * (r - 1)))]
    )


def paired_bootstrap(
    candidate: Mapping[str, float],
    reference: Mapping[str, float],
    alpha: float = 0.05,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> PairedResult:
    """Paired bootstrap of the mean difference candidate − reference over the items both hold.

    The differences are taken in item-id order and resampled from
    ``numpy.random.default_rng(seed)`` (``integers(0, n, (n_resamples, n))``), so equal
    inputs give equal results however the records were ordered or sharded.  Bounds: the
    ``alpha/2`` and ``1 - alpha/2`` order statistics of the resampled means (indices
    ``floor(alpha/2 (R-1))`` and ``ceil((1-alpha/2)(R-1))``); p-value:
    ``(1 + #{|m* - d̄| >= |d̄|}) / (R + 1)``.  ``b``/``c``: items whose difference is
    positive / negative; ``d``: equal; ``a`` is 0.
    """
    if not 0 < alpha < 1 or n_resamples < 1:
        raise ValueError(f"need 0 < alpha < 1 and n_resamples >= 1, got {alpha}, {n_resamples}")
    shared = sorted(set(candidate) & set(reference))
    diffs = np.array([float(candidate[i]) - float(reference[i]) for i in shared], dtype=float)
    n = int(diffs.size)
    b, c = int((diffs > 0).sum()), int((diffs < 0).sum())
    if n == 0:
        return PairedResult(0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 1.0, "paired-bootstrap")
    mean = float(diffs.mean())
    rng = np.random.default_rng(seed)
    means = np.sort(diffs[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1))
    lo, hi = order_bounds(means, alpha)
    extreme = int((np.abs(means - mean) >= abs(mean) - 1e-12).sum())
    p = min(1.0, (1 + extreme) / (n_resamples + 1))
    return PairedResult(n, 0, b, c, n - b - c, mean, lo, hi, p, "paired-bootstrap")


__all__ = [
    "N_RESAMPLES",
    "PairedResult",
    "order_bounds",
    "paired_bootstrap",
    "accuracy",
    "clustered_interval",
    "epochs_of",
    "paired",
    "paired_table",
    "per_item_means",
]
