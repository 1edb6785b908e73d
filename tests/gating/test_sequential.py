"""The sequential gate (bcas.gating.sequential): its e-process against the paper's closed form,
its error rate under monitoring after every item, and what a user sees when it stops a case."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import betainc, betaln

from bcas.gating.sequential import (
    FAIL,
    PASS,
    RUNNING,
    UNDECIDED,
    decide,
    fixed_power,
    gate_fails,
    log_e,
    log_e_path,
    mcnemar_critical,
    sequence_order,
)


def _robbins_uniform(worse: int, better: int) -> float:
    """The one-sided binomial mixture martingale of the discordant pairs, uniform prior on
    q in [1/2, 1] (Robbins 1970; Howard et al. 2021, §3): 2^(t+1) * int_{1/2}^1 q^w (1-q)^b dq."""
    t = worse + better
    tail = 1.0 - betainc(worse + 1, better + 1, 0.5)
    return math.exp((t + 1) * math.log(2.0) + betaln(worse + 1, better + 1)) * tail


@pytest.mark.parametrize(("worse", "better"), [(7, 0), (12, 0), (10, 3), (25, 10), (40, 30), (3, 9)])
def test_without_tolerance_the_e_process_is_the_binomial_mixture_martingale(worse: int, better: int) -> None:
    """No tolerance: concordant items do not move it, and it is the uniform-prior mixture on a grid."""
    ours = float(np.exp(log_e(np.array(worse), np.array(better), np.array(17), 0.0, FAIL)))
    assert ours == pytest.approx(_robbins_uniform(worse, better), rel=0.02)


def test_seven_straight_losses_fail_a_lone_case_at_alpha_005_and_six_do_not() -> None:
    """The closed form's numbers: (2^(t+1) - 1) / (t + 1) is 18.1 after 6 losses, 31.9 after 7
    (Robbins' mixture), so with the e-process's level alpha/2 (threshold 40) it takes 8."""
    assert _robbins_uniform(6, 0) == pytest.approx(127 / 7) and _robbins_uniform(7, 0) == pytest.approx(255 / 8)
    y = np.ones(8, dtype=np.int8)
    assert decide(y[:7], 100, 0.05, 1).state == RUNNING
    assert decide(y, 100, 0.05, 1).state == FAIL and decide(y, 100, 0.05, 1).used == 8


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
    """Drop 10 points, 20% discordant, 300 items: about the fixed-n gate's power, on far fewer items."""
    failed, used = gate_fails(0.15, 0.05, 300, 4000, 0.05, rng=np.random.default_rng(3))
    assert failed.mean() >= fixed_power(300, 0.15, 0.05, 0.05) - 0.03
    assert used.mean() < 0.7 * 300


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


def test_a_case_in_a_family_faces_m_over_alpha_and_n_reached_is_undecided() -> None:
    y = np.array([1] * 8 + [0] * 12, dtype=np.int8)
    alone, in_seven = decide(y, 20, 0.05, 1), decide(y, 20, 0.05, 7)
    assert alone.state == FAIL and "stopped after 8 of 20 items: regression shown" in alone.sentence()
    assert in_seven.state == UNDECIDED and in_seven.fail_at == pytest.approx(7 / 0.025)
    assert "the fixed-n verdict applies" in in_seven.sentence()


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
