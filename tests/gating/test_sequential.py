"""The sequential gate (bcas.gating.sequential): its e-process against the paper's closed form,
its error rate under monitoring after every item, and what a user sees when it stops a case."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import betainc, betaln

from bcas.gating.sequential import (
    BET_WEIGHTS,
    FAIL,
    PASS,
    RUNNING,
    UNDECIDED,
    check_share,
    decide,
    fixed_power,
    gate_fails,
    horizon_curves,
    log_e,
    log_e_path,
    mcnemar_critical,
    sequence_order,
    thresholds,
)


def _brute_force_tail(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every one of the 2^n sequences of n discordant items (each the baseline's with chance 1/2):
    the largest log e-value each reaches (no tolerance), and the distinct log e-values reachable."""
    paths = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.int8)  # 1: the baseline's
    worse = np.cumsum(paths, axis=1)
    better = np.arange(1, n + 1)[None, :] - worse
    le = log_e(worse, better, np.zeros_like(worse), 0.0, FAIL)
    return le.max(axis=1), np.unique(le)


def _kt_mixture(worse: int, better: int) -> float:
    """The one-sided binomial mixture martingale of the discordant pairs under the Krichevsky-Trofimov
    prior Beta(1/2, 1/2) on q restricted to [1/2, 1] (Robbins 1970; Howard et al. 2021, §3):
    2^t int_{1/2}^1 q^w (1-q)^b q^(-1/2) (1-q)^(-1/2) dq / (pi/2)."""
    t = worse + better
    tail = 1.0 - betainc(worse + 0.5, better + 0.5, 0.5)
    return math.exp(t * math.log(2.0) + betaln(worse + 0.5, better + 0.5) - math.log(math.pi / 2)) * tail


@pytest.mark.parametrize(("worse", "better"), [(6, 0), (7, 0), (12, 0), (10, 3), (25, 10), (40, 30), (3, 9), (0, 4)])
def test_without_tolerance_the_e_process_is_the_binomial_mixture_martingale(worse: int, better: int) -> None:
    """No tolerance: concordant items do not move it, and it is the KT-prior mixture on a grid of 48 cells."""
    ours = float(np.exp(log_e(np.array(worse), np.array(better), np.array(17), 0.0, FAIL)))
    assert ours == pytest.approx(_kt_mixture(worse, better), rel=0.012)
    assert BET_WEIGHTS.sum() == pytest.approx(1.0, abs=1e-12) and (BET_WEIGHTS > 0).all()  # a proper average


@pytest.mark.parametrize("n", [5, 8, 11, 14])
@pytest.mark.parametrize("level", [0.1, 0.05, 0.04, 0.0125])
def test_the_exact_boundary_is_the_smallest_reachable_value_crossed_with_chance_at_most_the_level(
    n: int, level: float
) -> None:
    """Against all 2^n sequences of n discordant items: the fail threshold over n items is the
    smallest e-value some sequence reaches whose chance of being reached is at most the level
    (Ville's 1/level when none below it is), and the case's p-value is that chance."""
    from bcas.gating.sequential import _exact_tail, exact_fail_threshold

    peak, values = _brute_force_tail(n)
    chance = {float(v): float((peak >= v - 1e-9).mean()) for v in values if 0 < v <= math.log(1 / level) + 1e-9}
    ok = [v for v, c in chance.items() if c <= level]
    expected = math.exp(min(ok)) if ok else 1 / level
    got = exact_fail_threshold(n, level)
    assert got == pytest.approx(expected, rel=1e-9), (n, level, got, expected)
    assert got <= 1 / level + 1e-9  # never above Ville's
    assert thresholds(level, 1, 0.0, n)[0] == pytest.approx(got, rel=1e-12)
    for v, c in list(chance.items())[:: max(1, len(chance) // 7)]:
        assert _exact_tail(n, math.exp(v)) == pytest.approx(min(c, math.exp(-v)), rel=1e-9, abs=1e-15)


def test_the_exact_boundary_grows_with_the_items_and_stays_under_ville() -> None:
    """More items, more chances to cross: the boundary of a longer horizon is never lower (as a
    real threshold), and a case in a family of m faces the level alpha (1 - share) / m."""
    from bcas.gating.boundary import crossing_chance
    from bcas.gating.sequential import _fail_row, exact_fail_threshold

    level = 0.05 * 0.8
    last = 0.0
    for n in (10, 30, 66, 100, 300, 1000):
        c = exact_fail_threshold(n, level)
        assert c < 1 / level and crossing_chance(n, math.log(c), _fail_row) <= level
        assert c >= last - 1e-9 or crossing_chance(n, math.log(last), _fail_row) <= level
        last = max(last, c)
    assert thresholds(0.05, 3, 0.2, 100) == (exact_fail_threshold(100, 0.05 * 0.8 / 3), 3 / 0.05)
    assert thresholds(0.05, 3, 0.2, 100, max_drop=0.05) == pytest.approx((3 / 0.04, 3 / 0.05))  # a tolerance: Ville
    assert thresholds(0.05, 1, 0.2, 5000) == pytest.approx((25.0, 20.0))  # beyond the exact range: Ville
    from bcas.gating import boundary

    assert boundary.threshold(boundary.EXACT_MAX_ITEMS + 1, 0.04, _fail_row) == pytest.approx(25.0)
    assert boundary.threshold(0, 0.04, _fail_row) == pytest.approx(25.0)
    assert boundary.threshold(2, 0.04, _fail_row) == pytest.approx(25.0)  # two items never reach 25 nor less
    assert boundary.tail(boundary.EXACT_MAX_ITEMS + 1, 40.0, _fail_row) == pytest.approx(1 / 40)
    assert boundary.tail(100, 1.0, _fail_row) == boundary.tail(100, 0.5, _fail_row) == 1.0
    six = float(np.exp(_fail_row(6)[6]))  # six straight losses: the only 6-item path that reaches it
    assert boundary.tail(6, six * 0.999, _fail_row) == pytest.approx(1 / 64)
    assert boundary.tail(40, six * 0.999, _fail_row) > boundary.tail(7, six * 0.999, _fail_row) >= 1 / 64


def test_the_grid_path_and_the_count_formula_agree_on_random_sequences() -> None:
    """log_e_path (one bet at a time along the sequence) against log_e (the counts) on several sequences."""
    rng = np.random.default_rng(11)
    for delta, side in ((0.0, FAIL), (0.0, PASS), (0.1, FAIL), (0.1, PASS)):
        y = rng.choice(np.array([1, 0, -1], dtype=np.int8), size=(3, 120), p=[0.2, 0.65, 0.15])
        path = log_e_path(y, delta, side)
        w, b = np.cumsum(y > 0, axis=-1), np.cumsum(y < 0, axis=-1)
        c = np.arange(1, 121) - w - b
        assert np.allclose(path, log_e(w, b, c, delta, side), rtol=1e-10, atol=1e-10)


# Straight losses (no tolerance): the KT closed form gives e = 15.6, 28.7, 53.3, 99.9, 188.6, 357.4
# after 5 .. 10 of them.  Ville's threshold of a lone case is 1/(alpha (1 - share)), of a case among m
# m times that; over a known number of items the exact boundary lies under it, so a case stops as
# soon as or sooner than Ville's rule would, and its verdict names the boundary it crossed.
@pytest.mark.parametrize(
    ("share", "family", "ville_stops", "n"),
    [(0.0, 1, 6, 100), (0.2, 1, 6, 100), (0.2, 1, 6, 10), (0.5, 1, 7, 100), (0.75, 1, 8, 100), (0.9, 1, 10, 100),
     (0.0, 3, 8, 100), (0.2, 3, 8, 100), (0.5, 3, 9, 30)],
)  # fmt: skip
def test_the_fallback_share_sets_the_fail_threshold_and_the_verdict_says_it(
    share: float, family: int, ville_stops: int, n: int
) -> None:
    from bcas.gating.sequential import exact_fail_threshold

    alpha = 0.05
    ville = family / (alpha * (1 - share))
    assert thresholds(alpha, family, share) == pytest.approx((ville, family / alpha), rel=1e-12)
    assert _kt_mixture(ville_stops - 1, 0) < 0.98 * ville and _kt_mixture(ville_stops, 0) > 1.02 * ville
    fail_at = exact_fail_threshold(n, alpha * (1 - share) / family)
    assert fail_at < ville and thresholds(alpha, family, share, n)[0] == fail_at
    stops_at = next(k for k in range(1, 20) if _kt_mixture(k, 0) >= fail_at * (1 + 1e-6))
    assert stops_at <= ville_stops
    y = np.ones(stops_at, dtype=np.int8)
    before = decide(y[:-1], n, alpha, family, share=share)
    assert before.state == RUNNING and before.fail_at == pytest.approx(fail_at)
    decision = decide(y, n, alpha, family, share=share)
    assert decision.state == FAIL and decision.used == stops_at
    level = "0.05" if share == 0 else f"0.05 x {1 - share:g}"
    level += f" / {family}" if family > 1 else ""
    assert decision.sentence() == (
        f"stopped after {stops_at} of {n} items: regression shown "
        f"(e = {decision.e_fail:.4g}, threshold {fail_at:.4g} = the exact boundary at {level} over {n} items)"
    )
    # with a tolerance (or beyond the exact range) the threshold is Ville's and says so
    tolerant = decide(np.ones(ville_stops + 3, dtype=np.int8), n, alpha, family, max_drop=0.001, share=share)
    ville_level = f"{family}/0.05" if share == 0 else f"{family}/(0.05 x {1 - share:g})"
    assert tolerant.fail_at == pytest.approx(ville) and f"threshold {ville:.4g} = {ville_level})" in tolerant.sentence()


@pytest.mark.parametrize("share", [0.0, 0.1, 0.2, 0.5])
def test_undecided_at_n_the_fixed_n_test_gets_the_share_of_alpha(share: float) -> None:
    """Three losses, two wins in 30 items: the e-process stays low; at N the fixed-n p-value counts
    against share x alpha in the combined p-value, and the verdict names that level."""
    y = np.array([1, 0, -1, 0, 1, 0, 0, -1, 1] + [0] * 21, dtype=np.int8)
    decision = decide(y, 30, 0.05, 1, share=share)
    assert decision.state == UNDECIDED and decision.used == 30
    from bcas.gating.sequential import _exact_tail

    p_seq = _exact_tail(30, decision.e_fail)  # the exact chance of reaching its e over 30 items
    assert p_seq < 1 / decision.e_fail and decision.p_sequential == p_seq
    for p_fixed in (0.001, 0.02, 0.5):
        expected = min(1.0, p_seq / (1 - share), p_fixed / share) if share > 0 else min(1.0, p_seq)
        assert decision.combined_p(p_fixed) == pytest.approx(expected)
    if share == 0:
        assert decision.sentence("x").endswith("no fixed-n test at N (fallback share 0): pass")
    else:
        assert decision.sentence("v").endswith(f"the fixed-n verdict applies at alpha x {share:g}: v")


@pytest.mark.parametrize("bad", [1.0, 1.5, -0.1, float("nan"), "half", None])
def test_a_share_outside_0_1_is_refused_in_one_line(bad: object) -> None:
    with pytest.raises(ValueError, match=r"^must (lie|be a number) in \[0, 1\), got ") as caught:
        check_share(bad)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError):
        thresholds(0.05, 1, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("delta", [0.0, 0.05, 0.15])
@pytest.mark.parametrize("side", [FAIL, PASS])
def test_each_step_is_fair_on_the_null_boundary_and_unfavourable_inside(delta: float, side: str) -> None:
    """E[e after one item] = 1 when the drop equals the tolerance, <= 1 on the rest of the null:
    the nonnegative supermartingale Ville's inequality needs."""
    ones = np.ones(1)
    e = {y: float(np.exp(log_e(ones * (y > 0), ones * (y < 0), ones * (y == 0), delta, side)[0])) for y in (1, -1, 0)}
    for p_b in (0.05, 0.2):
        boundary = {1: p_b + delta, -1: p_b, 0: 1 - 2 * p_b - delta}
        assert sum(p * e[y] for y, p in boundary.items()) == pytest.approx(1.0, abs=1e-12)
        shift = -0.03 if side == FAIL else 0.03  # a drop below (fail's null) or above (pass's null) the tolerance
        inside = {1: p_b + delta + shift, -1: p_b, 0: 1 - 2 * p_b - delta - shift}
        assert sum(p * e[y] for y, p in inside.items()) < 1.0


def test_monitoring_after_every_item_keeps_the_error_rate_where_peeking_does_not() -> None:
    """10,000 runs of 300 paired items with no regression (20% discordant), the gate checked
    after every item: it fails at most alpha + 3 Monte Carlo standard errors of the runs.  The
    fixed-n McNemar test looked at after every item (stop at the first p <= alpha) fails far more."""
    runs, n, alpha = 10_000, 300, 0.05
    failed, used = gate_fails(0.1, 0.1, n, runs, alpha, rng=np.random.default_rng(7))
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert failed.mean() <= alpha + 3 * se
    rng = np.random.default_rng(7)
    u = rng.random((runs, n), dtype=np.float32)
    worse, better = np.cumsum(u < 0.1, axis=1), np.cumsum((u >= 0.1) & (u < 0.2), axis=1)
    critical = mcnemar_critical(n, alpha)
    peeking = (worse >= critical[worse + better]).any(axis=1).mean()
    assert peeking > 2 * alpha


def test_a_large_drop_is_caught_early_with_the_fixed_n_gates_power() -> None:
    """Drop 10 points, 20% discordant, 300 items: within 5 points of the fixed-n gate's power at N (the
    price of keeping only 0.2 x alpha for the test at N), on far fewer items than the fixed-n gate
    needs for the power it reaches."""
    failed, used = gate_fails(0.15, 0.05, 300, 4000, 0.05, rng=np.random.default_rng(3))
    power = float(failed.mean())
    assert fixed_power(300, 0.15, 0.05, 0.05) - 0.05 <= power < fixed_power(300, 0.15, 0.05, 0.05)
    same_power = next(n for n in range(1, 301) if fixed_power(n, 0.15, 0.05, 0.05) >= power - 0.01)
    assert used.mean() < 0.75 * same_power and used.mean() < 0.5 * 300


def test_the_order_is_seeded_and_a_decision_depends_only_on_the_items_before_it() -> None:
    ids = [f"q{i}" for i in range(50)]
    assert sequence_order(ids, 0, "c") == sequence_order(list(reversed(ids)), 0, "c")
    assert sequence_order(ids, 0, "c") != sequence_order(ids, 1, "c") != ids
    rng = np.random.default_rng(0)
    y = rng.choice(np.array([1, 0, -1], dtype=np.int8), size=200, p=[0.25, 0.7, 0.05])
    full = decide(y, 200, 0.05, 1)
    assert full.state == FAIL
    assert decide(y[: full.used + 5], 200, 0.05, 1) == full  # items after the decision change nothing
    assert decide(y[: full.used - 1], 200, 0.05, 1).state == RUNNING


def test_a_case_in_a_family_faces_the_level_over_m_and_n_reached_is_undecided() -> None:
    """Eight straight losses of 20 items (e = 99.93): a lone case fails after six (the exact boundary at
    0.04 over 20 items, 16.5); a case among seven after eight (at 0.04 / 7 the boundary is 99.93, where
    Ville's 7/(0.05 x 0.8) = 175 would never be reached); among ten (103.5) it is undecided at N."""
    from bcas.gating.sequential import exact_fail_threshold

    y = np.array([1] * 8 + [0] * 12, dtype=np.int8)
    alone, in_seven, in_ten = decide(y, 20, 0.05, 1), decide(y, 20, 0.05, 7), decide(y, 20, 0.05, 10)
    assert alone.state == FAIL and "stopped after 6 of 20 items: regression shown" in alone.sentence()
    assert (
        in_seven.state == FAIL and in_seven.used == 8 and in_seven.fail_at == pytest.approx(_kt_mixture(8, 0), rel=0.02)
    )
    assert in_seven.fail_at == exact_fail_threshold(20, 0.04 / 7) < 7 / 0.04
    assert in_ten.state == UNDECIDED and in_ten.fail_at == exact_fail_threshold(20, 0.04 / 10) > in_ten.e_fail
    assert "the fixed-n verdict applies" in in_ten.sentence()


def test_with_a_tolerance_a_small_drop_passes_early_and_says_so() -> None:
    """--bcas-max-drop 10: a run 1 point worse passes before N ("drop <= 10 pts shown")."""
    rng = np.random.default_rng(1)
    y = rng.choice(np.array([1, 0, -1], dtype=np.int8), size=1000, p=[0.06, 0.89, 0.05])
    decision = decide(y, 1000, 0.05, 1, max_drop=0.10)
    assert decision.state == PASS and decision.used < 1000
    assert f"passed after {decision.used} of 1000 items: drop <= 10 pts shown" in decision.sentence()
    assert float(np.exp(log_e_path(y, 0.10, FAIL).max())) < 1.0 / 0.025


def test_gate_power_sequential_answers_how_many_items_a_drop_needs() -> None:
    """``bcas gate power --sequential 15 --n 300``: the simulated power and the items used."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "bcas", "gate", "power", "--sequential", "15,30", "--n", "300", "--cases", "1"],
        cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| 15 | 300 |")]
    power, mean_items = float(row.split("|")[3]), float(row.split("|")[4])
    assert power >= 0.95 and mean_items < 150  # a 15-point drop on 20% discordant items: caught early
    assert "a drop of 30 points needs at least 30% discordant items" in done.stdout
    assert "20% of items discordant, fallback share 0.2;" in done.stdout  # the gate's default
    other = subprocess.run(
        [sys.executable, "-m", "bcas", "gate", "power", "--sequential", "15", "--n", "100", "--fallback-share", "0.5"],
        cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert other.returncode == 0 and "fallback share 0.5;" in other.stdout, other.stderr


def test_horizon_curves_are_the_gate_run_item_by_item_at_every_horizon() -> None:
    """One simulation for every N (the bench's shortcut) against an independent run of the gate:
    decide() on each sequence's first N items, the exact McNemar test at alpha x share at N."""
    from scipy.stats import binom

    p_w, p_b, n_max, runs, alpha = 0.15, 0.05, 70, 60, 0.05
    for share in (0.2, 0.5):
        horizons = (5, 20, 41, 70)
        fails, items = horizon_curves(p_w, p_b, horizons, runs, alpha, share=share, rng=np.random.default_rng(2))
        u = np.random.default_rng(2).random((runs, n_max), dtype=np.float32)  # the same draws
        y = (u < p_w).astype(np.int8) - ((u >= p_w) & (u < p_w + p_b)).astype(np.int8)
        for i, n in enumerate(horizons):
            failed, used = 0, 0
            for row in y:
                d = decide(row[:n], n, alpha, 1, share=share)
                worse, disc = int((row[:n] > 0).sum()), int((row[:n] != 0).sum())
                fixed_fails = disc > 0 and binom.sf(worse - 1, disc, 0.5) <= alpha * share
                failed += d.state == FAIL or (d.state == UNDECIDED and fixed_fails)
                used += d.used
            assert fails[i] == pytest.approx(failed / runs) and items[i] == pytest.approx(used / runs)


def test_the_boundaries_docs_gating_quotes_are_the_codes() -> None:
    """docs/gating.md quotes the lone case's exact boundary over 100, 300 and 1,000 items (alpha 0.05,
    share 0.2): the figures are the code's, to the digit shown."""
    import re
    from pathlib import Path

    from bcas.gating.sequential import exact_fail_threshold

    text = (Path(__file__).resolve().parents[2] / "docs" / "gating.md").read_text(encoding="utf-8")
    found = re.search(r"\*\*([\d.]+) over 100 items,\s+([\d.]+) over 300, ([\d.]+) over 1,000\*\*", text)
    assert found is not None
    quoted = [float(v) for v in found.groups()]
    assert quoted == [round(exact_fail_threshold(n, 0.05 * 0.8), 1) for n in (100, 300, 1000)]
