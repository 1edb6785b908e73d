"""What the regression gate can detect, checked against exhaustive enumeration, and the
tolerance test against an independent computation (a numerically maximised likelihood)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.stats import multinomial, norm

from bcas.gating.baseline import min_detectable, paired_test
from bcas.stats import (
    mcnemar_drop_for_power,
    mcnemar_exact_one_sided,
    mcnemar_min_detectable_drop,
    mcnemar_min_discordant,
    mcnemar_power,
    tango_min_worse_only,
    tango_noninferiority,
)

THRESHOLDS = [0.05, 0.05 / 3, 0.05 / 7, 0.05 / 30, 0.01, 0.1, 0.2]


def _tables(n: int):
    """Every paired table on n items as (baseline-only, current-only)."""
    for w in range(n + 1):
        for b in range(n + 1 - w):
            yield w, b


def _gate_p(w: int, b: int) -> float:
    # The gate's own call: the current run is "first"; small p when it loses the discordant items.
    return mcnemar_exact_one_sided(first_only=b, second_only=w)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_min_discordant_is_the_fewest_over_all_tables(threshold: float) -> None:
    k = mcnemar_min_discordant(threshold)
    # No table with fewer discordant items reaches the threshold; one with k does.
    for m in range(k):
        assert all(_gate_p(w, m - w) > threshold for w in range(m + 1))
    assert _gate_p(k, 0) <= threshold


def test_min_discordant_known_values() -> None:
    # 2^-5 = 0.031 <= 0.05 < 2^-4; 2^-8 = 0.0039 <= 0.05/7 = 0.0071 < 2^-7 = 0.0078;
    # 2^-10 = 0.00098 <= 0.05/30 = 0.0017 < 2^-9 = 0.0020.
    assert mcnemar_min_discordant(0.05) == 5
    assert mcnemar_min_discordant(0.05 / 7) == 8
    assert mcnemar_min_discordant(0.05 / 30) == 10
    # The case: 5 paired items, 7 gated cases -> the smallest p 0.031 > 0.0071: cannot fail.
    assert mcnemar_min_detectable_drop(5, 0.05 / 7) is None
    assert min_detectable(5, 0.05 / 7) == (None, None)


def test_min_discordant_is_bounded_by_n_and_never_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    # Bounded by n: 4 paired items cannot reach 0.05 (2^-4 = 0.0625), 5 can.
    assert mcnemar_min_discordant(0.05, 4) is None and mcnemar_min_discordant(0.05, 5) == 5
    assert mcnemar_min_discordant(0.05, 0) is None
    assert mcnemar_min_discordant(2.0**-5) == 5 and mcnemar_min_discordant(1e-300) == 997
    # A test of the reversed direction (P(X >= first_only)) never reaches 2^-m: an error, not a hang.
    import bcas.stats

    def reversed_direction(first_only: int, second_only: int) -> float:
        return (
            1.0
            if first_only + second_only == 0
            else float(1.0 - bcas.stats.binom.cdf(first_only - 1, first_only + second_only, 0.5))
        )

    monkeypatch.setattr(bcas.stats, "mcnemar_exact_one_sided", reversed_direction)
    with pytest.raises(ArithmeticError, match="direction"):
        mcnemar_min_discordant(0.05)
    assert mcnemar_min_discordant(0.05, 40) is None and min_detectable(40, 0.05) == (None, None)


@pytest.mark.parametrize("threshold", [0.05, 0.05 / 7, 0.05 / 30])
def test_min_detectable_drop_matches_exact_enumeration(threshold: float) -> None:
    for n in range(1, 41):
        significant = [(w, b) for w, b in _tables(n) if _gate_p(w, b) <= threshold]
        drop = mcnemar_min_detectable_drop(n, threshold)
        k, frac = min_detectable(n, threshold)
        if not significant:
            assert drop is None and k is None and frac is None, n
            continue
        smallest_drop = min(w - b for w, b in significant)
        fewest_discordant = min(w + b for w, b in significant)
        assert drop is not None and round(drop * n) == smallest_drop, n
        assert k == fewest_discordant == smallest_drop and frac == pytest.approx(smallest_drop / n), n


def _power_by_enumeration(n: int, p_worse: float, p_better: float, threshold: float) -> float:
    dist = multinomial(n, [p_worse, p_better, max(0.0, 1.0 - p_worse - p_better)])
    return sum(dist.pmf([w, b, n - w - b]) for w, b in _tables(n) if _gate_p(w, b) <= threshold)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=30),
    p_worse=st.floats(0.0, 0.6),
    p_better=st.floats(0.0, 0.4),
    threshold=st.sampled_from(THRESHOLDS),
)
def test_power_matches_exact_enumeration(n: int, p_worse: float, p_better: float, threshold: float) -> None:
    if p_worse + p_better > 1.0:
        p_better = 1.0 - p_worse
    expected = _power_by_enumeration(n, p_worse, p_better, threshold)
    assert mcnemar_power(n, p_worse, p_better, threshold) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=1, max_value=120), p=st.floats(0.0, 0.5), threshold=st.sampled_from(THRESHOLDS))
def test_exact_gate_never_exceeds_its_level_without_a_regression(n: int, p: float, threshold: float) -> None:
    # Equal flip rates both ways: no regression; the exact test rejects at most `threshold` of the time.
    assert mcnemar_power(n, p, p, threshold) <= threshold + 1e-12


@pytest.mark.parametrize("n, threshold, p_better", [(50, 0.05, 0.0), (200, 0.05 / 7, 0.05), (300, 0.05 / 30, 0.02)])
def test_drop_for_power_is_the_smallest_drop_with_that_power(n: int, threshold: float, p_better: float) -> None:
    drop = mcnemar_drop_for_power(n, threshold, 0.8, p_better)
    assert drop is not None
    assert mcnemar_power(n, p_better + drop, p_better, threshold) >= 0.8
    assert mcnemar_power(n, p_better + drop - 1e-3, p_better, threshold) < 0.8
    assert mcnemar_drop_for_power(5, 0.05 / 7) is None  # it cannot fail at all


# --- the tolerance test (--bcas-max-drop) -----------------------------------------------


def _tango_independent(w: int, b: int, n: int, margin: float) -> float:
    """Score test from first principles: maximise the trinomial likelihood of (w, b, rest)
    under P(baseline-only) = P(current-only) + margin numerically, then standardise
    w - b - n*margin by its variance n[(pw + pb) - (pw - pb)^2] at that estimate."""
    rest = n - w - b

    def negloglik(q: float) -> float:
        pw, pb, pr = q + margin, q, 1.0 - 2.0 * q - margin
        total = 0.0
        for count, prob in ((w, pw), (b, pb), (rest, pr)):
            if count:
                total -= count * math.log(max(prob, 1e-300))
        return total

    upper = (1.0 - margin) / 2.0
    res = minimize_scalar(negloglik, bounds=(0.0, upper), method="bounded", options={"xatol": 1e-13})
    candidates = [res.x, 0.0, upper]
    q = min(candidates, key=negloglik)
    pw, pb = q + margin, q
    var = n * ((pw + pb) - (pw - pb) ** 2)
    if var <= 0:
        return 1.0
    return float(norm.sf((w - b - n * margin) / math.sqrt(var)))


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=400),
    w_frac=st.floats(0.0, 1.0),
    b_frac=st.floats(0.0, 1.0),
    margin=st.sampled_from([0.01, 0.02, 0.05, 0.1, 0.2, 0.3]),
)
def test_tango_matches_numerical_restricted_likelihood(n: int, w_frac: float, b_frac: float, margin: float) -> None:
    w = round(w_frac * n)
    b = round(b_frac * (n - w))
    got = tango_noninferiority(w, b, n, margin)
    assert got == pytest.approx(_tango_independent(w, b, n, margin), abs=2e-6)


@settings(max_examples=200, deadline=None)
@given(w=st.integers(0, 300), b=st.integers(0, 300))
def test_tango_at_zero_margin_is_mcnemar_z(w: int, b: int) -> None:
    n = w + b + 17
    expected = 1.0 if w + b == 0 else float(norm.sf((w - b) / math.sqrt(w + b)))
    assert tango_noninferiority(w, b, n, 0.0) == pytest.approx(expected, abs=1e-12)


def test_tango_direction_and_tolerance() -> None:
    # 100 items, 20 lost and 2 gained: an 18-point drop. Significant beyond 5 points, not beyond 20.
    assert tango_noninferiority(20, 2, 100, 0.05) < 0.01
    assert tango_noninferiority(20, 2, 100, 0.20) > 0.5
    # An improvement is never a significant drop.
    assert tango_noninferiority(2, 20, 100, 0.05) > 0.99
    p, name = paired_test(worse_only=20, better_only=2, n=100, max_drop=0.05)
    assert p == tango_noninferiority(20, 2, 100, 0.05) and "Tango" in name
    p0, name0 = paired_test(worse_only=20, better_only=2, n=100)
    assert p0 == mcnemar_exact_one_sided(2, 20) and "McNemar" in name0


@pytest.mark.parametrize("n, margin, threshold", [(20, 0.05, 0.05), (37, 0.1, 0.05 / 7), (60, 0.02, 0.01)])
def test_tango_min_worse_only_matches_enumeration(n: int, margin: float, threshold: float) -> None:
    significant = [(w, b) for w, b in _tables(n) if tango_noninferiority(w, b, n, margin) <= threshold]
    k = tango_min_worse_only(n, margin, threshold)
    assert significant and k is not None
    assert k == min(w - b for w, b in significant) == min(w + b for w, b in significant)
    assert min_detectable(n, threshold, margin) == (k, k / n)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: tango_noninferiority(3, 3, 5, 0.1), "must be <= n"),
        (lambda: tango_noninferiority(1, 1, 5, 1.0), "margin"),
        (lambda: tango_noninferiority(-1, 1, 5, 0.1), "worse_only"),
        (lambda: mcnemar_min_discordant(0.0), "alpha"),
        (lambda: mcnemar_power(5, 0.7, 0.6, 0.05), "p_worse \\+ p_better"),
        (lambda: mcnemar_drop_for_power(5, 0.05, power=1.0), "power"),
    ],
)
def test_invalid_input_is_refused(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_power_degenerate() -> None:
    assert mcnemar_power(0, 0.1, 0.0, 0.05) == 0.0
    assert mcnemar_power(10, 0.0, 0.0, 0.05) == 0.0
    assert tango_noninferiority(0, 0, 0, 0.1) == 1.0
    assert np.isclose(mcnemar_power(10, 1.0, 0.0, 0.05), 1.0)
