"""Statistics for comparing configurations on the same items.

Pure functions, no I/O.  Degenerate inputs (no items, no discordant pairs, all
values equal) return documented values instead of raising from inside numpy or
returning NaN; invalid inputs (negative counts, ``k > n``, ``alpha`` outside
(0, 1)) raise ``ValueError`` with the offending value.

- :func:`wilson_interval`: Wilson (1927) score interval for one accuracy.
- :func:`newcombe_paired_diff`: Newcombe (1998) method 10 interval for the
  difference of two accuracies measured on the same items.
- :func:`mcnemar_exact`, :func:`mcnemar_exact_one_sided`: exact McNemar tests on
  the discordant pairs.
- :func:`holm_bonferroni`: Holm (1979) step-down family-wise correction.
- :func:`bootstrap_ci`: seeded percentile bootstrap of any statistic.

The paired 2×2 table of two configurations on ``n`` items is ``a`` = both correct,
``b`` = only the first correct, ``c`` = only the second correct, ``d`` = neither.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import binom, norm


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not (isinstance(alpha, numbers.Real) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer count, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _z(alpha: float) -> float:
    return float(norm.ppf(1.0 - alpha / 2.0))


def wilson_interval(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Two-sided ``1 - alpha`` Wilson score interval for the proportion ``k / n``.

    ``n = 0`` carries no information and returns ``(0.0, 1.0)``.  Limits are
    clipped to ``[0, 1]`` against floating-point overshoot.
    """
    _check_count("k", k)
    _check_count("n", n)
    _check_alpha(alpha)
    if k > n:
        raise ValueError(f"k must be <= n, got k={k}, n={n}")
    k, n, alpha = int(k), int(n), float(alpha)
    if n == 0:
        return 0.0, 1.0
    z = _z(alpha)
    z2 = z * z
    p = k / n
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # At k = 0 (or k = n) the exact limit is p itself; pin it against rounding.
    lo = 0.0 if k == 0 else min(max(centre - half, 0.0), p)
    hi = 1.0 if k == n else max(min(centre + half, 1.0), p)
    return lo, hi


def _newcombe_phi(a: int, b: int, c: int, d: int) -> float:
    """Newcombe's (1998, method 10) correlation estimate of the paired table.

    The phi coefficient ``(ad - bc) / sqrt((a+b)(c+d)(a+c)(b+d))`` with the
    numerator shrunk as Newcombe specifies: ``ad - bc - n/2`` when
    ``ad - bc > n/2``, ``0`` when ``0 <= ad - bc <= n/2``, unchanged when
    negative.  A zero denominator (an empty margin) gives ``phi = 0``.
    """
    n = a + b + c + d
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    if denom == 0:
        return 0.0
    num = float(a * d - b * c)
    if num > n / 2.0:
        num -= n / 2.0
    elif num >= 0.0:
        num = 0.0
    return num / math.sqrt(denom)


def newcombe_paired_diff(a: int, b: int, c: int, d: int, alpha: float = 0.05) -> tuple[float, float, float]:
    """Difference ``p1 - p2`` of paired proportions with Newcombe's method-10 interval.

    ``p1 = (a + b) / n`` is the first configuration's accuracy, ``p2 = (a + c) / n``
    the second's (``a`` both correct, ``b`` first only, ``c`` second only, ``d``
    neither).  Newcombe, R. G. (1998), "Improved confidence intervals for the
    difference between binomial proportions based on paired data", Statistics in
    Medicine 17:2635-2650, method 10: with Wilson limits ``(l1, u1)`` and
    ``(l2, u2)`` of the two margins (no continuity correction) and the correlation
    ``phi`` of :func:`_newcombe_phi`,

    ``delta   = sqrt((p1-l1)^2 - 2 phi (p1-l1)(u2-p2) + (u2-p2)^2)``,
    ``epsilon = sqrt((u1-p1)^2 - 2 phi (u1-p1)(p2-l2) + (p2-l2)^2)``,

    and the interval is ``(diff - delta, diff + epsilon)``, clipped to ``[-1, 1]``.
    ``n = 0`` returns ``(0.0, -1.0, 1.0)``.  Returns ``(diff, lo, hi)``.
    """
    for name, value in (("a", a), ("b", b), ("c", c), ("d", d)):
        _check_count(name, value)
    _check_alpha(alpha)
    # Python ints: the product of the four margins overflows int64 beyond ~55k items.
    a, b, c, d, alpha = int(a), int(b), int(c), int(d), float(alpha)
    n = a + b + c + d
    if n == 0:
        return 0.0, -1.0, 1.0
    p1 = (a + b) / n
    p2 = (a + c) / n
    diff = (b - c) / n
    l1, u1 = wilson_interval(a + b, n, alpha)
    l2, u2 = wilson_interval(a + c, n, alpha)
    phi = _newcombe_phi(a, b, c, d)
    dl1, du1 = p1 - l1, u1 - p1
    dl2, du2 = p2 - l2, u2 - p2
    # |phi| <= 1 keeps both radicands >= 0; max() guards against rounding below 0.
    delta = math.sqrt(max(dl1 * dl1 - 2.0 * phi * dl1 * du2 + du2 * du2, 0.0))
    epsilon = math.sqrt(max(du1 * du1 - 2.0 * phi * du1 * dl2 + dl2 * dl2, 0.0))
    lo = min(max(diff - delta, -1.0), diff)
    hi = max(min(diff + epsilon, 1.0), diff)
    return diff, lo, hi


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` and ``c``.

    ``min(1, 2 * P(X <= min(b, c)))`` with ``X ~ Binomial(b + c, 1/2)``; with no
    discordant pairs (``b = c = 0``) there is no evidence and the p-value is 1.
    """
    _check_count("b", b)
    _check_count("c", c)
    b, c = int(b), int(c)
    m = b + c
    if m == 0:
        return 1.0
    return float(min(1.0, 2.0 * binom.cdf(min(b, c), m, 0.5)))


def mcnemar_exact_one_sided(first_only: int, second_only: int) -> float:
    """One-sided exact McNemar p-value for "the first configuration is less accurate".

    ``first_only`` counts items only the first configuration got right (``b`` of
    the paired table), ``second_only`` items only the second got right (``c``).
    Under the null hypothesis of equal accuracy each discordant item is a fair
    coin, so the p-value is the probability of the first winning this few or fewer
    discordant items: ``P(X <= first_only)`` with
    ``X ~ Binomial(first_only + second_only, 1/2)``.  Small values mean the first
    configuration is worse.  No discordant pairs give 1.0.

    For a regression gate call ``mcnemar_exact_one_sided(first_only=candidate_only,
    second_only=baseline_only)``.
    """
    _check_count("first_only", first_only)
    _check_count("second_only", second_only)
    first_only, second_only = int(first_only), int(second_only)
    m = first_only + second_only
    if m == 0:
        return 1.0
    return float(min(1.0, binom.cdf(first_only, m, 0.5)))


def holm_bonferroni(pvalues: Sequence[float], alpha: float = 0.05) -> tuple[list[bool], list[float]]:
    """Holm (1979) step-down correction of a family of p-values.

    Sorted ascending, the ``i``-th smallest p-value (0-based) of ``m`` is adjusted
    to ``max_{j <= i} min(1, (m - j) p_(j))``; a hypothesis is rejected when its
    adjusted p-value is ``<= alpha``.  Results are in the input order.  An empty
    family returns ``([], [])``.
    """
    _check_alpha(alpha)
    p = [float(x) for x in pvalues]
    for i, x in enumerate(p):
        if not (0.0 <= x <= 1.0):
            raise ValueError(f"p-values must lie in [0, 1]; pvalues[{i}] = {x!r}")
    m = len(p)
    if m == 0:
        return [], []
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adjusted[idx] = running
    reject = [adj <= alpha for adj in adjusted]
    return reject, adjusted


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    stat: Callable[[np.ndarray], Any] = np.mean,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap ``1 - alpha`` interval of ``stat(values)``.

    Draws ``n_resamples`` resamples with replacement from
    ``numpy.random.default_rng(seed)``, so equal inputs and seed give equal
    intervals on every machine.  Empty ``values`` return ``(0.0, 0.0)``; when all
    values are equal every resample equals the sample and the interval is the
    single point ``(stat(values), stat(values))``.  ``values`` must be finite and
    ``stat`` must return a finite scalar.
    """
    _check_alpha(alpha)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    data = np.asarray(values, dtype=float)
    if data.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {data.shape}")
    if data.size == 0:
        return 0.0, 0.0
    if not np.all(np.isfinite(data)):
        raise ValueError("values must be finite (no NaN or infinity)")

    def _stat(sample: np.ndarray) -> float:
        result = float(stat(sample))
        if not math.isfinite(result):
            raise ValueError(f"stat returned a non-finite value {result!r}")
        return result

    if np.all(data == data[0]):
        point = _stat(data)
        return point, point
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, data.size, size=(n_resamples, data.size))
    estimates = np.fromiter((_stat(data[row]) for row in indices), dtype=float, count=n_resamples)
    lo, hi = np.quantile(estimates, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)
