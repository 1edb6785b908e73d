"""What a user of the gate's statistics loses when a line of bcas/stats.py breaks.

Each test states a documented promise of :mod:`bcas.stats` (the default bootstrap is
reproducible, the power search reaches the largest possible drop, the tolerance gate's
smallest detectable drop is exact at the boundary, errors name the offending argument).
"""

from __future__ import annotations

import numpy as np
import pytest

import bcas.stats as S
from bcas.stats import (
    bootstrap_ci,
    mcnemar_drop_for_power,
    mcnemar_power,
    tango_min_worse_only,
    tango_noninferiority,
)

VALUES = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0]


def _reference_percentile_bootstrap(
    values: list[float], n_resamples: int, alpha: float, seed: int
) -> tuple[float, float]:
    """The documented recipe: resample with numpy.random.default_rng(seed), take the percentiles."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, data.size, size=(n_resamples, data.size))
    means = data[rows].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def test_default_bootstrap_is_the_documented_1000_resamples_with_seed_0() -> None:
    # A report quoting "seeded bootstrap" must be reproducible by anyone from the docs.
    assert bootstrap_ci(VALUES) == pytest.approx(_reference_percentile_bootstrap(VALUES, 1000, 0.05, 0))
    assert bootstrap_ci(VALUES) == bootstrap_ci(VALUES, n_resamples=1000, seed=0)


@pytest.mark.parametrize("alpha", [0.05, 0.2, 0.5])
def test_bootstrap_takes_both_tails_at_alpha_over_two(alpha: float) -> None:
    got = bootstrap_ci(VALUES, n_resamples=400, alpha=alpha, seed=7)
    assert got == pytest.approx(_reference_percentile_bootstrap(VALUES, 400, alpha, 7))


def test_bootstrap_accepts_a_single_resample_and_refuses_non_integers() -> None:
    lo, hi = bootstrap_ci(VALUES, n_resamples=1, seed=3)
    assert lo == hi  # one resample: both percentiles are that resample's mean
    with pytest.raises(ValueError, match="n_resamples must be a positive integer, got 2.5"):
        bootstrap_ci(VALUES, n_resamples=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_resamples must be a positive integer, got 0"):
        bootstrap_ci(VALUES, n_resamples=0)


def test_the_default_bootstrap_is_exactly_1000_resamples_with_seed_0_on_continuous_scores() -> None:
    """On 0/1 scores nearby resample counts can give the same percentiles; on F1-like scores
    they do not, so only the documented defaults reproduce the report's interval."""
    scores = [round(0.05 + 0.9 * ((i * 37) % 101) / 101, 4) for i in range(40)]
    default = bootstrap_ci(scores)
    assert default == _reference_percentile_bootstrap(scores, 1000, 0.05, 0)
    assert default != _reference_percentile_bootstrap(scores, 1001, 0.05, 0)
    assert default != _reference_percentile_bootstrap(scores, 1000, 0.05, 1)


def test_bootstrap_errors_say_what_is_not_finite() -> None:
    with pytest.raises(ValueError, match=r"^values must be finite \(no NaN or infinity\)$"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="stat returned a non-finite value inf"):
        bootstrap_ci([1.0, 2.0], stat=lambda s: float("inf"))


def test_power_search_errors_name_the_argument() -> None:
    with pytest.raises(ValueError, match="^n must be >= 0, got -1"):
        mcnemar_drop_for_power(-1, 0.05)
    with pytest.raises(ValueError, match="power must lie strictly between 0 and 1, got 0.0"):
        mcnemar_drop_for_power(50, 0.05, power=0.0)
    with pytest.raises(ValueError, match=r"p_better must lie in \[0, 0.5\), got 0.5"):
        mcnemar_drop_for_power(50, 0.05, p_better=0.5)


@pytest.mark.parametrize(("n", "p_better"), [(40, 0.0), (60, 0.1), (60, 0.25)])
def test_drop_for_power_is_reached_and_a_hair_less_is_not(n: int, p_better: float) -> None:
    # With flips both ways the largest possible drop is 1 - 2 p_better; the search must
    # find the answer anywhere below it, not give up early.
    drop = mcnemar_drop_for_power(n, 0.05, power=0.8, p_better=p_better)
    assert drop is not None
    assert 0.0 < drop <= 1.0 - 2.0 * p_better
    assert mcnemar_power(n, p_better + drop, p_better, 0.05) >= 0.8
    assert mcnemar_power(n, p_better + drop - 2e-4, p_better, 0.05) < 0.8


def test_tango_min_worse_only_boundaries() -> None:
    with pytest.raises(ValueError, match="^n must be >= 0, got -2"):
        tango_min_worse_only(-2, 0.0, 0.05)
    # One item: losing it gives z = 1, p = 0.159, significant at 0.5.
    assert tango_min_worse_only(1, 0.0, 0.5) == 1
    # Three items all lost give p = 0.042: not significant at 0.03, and a count above n
    # (four lost of three) must never be offered as the answer.
    assert tango_min_worse_only(3, 0.0, 0.03) is None
    # A p-value equal to the threshold rejects (p <= threshold), as the gate does.
    exact = tango_noninferiority(4, 0, 10, 0.1)
    assert tango_min_worse_only(10, 0.1, exact) == 4


# -- bad input is one error naming the argument; the documented boundaries hold exactly --------


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: S.newcombe_paired_diff(-1, 0, 0, 0), "a "),
        (lambda: S.newcombe_paired_diff(0, -1, 0, 0), "b "),
        (lambda: S.newcombe_paired_diff(0, 0, 0, 1.5), "d "),
        (lambda: S.mcnemar_exact(1, -2), "c "),
        (lambda: S.mcnemar_exact_one_sided(-1, 2), "first_only "),
        (lambda: S.mcnemar_exact_one_sided(1, -2), "second_only "),
        (lambda: S.mcnemar_min_discordant(0.05, -3), "n "),
        (lambda: S.mcnemar_power(-1, 0.1, 0.0, 0.05), "n "),
        (lambda: S.mcnemar_power(10, 1.5, 0.0, 0.05), "p_worse must lie in [0, 1], got 1.5"),
        (lambda: S.mcnemar_power(10, 0.1, 1.2, 0.05), "p_better must lie in [0, 1], got 1.2"),
        (lambda: S.tango_noninferiority(-1, 0, 5, 0.1), "worse_only must be >= 0, got -1"),
        (lambda: S.tango_noninferiority(0, -1, 5, 0.1), "better_only must be >= 0, got -1"),
        (lambda: S.tango_noninferiority(0, 0, -5, 0.1), "n must be >= 0, got -5"),
        (lambda: S.tango_noninferiority(3, 3, 5, 0.1), "worse_only + better_only must be <= n, got 3 + 3 > 5"),
        (lambda: S.tango_noninferiority(1, 0, 5, 1.0), "margin must lie in [0, 1), got 1.0"),
        (lambda: S.tango_noninferiority(1, 0, 5, True), "margin must lie in [0, 1), got True"),
    ],
)
def test_a_bad_argument_is_named_in_the_error(call, named):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(named)


def test_a_count_that_is_not_an_integer_says_so():
    from bcas.stats import mcnemar_exact

    with pytest.raises(ValueError, match=r"^b must be an integer count, got 1\.5$"):
        mcnemar_exact(1.5, 2)
    with pytest.raises(ValueError, match="integer count"):
        mcnemar_exact(True, 2)


def test_a_level_of_one_is_no_level():
    from bcas.stats import wilson_interval

    with pytest.raises(ValueError):
        wilson_interval(3, 10, alpha=1.0)


def test_all_or_nothing_gives_interval_ends_of_exactly_zero_and_one():
    from bcas.stats import wilson_interval

    for n in (1, 7, 50, 1000):
        assert wilson_interval(0, n)[0] == 0.0 and wilson_interval(n, n)[1] == 1.0


def test_one_discordant_item_against_none_is_p_one_half_one_sided():
    from bcas.stats import mcnemar_exact_one_sided

    assert mcnemar_exact_one_sided(0, 1) == 0.5 and mcnemar_exact_one_sided(1, 0) == 1.0
    assert mcnemar_exact_one_sided(0, 0) == 1.0


def test_holm_rejects_a_p_value_equal_to_its_threshold():
    """docs/gating.md: a case fails at p <= alpha / m."""
    from bcas.stats import holm_bonferroni

    reject, adjusted = holm_bonferroni([0.025, 0.05], alpha=0.05)
    assert reject == [True, True] and adjusted == [0.05, 0.05]


def test_the_exact_power_counts_a_p_value_equal_to_the_threshold_as_a_rejection() -> None:
    """The exact one-sided McNemar test rejects at p <= threshold: with 2 discordant items both
    favouring the baseline p = 0.25, so at threshold 0.25 that outcome is always caught."""
    assert mcnemar_power(2, 1.0, 0.0, 0.25) == 1.0
    assert mcnemar_power(2, 1.0, 0.0, 0.2499) == 0.0
    # threshold 0.75 on 2 coin-flip discordant items: c >= 1 rejects (p = 0.75 and 0.25)
    assert mcnemar_power(2, 0.5, 0.5, 0.75) == pytest.approx(0.75)
    # one paired item is not too few to compute: lost, it has p = 0.5
    assert mcnemar_power(1, 1.0, 0.0, 0.5) == 1.0
    assert mcnemar_power(0, 1.0, 0.0, 0.5) == 0.0


def test_a_test_of_the_wrong_direction_is_stopped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """The closed form 2**-m must agree with the exact test; were the test's direction reversed
    (every p-value 1), the search would say so instead of looping or reporting no gate."""
    monkeypatch.setattr(S, "mcnemar_exact_one_sided", lambda first_only, second_only: 1.0)
    with pytest.raises(ArithmeticError) as reversed_test:
        S.mcnemar_min_discordant(0.05)
    assert str(reversed_test.value) == (
        "the one-sided exact McNemar p-value of 0 wins in 6 discordant items stays above 0.05: "
        "the test does not match 2**-m (is its direction reversed?)"
    )


def test_the_smallest_detectable_drop_names_a_bad_item_count() -> None:
    with pytest.raises(ValueError, match=r"^n must be >= 0, got -1$"):
        S.mcnemar_min_detectable_drop(-1, 0.05)
