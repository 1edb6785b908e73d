"""The sequential paired gate: an anytime-valid test checked after every item, stopped when decided.

The fixed-n gate decides once all N paired items are in.  The sequential gate
(``--bcas-gate-sequential``) runs a case's items in a seeded random order
(:func:`sequence_order`) and after each paired item updates two e-processes on the
paired outcomes ``Y`` (+1: only the baseline right, -1: only the current run right,
0: concordant), whose mean is the accuracy drop:

* **fail** tests ``H0: drop <= PTS`` (``PTS`` = ``--bcas-max-drop``, 0 without it: "no
  regression"): the capital of bets on ``Y - PTS``;
* **pass** tests ``H0: drop >= PTS`` (non-inferiority within the tolerance; with no
  tolerance, "the current run is better"): the capital of bets on ``PTS - Y``.

Each e-process is a weighted average of the capital processes of ``K`` constant bets, a grid
of fractions of the largest bet that keeps the capital non-negative -- the "diversified"
(mixture) betting martingale of Waudby-Smith & Ramdas (2024), "Estimating means of bounded
random variables by betting", JRSS-B 86(1):1-27, §4-5.  Every constant bet's capital is a
nonnegative supermartingale under its null (a martingale on the null's boundary), so any
average of them with weights summing to one is too, and Ville's inequality bounds the chance
it ever reaches ``c`` by ``1/c``: the test may be checked after every item.

The weights are the Krichevsky-Trofimov prior (Krichevsky & Trofimov 1981, "The performance
of universal encoding", IEEE Trans. Inf. Theory 27(2)), Beta(1/2, 1/2), over the probability
``q = (1 + lambda)/2`` that a discordant item is the baseline's, restricted to ``q >= 1/2``: on
the bet fraction ``lambda`` in [0, 1] the density ``(2/pi) / sqrt(1 - lambda^2)``.  The grid is the
midpoints of ``K`` equal cells of [0, 1], each weighted by its cell's prior mass
``(2/pi) (arcsin b - arcsin a)``.  Against the uniform prior it moves weight to the large bets
that a drop of 10 points or more on few discordant items calls for (six straight losses give
e = 28.7 instead of 18.1), and keeps 2/pi (0.64) of the uniform density or more on the small
ones.  With
``PTS = 0`` only discordant items move the capital, and the bet ``lambda`` is the likelihood ratio
of a discordant item being the baseline's with probability ``q`` against 1/2: the mixture is
the one-sided binomial mixture martingale (Robbins 1970; Howard et al. 2021, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2), §3) under that prior,
discretised on ``K`` cells; its closed form is ``2^t B(w + 1/2, b + 1/2) (1 - I_{1/2}(w + 1/2,
b + 1/2)) / (pi/2)`` after ``w`` baseline-only and ``b`` current-only items of ``t``
(``tests/gating/test_sequential.py`` checks the grid against it).

The capital is a function of the three counts of the items seen so far, so the state of
the test is recomputed from the records, in the sequence order, on resume: a resumed
run takes the same decision at the same item as an uninterrupted one.

Decisions, for a case in a Holm family of ``m`` gated cases at level ``alpha``, of ``N``
planned paired items:

* failed as soon as ``e_fail`` reaches the fail threshold: with no tolerance, the exact
  boundary at level ``alpha * (1 - share) / m`` over ``N`` items
  (:mod:`bcas.gating.boundary`: the smallest value of the e-process whose chance of being
  reached within ``N`` items under the null is at most that level; Ville's
  ``m / (alpha * (1 - share))`` bounds it, and is the threshold with a tolerance or beyond
  :data:`bcas.gating.boundary.EXACT_MAX_ITEMS` items);
* passed as soon as ``e_pass >= m / alpha``;
* at N paired items undecided: the fixed-n test (exact McNemar, Tango with a
  tolerance) at ``alpha * share / m`` (with ``share`` 0: none, the case passes).

``share`` is ``--bcas-gate-fallback-share`` (``gate_fallback_share=``; default
:data:`DEFAULT_FALLBACK_SHARE`), one of the gate's options: it is written into the gate's plan
beside the records, and the decision is recomputed from the records with it.  The case's
p-value (for the session-wide Holm step) is the Bonferroni combination
``min(1, p_seq / (1 - share), p_fixed / share)`` of the sequential
``p_seq`` (the exact chance of reaching ``max e_fail`` within ``N`` items with no tolerance,
else Ville's ``1 / max e_fail``) and the fixed-n p-value (when N was reached): a valid p-value
under continuous monitoring, so Holm over the family keeps the fixed-n gate's
family-wise guarantee (docs/gating.md says why Holm on these p-values, not e-BH).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from scipy.special import logsumexp

from bcas.gating.baseline import GateResult, item_outcomes, paired_result
from bcas.gating.boundary import EXACT_MAX_ITEMS, TOL
from bcas.gating.boundary import tail as boundary_tail
from bcas.gating.boundary import threshold as boundary_threshold


class GatePlan(Protocol):
    """What the sequential gate reads of the gate's plan (:class:`bcas.gating.plan.GatePlan`, which
    imports this module)."""

    @property
    def cases(self) -> Mapping[str, Any]: ...
    @property
    def items(self) -> Mapping[str, dict[str, bool]]: ...
    @property
    def options(self) -> Any: ...
    @property
    def seed(self) -> int: ...


# Fractions of the largest admissible bet averaged over (Waudby-Smith & Ramdas 2024, §5): the
# midpoints of 48 equal cells of [0, 1], weighted by each cell's Krichevsky-Trofimov prior mass.
_EDGES = np.linspace(0.0, 1.0, 49)
BET_GRID = (_EDGES[:-1] + _EDGES[1:]) / 2
BET_WEIGHTS = np.diff(np.arcsin(_EDGES)) / (math.pi / 2)
_LOG_WEIGHTS = np.log(BET_WEIGHTS)
# Share of alpha the fixed-n test at N keeps by default; the e-process spends the rest
# (benchmarks/perf/bench_sequential_gate.py compares shares; docs/gating.md says why this one).
DEFAULT_FALLBACK_SHARE = 0.2

FAIL, PASS, UNDECIDED, RUNNING = "fail", "pass", "undecided", "running"


def sequence_order(item_ids: Iterable[str], seed: int, case_id: str) -> list[str]:
    """The seeded random order a sequential case runs its items in (a function of ids only)."""
    return sorted(item_ids, key=lambda i: hashlib.sha256(f"{seed}\x1f{case_id}\x1f{i}".encode()).hexdigest() + str(i))


def _bets(delta: float, side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log factors of one item (worse-only, better-only, concordant) for each bet of the grid."""
    if side == FAIL:  # bet on Y - delta; Y = -1 makes 1 - lam (1 + delta) >= 0
        lam = BET_GRID / (1.0 + delta)
        return np.log1p(lam * (1.0 - delta)), np.log1p(-lam * (1.0 + delta)), np.log1p(-lam * delta)
    lam = BET_GRID / (1.0 - delta)  # bet on delta - Y; Y = +1 makes 1 - lam (1 - delta) >= 0
    return np.log1p(-lam * (1.0 - delta)), np.log1p(lam * (1.0 + delta)), np.log1p(lam * delta)


def log_e(worse: np.ndarray, better: np.ndarray, concordant: np.ndarray, delta: float, side: str) -> np.ndarray:
    """Log of the mixture e-process after items with these counts (arrays of any equal shape).

    ``side`` ``"fail"`` tests ``drop <= delta``, ``"pass"`` tests ``drop >= delta``
    (``delta`` a fraction in [0, 1)).
    """
    lw, lb, lc = _bets(delta, side)
    w = np.asarray(worse, dtype=float)[..., None]
    b = np.asarray(better, dtype=float)[..., None]
    c = np.asarray(concordant, dtype=float)[..., None]
    return np.asarray(logsumexp(w * lw + b * lb + c * lc + _LOG_WEIGHTS, axis=-1))


def log_e_path(y: np.ndarray, delta: float, side: str) -> np.ndarray:
    """Log e-process after each item of ``y`` (last axis: the sequence; +1, -1 or 0 per item)."""
    worse = np.cumsum(y > 0, axis=-1)
    better = np.cumsum(y < 0, axis=-1)
    seen = np.arange(1, y.shape[-1] + 1)
    out = np.full(y.shape, -np.inf)
    lw, lb, lc = _bets(delta, side)
    for k in range(BET_GRID.size):  # accumulate the mixture one bet at a time, in logs: memory stays O(y)
        out = np.logaddexp(out, worse * lw[k] + better * lb[k] + (seen - worse - better) * lc[k] + _LOG_WEIGHTS[k])
    return out


def check_share(share: float) -> float:
    """``share`` as a float in [0, 1); ``ValueError`` (one line) otherwise."""
    try:
        value = float(share)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number in [0, 1), got {share!r}") from None
    if not 0.0 <= value < 1.0:  # NaN fails too
        raise ValueError(f"must lie in [0, 1), got {share!r}")
    return value


_FAIL_ROWS: list[np.ndarray] = [np.zeros(1)]


def _fail_row(t: int) -> np.ndarray:
    """Log e-values of the fail test with no tolerance after ``t`` discordant items, ``w`` = 0..t
    of them the baseline's (computed once per process, as the DP of the boundary asks for them)."""
    while len(_FAIL_ROWS) <= t:
        k = len(_FAIL_ROWS)
        w = np.arange(k + 1)
        _FAIL_ROWS.append(log_e(w, k - w, np.zeros(k + 1), 0.0, FAIL))
    return _FAIL_ROWS[t]


@functools.lru_cache(maxsize=1024)
def exact_fail_threshold(n: int, level: float) -> float:
    """The fail threshold with no tolerance for ``n`` planned items at ``level`` (:mod:`bcas.gating.boundary`)."""
    return boundary_threshold(int(n), float(level), _fail_row)


@functools.lru_cache(maxsize=4096)
def _exact_tail(n: int, e: float) -> float:
    return boundary_tail(n, e, _fail_row)


def exact_boundary(n: int | None, max_drop: float) -> bool:
    """Whether the fail threshold is the exact boundary over ``n`` items (no tolerance, ``n`` known and
    at most :data:`bcas.gating.boundary.EXACT_MAX_ITEMS`), not Ville's."""
    return n is not None and 0 < n <= EXACT_MAX_ITEMS and max_drop == 0.0


def thresholds(
    alpha: float,
    family_size: int,
    share: float = DEFAULT_FALLBACK_SHARE,
    n: int | None = None,
    max_drop: float = 0.0,
) -> tuple[float, float]:
    """The e-values at which a case of a family of ``family_size`` fails and passes, when the
    fixed-n test at N keeps ``share`` of alpha: the fail threshold is the exact boundary over
    ``n`` planned items with no tolerance (:func:`exact_boundary`), else Ville's."""
    m = max(1, int(family_size))
    level = alpha * (1.0 - check_share(share)) / m
    if n is not None and exact_boundary(n, max_drop):
        return exact_fail_threshold(int(n), level), m / alpha
    return 1.0 / level, m / alpha


@dataclass(frozen=True)
class SequentialDecision:
    """Where a sequential case stands after the items of its sequence recorded so far."""

    state: str  # fail, pass, undecided (N reached: the fixed-n verdict applies) or running
    used: int  # paired items of the sequence the decision used (K)
    n: int  # paired items planned (N)
    e_fail: float  # largest e-value of the fail test over the items used
    e_pass: float
    fail_at: float  # thresholds
    pass_at: float
    max_drop: float
    alpha: float = 0.05
    family_size: int = 1
    share: float = DEFAULT_FALLBACK_SHARE  # of alpha, kept by the fixed-n test at N

    @property
    def decided(self) -> bool:
        return self.state != RUNNING

    @property
    def exact(self) -> bool:
        """Whether the fail threshold is the exact boundary over N items (else Ville's)."""
        return exact_boundary(self.n, self.max_drop)

    @property
    def p_sequential(self) -> float:
        """The p-value of "no regression" (beyond the tolerance), valid at any stopping time up to N:
        the exact chance of reaching max e within N items, or Ville's 1 / max e."""
        if self.e_fail <= 1.0:
            return 1.0
        return _exact_tail(self.n, self.e_fail) if self.exact else 1.0 / self.e_fail

    def combined_p(self, p_fixed: float | None) -> float:
        """Bonferroni combination of the sequential and (at N) fixed-n p-values (module docstring)."""
        p = self.p_sequential / (1.0 - self.share)
        if self.state == UNDECIDED and p_fixed is not None and self.share > 0:
            p = min(p, p_fixed / self.share)
        return min(1.0, p)

    def sentence(self, fixed_verdict: str = "") -> str:
        """How the verdict was reached, in words (terminal, JUnit, report, MLflow)."""
        tol = self.max_drop * 100
        if self.state == FAIL:
            what = f"drop > {tol:g} pts shown" if tol > 0 else "regression shown"
            return (
                f"stopped after {self.used} of {self.n} items: {what} "
                f"(e = {self.e_fail:.4g}, threshold {self.fail_at:.4g} = {self._level(1.0 - self.share, fail=True)})"
            )
        if self.state == PASS:
            what = f"drop <= {tol:g} pts shown" if tol > 0 else "improvement shown"
            return (
                f"passed after {self.used} of {self.n} items: {what} (e = {self.e_pass:.4g}, "
                f"threshold {self.pass_at:.4g} = {self._level(1.0)})"
            )
        if self.state == UNDECIDED:
            head = f"undecided after {self.n} of {self.n} items (e = {self.e_fail:.4g} < {self.fail_at:.4g}): "
            if self.share == 0:
                return head + "no fixed-n test at N (fallback share 0): pass"
            return (
                head
                + f"the fixed-n verdict applies at alpha x {self.share:g}"
                + (f": {fixed_verdict}" if fixed_verdict else "")
            )
        return f"running: {self.used} of {self.n} items (e = {self.e_fail:.4g})"

    def _level(self, share: float, fail: bool = False) -> str:
        """The threshold as 1 / (the level it tests at): m / (alpha x share); with the exact
        boundary (the fail side), the level and the items it holds over."""
        level = f"{self.alpha:g} x {share:g}" if share < 1.0 else f"{self.alpha:g}"
        if fail and self.exact:
            m = f" / {self.family_size}" if self.family_size > 1 else ""
            return f"the exact boundary at {level}{m} over {self.n} items"
        m = f"{self.family_size}/" if self.family_size > 1 else "1/"
        return m + (f"({level})" if share < 1.0 else level)


def paired_sequence(order: Sequence[str], current: Mapping[str, bool], base: Mapping[str, bool]) -> np.ndarray:
    """The paired outcomes (+1, -1, 0) of the longest prefix of ``order`` whose items are all recorded;
    items the baseline does not hold are passed over (they are run, but not paired)."""
    out: list[int] = []
    for item_id in order:
        if item_id not in base:
            continue
        if item_id not in current:
            break
        out.append(int(base[item_id]) - int(current[item_id]))
    return np.asarray(out, dtype=np.int8)


def decide(
    y: np.ndarray,
    n: int,
    alpha: float,
    family_size: int,
    max_drop: float = 0.0,
    share: float = DEFAULT_FALLBACK_SHARE,
) -> SequentialDecision:
    """The first item of ``y`` (paired outcomes in sequence order) at which the case is decided;
    the fixed-n test at N keeps ``share`` of alpha."""
    fail_at, pass_at = thresholds(alpha, family_size, share, n, max_drop)
    if y.size == 0:
        state = RUNNING if n else UNDECIDED
        return SequentialDecision(state, 0, n, 1.0, 1.0, fail_at, pass_at, max_drop, alpha, family_size, share)
    lf = log_e_path(y, max_drop, FAIL)
    lp = log_e_path(y, max_drop, PASS)
    at = math.log(fail_at) - TOL  # the DP's paths that reach the boundary are these
    hits = np.nonzero((lf >= at) | (lp >= math.log(pass_at)))[0]
    if hits.size:
        k = int(hits[0]) + 1
        state = FAIL if lf[k - 1] >= at else PASS
    else:
        k = int(y.size)
        state = UNDECIDED if k >= n else RUNNING
    return SequentialDecision(
        state,
        k,
        n,
        float(np.exp(lf[:k].max())),
        float(np.exp(lp[:k].max())),
        fail_at,
        pass_at,
        max_drop,
        alpha,
        family_size,
        share,
    )


def _count_table(n: int, side: str) -> np.ndarray:
    """Log e-value of every (worse-only, better-only) count pair up to ``n`` items, with no tolerance
    (then concordant items do not move the capital): the Monte Carlo looks the paths up here."""
    counts = np.arange(n + 1)
    table = np.full((n + 1, n + 1), -np.inf)
    for w in counts:
        table[w, : n + 1 - w] = log_e(np.full(n + 1 - w, w), counts[: n + 1 - w], np.zeros(n + 1 - w), 0.0, side)
    return table


def simulate(
    p_worse: float,
    p_better: float,
    n: int,
    runs: int,
    alpha: float,
    *,
    max_drop: float = 0.0,
    family_size: int = 1,
    share: float = DEFAULT_FALLBACK_SHARE,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Monte Carlo of the sequential gate on ``runs`` sequences of ``n`` paired items.

    Each item is only-baseline-right with ``p_worse``, only-current-right with
    ``p_better``.  Returns per run: failed by the e-process, decided by it (failed or
    passed), items used, and the paired counts at N (worse-only, better-only) for the
    fixed-n fallback of the undecided runs.
    """
    rng = rng or np.random.default_rng(0)
    u = rng.random((runs, n), dtype=np.float32)
    y = (u < p_worse).astype(np.int8) - ((u >= p_worse) & (u < p_worse + p_better)).astype(np.int8)
    fail_at, pass_at = thresholds(alpha, family_size, share, n, max_drop)
    at = math.log(fail_at) - TOL
    if max_drop == 0.0:
        worse, better = np.cumsum(y > 0, axis=1), np.cumsum(y < 0, axis=1)
        crossed = _count_table(n, FAIL)[worse, better] >= at
        passed = _count_table(n, PASS)[worse, better] >= math.log(pass_at)
    else:
        crossed = log_e_path(y, max_drop, FAIL) >= at
        passed = log_e_path(y, max_drop, PASS) >= math.log(pass_at)
    stop = crossed | passed
    decided = np.asarray(stop.any(axis=1))
    first = np.where(decided, stop.argmax(axis=1), n - 1)
    failed = crossed[np.arange(runs), first]
    counts = np.stack([(y > 0).sum(axis=1), (y < 0).sum(axis=1)], axis=1)
    return failed, decided, first + 1, counts


def mcnemar_critical(n: int, level: float) -> np.ndarray:
    """Per number of discordant items ``d`` (0..n): the fewest baseline-only items the exact
    one-sided McNemar test rejects at ``level`` (``d + 1``: none)."""
    from scipy.stats import binom

    out = np.empty(n + 1, dtype=int)
    for d in range(n + 1):
        tail = binom.sf(np.arange(d + 1) - 1, d, 0.5)  # P(X >= k), k = 0..d
        ok = np.nonzero(tail <= level)[0]
        out[d] = int(ok[0]) if ok.size else d + 1
    return out


def gate_fails(
    p_worse: float,
    p_better: float,
    n: int,
    runs: int,
    alpha: float,
    *,
    family_size: int = 1,
    share: float = DEFAULT_FALLBACK_SHARE,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The whole sequential gate without a tolerance, simulated: per run whether the case fails
    (the e-process, or at N undecided the exact McNemar test at ``alpha x share / m``)
    and the paired items it used."""
    failed, decided, used, counts = simulate(
        p_worse, p_better, n, runs, alpha, family_size=family_size, share=share, rng=rng
    )
    critical = mcnemar_critical(n, alpha * share / max(1, family_size))
    fallback = ~decided & (counts[:, 0] >= critical[counts.sum(axis=1)])
    return failed | fallback, used


def horizon_curves(
    p_worse: float,
    p_better: float,
    horizons: Sequence[int],
    runs: int,
    alpha: float,
    *,
    family_size: int = 1,
    share: float = DEFAULT_FALLBACK_SHARE,
    rng: np.random.Generator | None = None,
    chunk: int = 1000,
) -> tuple[np.ndarray, np.ndarray]:
    """The whole sequential gate without a tolerance at each horizon N of ``horizons`` at once:
    per N the share of ``runs`` that fail and the mean paired items used.

    The e-process's path does not depend on N; the stop at N, the fixed-n test there and the
    fail threshold (the exact boundary over N items) do.  So one set of ``runs`` sequences of
    ``max(horizons)`` items serves every N, with the first item at which each distinct
    threshold is reached found once (element ``i`` of each array is :func:`gate_fails` at
    ``horizons[i]`` on the first ``horizons[i]`` items of the same sequences).
    """
    rng = rng or np.random.default_rng(0)
    ns = np.asarray(horizons, dtype=int)
    n_max = int(ns.max())
    levels = [thresholds(alpha, family_size, share, int(n))[0] for n in ns]
    pass_at = thresholds(alpha, family_size, share)[1]
    distinct = sorted(set(levels))
    tables = _count_table(n_max, FAIL), _count_table(n_max, PASS)
    critical = mcnemar_critical(n_max, alpha * share / max(1, family_size))
    fails, items = np.zeros(ns.size), np.zeros(ns.size)
    for start in range(0, runs, chunk):
        size = min(chunk, runs - start)
        u = rng.random((size, n_max), dtype=np.float32)
        worse = np.cumsum(u < p_worse, axis=1, dtype=np.int32)
        better = np.cumsum((u >= p_worse) & (u < p_worse + p_better), axis=1, dtype=np.int32)
        lf = tables[0][worse, better]
        passed = tables[1][worse, better] >= math.log(pass_at)
        first_pass = np.where(passed.any(axis=1), passed.argmax(axis=1), n_max)
        first_fail = {}
        for c in distinct:
            crossed = lf >= math.log(c) - TOL
            first_fail[c] = np.where(crossed.any(axis=1), crossed.argmax(axis=1), n_max)
        for i, (n, c) in enumerate(zip(ns, levels, strict=True)):
            stop = np.minimum(first_fail[c], first_pass)  # index of the deciding item (a tie fails)
            by_e = (stop < n) & (first_fail[c] <= first_pass)
            undecided = stop >= n
            w_n, d_n = worse[:, n - 1], worse[:, n - 1] + better[:, n - 1]
            fails[i] += by_e.sum() + (undecided & (w_n >= critical[d_n])).sum()
            items[i] += np.minimum(stop + 1, n).sum()
    return fails / runs, items / runs


def fixed_power(n: int, p_worse: float, p_better: float, level: float, critical: np.ndarray | None = None) -> float:
    """Exact power of the fixed-n one-sided McNemar test at ``level`` on ``n`` paired items."""
    from scipy.stats import binom

    critical = mcnemar_critical(n, level) if critical is None else critical
    d = np.arange(n + 1)
    share = p_worse / (p_worse + p_better) if p_worse + p_better > 0 else 0.5
    return float((binom.pmf(d, n, p_worse + p_better) * binom.sf(critical[: n + 1] - 1, d, share)).sum())


def case_decision(plan: GatePlan, case_id: str, records: list[dict[str, Any]]) -> SequentialDecision:
    """Where a gated case of ``plan`` stands on its records so far, read in its sequence order.

    Used while the case runs (to stop its remaining items) and once it ends (its verdict),
    on the same records in the same order: a resumed run decides at the same item.
    """
    cp = plan.cases[case_id]
    base = plan.items[case_id]
    o = plan.options
    order = sequence_order(base, plan.seed, case_id)
    y = paired_sequence(order, item_outcomes(records, cp.metric), base)
    return decide(y, len(base), o.alpha, cp.family_size, o.max_drop, o.fallback_share)


def sequential_result(plan: GatePlan, case_id: str, records: list[dict[str, Any]]) -> GateResult | None:
    """The gate result of a sequential case: the fixed-n numbers on the items used, with the
    combined p-value (module docstring) and how the verdict was reached."""
    cp = plan.cases[case_id]
    decision = case_decision(plan, case_id, records)
    base = plan.items[case_id]
    used = set(sequence_order(base, plan.seed, case_id)[: decision.used])  # the order's paired items only
    kept = [r for r in records if str(r.get("item_id")) in used]
    fixed = paired_result(
        case_id,
        cp.key,
        kept,
        {i: v for i, v in base.items() if i in used},
        cp.family_size,
        plan.options.alpha,
        metric=cp.metric,
        max_drop=plan.options.max_drop,
        family=cp.family,
        grid=cp.grid,
        baseline=cp.baseline_model,
    )
    if fixed is None:
        return None
    p = decision.combined_p(fixed.p_value if decision.state == UNDECIDED else None)
    how = decision.sentence()
    if decision.state == UNDECIDED:
        level = fixed.threshold * decision.share
        fixed_fails = decision.share > 0 and fixed.p_value <= level
        how = decision.sentence(
            f"{fixed.test} p = {fixed.p_value:.4g} {'<=' if fixed_fails else '>'} "
            f"{level:.4g}: {'FAIL' if fixed_fails else 'pass'}"
        )
    return replace(
        fixed,
        n_paired=decision.n,
        p_value=p,
        failed_now=p <= fixed.threshold,
        test=plan.options.test,
        sequential=decision.state,
        stopped_at=decision.used,
        e_value=decision.e_fail if decision.state != PASS else decision.e_pass,
        how=how,
    )


__all__ = [
    "BET_GRID",
    "BET_WEIGHTS",
    "DEFAULT_FALLBACK_SHARE",
    "SequentialDecision",
    "case_decision",
    "check_share",
    "decide",
    "fixed_power",
    "gate_fails",
    "horizon_curves",
    "log_e",
    "log_e_path",
    "mcnemar_critical",
    "paired_sequence",
    "sequence_order",
    "sequential_result",
    "simulate",
    "thresholds",
]
