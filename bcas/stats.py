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
- :func:`mcnemar_min_discordant`, :func:`mcnemar_min_detectable_drop`,
  :func:`mcnemar_power`: what a one-sided exact McNemar gate on ``n`` paired items
  can detect at a given significance threshold (exact, no approximation), and
  :func:`mcnemar_items_for_power`: the paired items a difference needs to be detected.
- :func:`tango_noninferiority`: one-sided score test that a paired accuracy drop
  exceeds a tolerance (Tango 1998), for a gate with an allowed drop.
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
from scipy.special import gammaln, xlog1py, xlogy
from scipy.stats import binom, norm


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not (isinstance(alpha, numbers.Real) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer count, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _discordant(first: tuple[str, int], second: tuple[str, int]) -> tuple[int, int]:
    """The two discordant counts ``(name, value)`` of a paired table, checked and as ints."""
    _check_count(*first)
    _check_count(*second)
    return int(first[1]), int(second[1])


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
    b, c = _discordant(("b", b), ("c", c))
    if b + c == 0:
        return 1.0
    return float(min(1.0, 2.0 * binom.cdf(min(b, c), b + c, 0.5)))


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
    first_only, second_only = _discordant(("first_only", first_only), ("second_only", second_only))
    if first_only + second_only == 0:
        return 1.0
    return float(min(1.0, binom.cdf(first_only, first_only + second_only, 0.5)))


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
    *,
    rowwise: bool = False,
) -> tuple[float, float]:
    """Percentile bootstrap ``1 - alpha`` interval of ``stat(values)``.

    Draws ``n_resamples`` resamples with replacement from
    ``numpy.random.default_rng(seed)``, so equal inputs and seed give equal
    intervals on every machine.  Empty ``values`` return ``(0.0, 0.0)``; when all
    values are equal every resample equals the sample and the interval is the
    single point ``(stat(values), stat(values))``.  ``values`` must be finite and
    ``stat`` must return a finite scalar.

    ``rowwise=True``: ``stat`` is a numpy reduction that takes ``axis`` (``np.mean``,
    ``partial(np.percentile, q=95)``); it is called once on all the resamples
    (``axis=1``) instead of once per resample: the same estimates, hence the same
    interval, without a thousand Python calls (the latency percentiles at every case's end).
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
    estimates: np.ndarray
    if rowwise:
        reduce_rows: Callable[..., Any] = stat
        estimates = np.asarray(reduce_rows(data[indices], axis=1), dtype=np.float64)
        if estimates.shape != (n_resamples,) or not np.all(np.isfinite(estimates)):
            raise ValueError(f"stat with axis=1 must return {n_resamples} finite values, got shape {estimates.shape}")
    else:
        estimates = np.fromiter((_stat(data[row]) for row in indices), dtype=float, count=n_resamples)
    lo, hi = np.quantile(estimates, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


# --- what a paired regression gate can detect ------------------------------------------


def mcnemar_min_discordant(threshold: float, n: int | None = None) -> int | None:
    """Fewest discordant items with which the one-sided exact McNemar test reaches ``p <= threshold``.

    On ``m`` discordant items the smallest attainable p-value is ``2**-m`` (the
    candidate loses every one of them), so the answer is the least ``m`` with
    ``2**-m <= threshold``, ``ceil(log2(1 / threshold))``.  The comparison uses
    :func:`mcnemar_exact_one_sided` itself, so the boundary agrees with the gate's test
    bit for bit.  With a Holm family of ``k`` cases the threshold a case faces on its
    own is ``alpha / k``: at ``alpha = 0.05`` one case needs 5 discordant items, 7
    cases need 8 each, 30 cases need 10 each.

    The search is bounded: with ``n`` paired items it looks no further than ``n`` and
    returns ``None`` when no ``m <= n`` reaches the threshold (a gate that cannot fail);
    without ``n`` it looks one past the closed form and raises ``ArithmeticError`` when
    the test's p-values disagree with it (a test of the wrong direction), never looping.
    """
    _check_alpha(threshold)
    if n is not None:
        _check_count("n", n)
    closed = max(0, math.ceil(-math.log2(threshold)))  # 2**-closed <= threshold, up to rounding
    limit = closed + 1 if n is None else min(int(n), closed + 1)
    for m in range(max(0, closed - 2), limit + 1):
        if mcnemar_exact_one_sided(0, m) <= threshold:
            return m
    if n is not None:
        return None
    raise ArithmeticError(
        f"the one-sided exact McNemar p-value of 0 wins in {limit} discordant items stays above {threshold!r}: "
        "the test does not match 2**-m (is its direction reversed?)"
    )


def mcnemar_min_detectable_drop(n: int, threshold: float) -> float | None:
    """Smallest accuracy drop (a fraction of ``n``) the one-sided exact McNemar test can call significant.

    For an observed drop of ``k`` items (``c - b = k``, ``c`` items only the baseline
    got right, ``b`` only the candidate) the p-value ``P(Bin(2b + k, 1/2) <= b)`` grows
    with ``b``: adding one discordant pair each way changes it by
    ``(pmf(b + 1) - pmf(b)) / 4 >= 0`` because ``b`` lies below the mean ``b + k/2``.
    So the smallest significant drop has ``b = 0`` and ``k = mcnemar_min_discordant``;
    it is ``k / n``, or ``None`` when ``n < k`` and no outcome on ``n`` paired items
    can reach the threshold (a gate that cannot fail).
    """
    _check_count("n", n)
    k = mcnemar_min_discordant(threshold, n)
    return None if k is None else k / n


def _mcnemar_critical(n: int, threshold: float) -> np.ndarray:
    """For each discordant total ``m = 0..n``, the least ``c`` (items only the baseline got
    right) the one-sided exact test rejects at ``threshold``; ``m + 1`` where none is
    (one vectorised pass over ``m``)."""
    # p(c) = P(Bin(m, 1/2) <= m - c) falls as c grows; b = 0 .. n_reject - 1 (b = m - c) reject.
    # binom.ppf gives the least k with P(X <= k) >= threshold; k rejects too when that equals it.
    m = np.arange(n + 1)
    k = np.nan_to_num(binom.ppf(threshold, m, 0.5), nan=0.0).astype(np.int64)
    n_reject = np.where(binom.cdf(k, m, 0.5) <= threshold, k + 1, k)
    crit: np.ndarray = (m - n_reject + 1).astype(np.int64)
    return crit


def mcnemar_power(
    n: int, p_worse: float, p_better: float, threshold: float, _critical: np.ndarray | None = None
) -> float:
    """Exact probability that the one-sided exact McNemar test rejects at ``threshold``.

    Each of ``n`` paired items independently falls in "only the baseline right" with
    probability ``p_worse``, "only the candidate right" with ``p_better``, and is
    concordant otherwise; the true accuracy drop is ``p_worse - p_better``.  The
    number of discordant items is ``M ~ Bin(n, p_worse + p_better)`` and, given ``M``,
    the baseline-only count is ``Bin(M, p_worse / (p_worse + p_better))``; the power is
    the sum over ``M`` of the probability that this count reaches the test's critical
    value (no normal approximation).
    """
    _check_count("n", n)
    _check_alpha(threshold)
    for name, value in (("p_worse", p_worse), ("p_better", p_better)):
        if not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    psi = float(p_worse) + float(p_better)
    if psi > 1.0 + 1e-12:
        raise ValueError(f"p_worse + p_better must be <= 1, got {psi!r}")
    if n == 0 or psi == 0.0:
        return 0.0
    crit = _mcnemar_critical(n, threshold) if _critical is None else _critical
    m = np.arange(n + 1)
    ratio = float(p_worse) / psi
    reach = binom.sf(crit - 1, m, ratio)  # P(C >= crit[m] | M = m); 0 where crit = m + 1
    # P(M = m) in log space: scipy's binom.pmf overflows for subnormal probabilities.
    psi = min(psi, 1.0)
    log_pmf = gammaln(n + 1) - gammaln(m + 1) - gammaln(n - m + 1) + xlogy(m, psi) + xlog1py(n - m, -psi)
    return float(np.clip(np.sum(np.exp(log_pmf) * reach), 0.0, 1.0))


def mcnemar_drop_for_power(n: int, threshold: float, power: float = 0.8, p_better: float = 0.0) -> float | None:
    """Smallest true accuracy drop the exact McNemar gate catches with probability ``power``.

    ``p_better`` is the share of items that flip the other way (the candidate right,
    the baseline wrong): regressions rarely only break things, and flips both ways
    cost power.  The power grows with the drop at fixed ``p_better`` (one more
    baseline-only item never leaves the rejection region), so bisection finds the
    drop to 1e-4.  ``None`` when even the largest possible drop,
    ``1 - 2 * p_better``, is caught less often than ``power``.
    """
    _check_count("n", n)
    _check_alpha(threshold)
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie strictly between 0 and 1, got {power!r}")
    if not 0.0 <= p_better < 0.5:
        raise ValueError(f"p_better must lie in [0, 0.5), got {p_better!r}")
    crit = _mcnemar_critical(n, threshold)
    hi = 1.0 - 2.0 * p_better
    if mcnemar_power(n, p_better + hi, p_better, threshold, crit) < power:
        return None
    lo = 0.0
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2.0
        if mcnemar_power(n, p_better + mid, p_better, threshold, crit) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def mcnemar_items_for_power(
    p_worse: float, p_better: float, threshold: float, power: float = 0.8, limit: int = 1_000_000
) -> int | None:
    """Paired items with which the one-sided exact McNemar test rejects at ``threshold`` with probability ``power``.

    Each item falls in "only the first right" with probability ``p_worse`` and "only the
    second right" with ``p_better`` (:func:`mcnemar_power`, exact).  The exact test's
    power saw-tooths in ``n``, so the search doubles ``n`` until the power reaches
    ``power``, bisects, and then steps down while one item fewer still reaches it: the
    answer reaches ``power`` and one item fewer does not.  ``None`` when no ``n`` up to
    ``limit`` does (no difference: ``p_worse <= p_better``).  A two-sided test at
    ``alpha`` asks the one-sided ``alpha / 2`` (McNemar 1947; the gate's power, Holm 1979).
    """
    _check_alpha(threshold)
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie strictly between 0 and 1, got {power!r}")
    if float(p_worse) <= float(p_better):
        return None

    def reaches(n: int) -> bool:
        return mcnemar_power(n, p_worse, p_better, threshold) >= power

    hi = 1
    while not reaches(hi):
        if hi >= limit:
            return None
        hi = min(limit, hi * 2)
    lo = hi // 2  # does not reach (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    while hi > 1 and reaches(hi - 1):
        hi -= 1
    return hi


def _tango_restricted_q(worse_only: np.ndarray, better_only: np.ndarray, n: int, margin: float) -> np.ndarray:
    """Tango's closed-form restricted MLE of P(only the candidate right) under drop = margin."""
    a = 2.0 * n
    b = -(worse_only + better_only) + (2.0 * n - worse_only + better_only) * margin
    c = -better_only * margin * (1.0 - margin)
    root: np.ndarray = (-b + np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0))) / (2.0 * a)
    return root


def tango_pvalues(worse_only: np.ndarray, better_only: np.ndarray, n: int, margin: float) -> np.ndarray:
    """:func:`tango_noninferiority` over arrays of tables on ``n`` items (no input checks)."""
    q = _tango_restricted_q(worse_only, better_only, n, margin)
    var = n * (2.0 * q + margin * (1.0 - margin))
    num = worse_only - better_only - n * margin
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, num / np.sqrt(np.where(var > 0, var, 1.0)), 0.0)
    return np.where(var > 0, norm.sf(z), 1.0)


def tango_noninferiority(worse_only: int, better_only: int, n: int, margin: float) -> float:
    """One-sided p-value for "the candidate's accuracy is more than ``margin`` below the baseline's".

    Paired items: ``worse_only`` only the baseline got right, ``better_only`` only the
    candidate, ``n`` items in all.  The hypotheses on the true drop
    ``theta = p_baseline - p_candidate`` are ``H0: theta <= margin`` against
    ``H1: theta > margin``.  Tango, T. (1998), "Equivalence test and confidence
    interval for the difference in proportions for the paired-sample design",
    Statistics in Medicine 17:891-908, score statistic

    ``Z = (worse_only - better_only - n margin) / sqrt(n (2 q + margin (1 - margin)))``

    with ``q`` the maximum-likelihood estimate of P(only the candidate right) under
    ``theta = margin``: ``q = (-B + sqrt(B^2 - 4AC)) / 2A``, ``A = 2n``,
    ``B = -(w + b) + (2n - w + b) margin``, ``C = -b margin (1 - margin)``
    (``w = worse_only``, ``b = better_only``); the p-value is ``1 - Phi(Z)``.  At
    ``margin = 0`` this is McNemar's z test, ``(w - b) / sqrt(w + b)``.  It is an
    asymptotic test: ``bcas gate power`` prints its exact size on
    small ``n``.  Degenerate input (``n = 0``; no discordant item at ``margin = 0``)
    gives 1.0.
    """
    for name, value in (("worse_only", worse_only), ("better_only", better_only), ("n", n)):
        _check_count(name, value)
    if worse_only + better_only > n:
        raise ValueError(f"worse_only + better_only must be <= n, got {worse_only} + {better_only} > {n}")
    if isinstance(margin, bool) or not (isinstance(margin, numbers.Real) and 0.0 <= margin < 1.0):
        raise ValueError(f"margin must lie in [0, 1), got {margin!r}")
    if n == 0:
        return 1.0
    p = tango_pvalues(np.array([float(worse_only)]), np.array([float(better_only)]), int(n), float(margin))
    return float(p[0])


def tango_min_worse_only(n: int, margin: float, threshold: float) -> int | None:
    """Fewest baseline-only items (none the other way) that make the Tango test reject at ``threshold``.

    At a fixed difference ``worse_only - better_only`` the restricted estimate ``q``
    does not fall as ``better_only`` grows, so the statistic is largest with
    ``better_only = 0``: the returned count over ``n`` is the smallest drop the
    tolerance gate can call significant.  ``None`` when no outcome on ``n`` paired
    items can.
    """
    _check_count("n", n)
    _check_alpha(threshold)
    if n == 0:
        return None
    w = np.arange(n + 1, dtype=float)
    p = tango_pvalues(w, np.zeros_like(w), int(n), float(margin))
    hits = np.flatnonzero(p <= threshold)
    return int(hits[0]) if hits.size else None
