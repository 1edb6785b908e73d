"""Aggregation (MADARA Algorithm 1, §4.3, Appendix C) against the paper's formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import rankdata

from bcas.assess.aggregate import (
    ATF_KAPPA,
    BASELINE_WEIGHTS,
    RRF_C,
    AggregationError,
    atf_filter,
    atf_threshold,
    average_ranks,
    percentile_ranks,
    rrf_scores,
    rrf_select,
    sda_scores,
    sda_select,
    weighted_scores,
    weighted_select,
)

# Quarter steps on the 0-5 scale: the agents emit integers, and distinct values stay
# distinct under the floating-point transforms below.
scores_0_5 = st.integers(0, 20).map(lambda v: v / 4)


def matrices(min_m: int = 1, max_m: int = 12):
    return st.integers(min_m, max_m).flatmap(
        lambda m: st.lists(st.lists(scores_0_5, min_size=3, max_size=3), min_size=m, max_size=m)
    )


def test_paper_constants():
    assert BASELINE_WEIGHTS == (0.4, 0.3, 0.3)
    assert ATF_KAPPA == 0.5
    assert RRF_C == 60


# ---------------------------------------------------------------- weighted


@settings(deadline=None)
@given(matrices())
def test_weighted_with_equal_weights_is_the_row_mean(S):
    got = weighted_scores(S, (1 / 3, 1 / 3, 1 / 3))
    np.testing.assert_allclose(got, np.mean(np.array(S), axis=1), rtol=1e-12, atol=1e-12)


def test_weighted_baseline_example():
    S = [[5, 0, 0], [0, 5, 5], [3, 3, 3]]
    np.testing.assert_allclose(weighted_scores(S), [2.0, 3.0, 3.0])
    # ties broken by the lower index
    assert weighted_select(S, 2) == [1, 2]


def test_weighted_imputes_missing_with_the_agent_column_mean():
    S = [[4, None, 2], [2, 3, None], [0, 5, 4]]
    # column means of present scores: consistency (3+5)/2=4, conflict (2+4)/2=3
    np.testing.assert_allclose(
        weighted_scores(S), [0.4 * 4 + 0.3 * 4 + 0.3 * 2, 0.4 * 2 + 0.3 * 3 + 0.3 * 3, 0.3 * 5 + 0.3 * 4]
    )


def test_weighted_all_missing_column_is_a_constant_shift():
    S = [[4, None, 2], [2, None, 3]]
    with_missing = weighted_scores(S)
    np.testing.assert_allclose(with_missing - weighted_scores([[4, 0, 2], [2, 0, 3]]), [0.3 * 2.5, 0.3 * 2.5])


def test_bad_inputs_raise():
    with pytest.raises(AggregationError):
        weighted_scores([[1, 2, 3], [1, 2]])
    with pytest.raises(AggregationError):
        weighted_scores([[1, 2, 3]], (1, 1))
    with pytest.raises(AggregationError):
        sda_select([[1, 2, 3]], 0)
    with pytest.raises(AggregationError):
        atf_filter([float("nan"), 1.0], 2)


# ---------------------------------------------------------------- SDA


@settings(deadline=None)
@given(matrices(), st.integers(1, 15))
def test_sda_returns_min_k_m_distinct_indices(S, k):
    picked = sda_select(S, k)
    assert len(picked) == min(k, len(S))
    assert len(set(picked)) == len(picked)
    assert all(0 <= i < len(S) for i in picked)


strictly_increasing = st.sampled_from(
    [
        lambda x: 2.0 * x + 1.0,
        lambda x: x**3,
        lambda x: math.exp(x),
        lambda x: math.log1p(x) - 7.0,
        lambda x: 1000.0 * x - 0.5,
    ]
)


@settings(deadline=None)
@given(matrices(), st.integers(1, 15), st.integers(0, 2), strictly_increasing)
def test_sda_is_invariant_to_strictly_increasing_transforms_of_one_agent(S, k, agent, f):
    T = [list(row) for row in S]
    for row in T:
        row[agent] = f(row[agent])
    assert sda_select(T, k) == sda_select(S, k)
    np.testing.assert_allclose(sda_scores(T), sda_scores(S))


@settings(deadline=None)
@given(matrices(min_m=2))
def test_sda_matches_algorithm_1_with_scipy_average_ranks(S):
    M = np.array(S)
    m = M.shape[0]
    expected = sum((1 / 3) * (rankdata(M[:, j], method="average") - 1) / (m - 1) for j in range(3)) * 5
    np.testing.assert_allclose(sda_scores(S), expected, atol=1e-12)
    assert sda_select(S, m) == sorted(range(m), key=lambda i: (-round(expected[i], 10), i))


def test_sda_ties_get_average_ranks_and_index_tie_break():
    # agent 0 ties docs 0 and 1; agents 1 and 2 are constant
    S = [[3, 1, 1], [3, 1, 1], [0, 1, 1]]
    np.testing.assert_allclose(percentile_ranks([3, 3, 0]), [0.75, 0.75, 0.0])
    r = sda_scores(S)
    assert r[0] == r[1] > r[2]
    assert sda_select(S, 3) == [0, 1, 2]


def test_sda_example_by_hand():
    S = [[3.0, 0.0, 2.0], [2.9, 5.0, 2.0], [2.8, 1.0, 1.0]]
    assert sda_select(S, 3) == [1, 0, 2]
    np.testing.assert_allclose(sda_scores(S), [(1 + 0 + 0.75) * 5 / 3, (0.5 + 1 + 0.75) * 5 / 3, (0 + 0.5 + 0) * 5 / 3])


def test_sda_missing_score_gets_neutral_percentile():
    np.testing.assert_allclose(percentile_ranks([4.0, float("nan"), 1.0]), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(percentile_ranks([float("nan"), 2.0]), [0.5, 0.5])
    assert sda_select([[1, None, 2]], 3) == [0]


def test_average_ranks_matches_scipy():
    x = [3, 1, 3, 2, 2, 2, 0]
    np.testing.assert_allclose(average_ranks(x), rankdata(x, method="average") - 1)


# ---------------------------------------------------------------- RRF


@settings(deadline=None)
@given(matrices(), st.integers(1, 15))
def test_rrf_matches_the_formula(S, k):
    M = np.array(S)
    expected = sum(1.0 / (RRF_C + rankdata(-M[:, j], method="average")) for j in range(3))
    np.testing.assert_allclose(rrf_scores(S), expected)
    assert rrf_select(S, k) == sorted(range(len(S)), key=lambda i: (-round(expected[i], 10), i))[:k]


def test_rrf_missing_contributes_nothing():
    S = [[5, None, 1], [1, 5, 5]]
    np.testing.assert_allclose(rrf_scores(S), [1 / 61 + 1 / 62, 1 / 62 + 1 / 61 + 1 / 61])


# ---------------------------------------------------------------- ATF


@settings(deadline=None)
@given(st.lists(scores_0_5, min_size=1, max_size=15), st.integers(2, 15))
def test_atf_keeps_between_min_2_m_and_k_all_above_tau_unless_padded(scores, k):
    kept = atf_filter(scores, k)
    m = len(scores)
    assert min(2, m) <= len(kept) <= k
    assert len(set(kept)) == len(kept)
    tau = atf_threshold(scores)
    above = [i for i in kept if scores[i] >= tau - 1e-9]
    if len(kept) > min(2, m):
        assert above == kept
    # kept indices are best first and form a prefix of the descending order
    assert [scores[i] for i in kept] == sorted([scores[i] for i in kept], reverse=True)
    ranked = sorted(range(m), key=lambda i: (-scores[i], i))
    assert kept == ranked[: len(kept)]


def test_atf_example():
    scores = [4.5, 4.0, 3.8, 1.0, 0.5, 4.2]
    mu, sigma = np.mean(scores), np.std(scores)
    tau = mu - 0.5 * sigma
    assert atf_threshold(scores) == pytest.approx(tau)
    assert atf_filter(scores, 5) == [0, 5, 1, 2]
    assert atf_filter(scores, 2) == [0, 5]


def test_atf_pads_to_two_and_keeps_all_equal_scores():
    assert atf_filter([5.0, 0.0], 5) == [0, 1]  # tau = 1.25 keeps only doc 0, padded to 2
    assert atf_filter([0.1, 0.1, 0.1], 5) == [0, 1, 2]  # mean can exceed the values by an ulp
    assert atf_filter([3.0], 5) == [0]


@settings(max_examples=50, deadline=None)
@given(st.lists(scores_0_5, min_size=2, max_size=10), st.floats(0, 3))
def test_atf_larger_kappa_never_keeps_fewer(scores, kappa):
    k = len(scores)
    assert len(atf_filter(scores, k, kappa + 0.5)) >= len(atf_filter(scores, k, kappa))
