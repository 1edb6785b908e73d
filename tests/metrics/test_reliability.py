"""pass@k, pass^k and flips against enumeration over subsets of tries (Chen et al. 2021; τ-bench)."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcas.metrics.reliability import flip_share, over_items, pass_at_k, pass_hat_k


def brute(outcomes: list[bool], k: int) -> tuple[float, float]:
    """(share of k-subsets with a pass, share of k-subsets that all pass) by enumeration."""
    subsets = list(combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets), sum(all(s) for s in subsets) / len(subsets)


@given(st.lists(st.booleans(), min_size=1, max_size=9), st.data())
def test_estimators_equal_enumeration_over_subsets(outcomes: list[bool], data: st.DataObject) -> None:
    k = data.draw(st.integers(1, len(outcomes)))
    at, hat = brute(outcomes, k)
    n, c = len(outcomes), sum(outcomes)
    assert pass_at_k(n, c, k) == pytest.approx(at, abs=1e-12)
    assert pass_hat_k(n, c, k) == pytest.approx(hat, abs=1e-12)


def test_worked_example() -> None:
    # 3 tries, 1 pass: of the 3 pairs, 2 hold the pass and none is all passes.
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    assert pass_hat_k(3, 1, 2) == 0.0
    assert pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)
    assert pass_at_k(3, 2, 1) == pass_hat_k(3, 2, 1) == pytest.approx(2 / 3)  # k = 1: the accuracy
    with pytest.raises(ValueError, match="k must lie"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_hat_k(3, 4, 1)


@given(st.dictionaries(st.text(max_size=3), st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=8))
def test_over_items_is_the_item_mean_and_its_interval_holds_it_in_range(items: dict[str, list[bool]]) -> None:
    for name, index in (("pass@k", 0), ("pass^k", 1)):
        result = over_items(items, 3, name)
        assert result is not None
        mean, lo, hi = result
        assert mean == pytest.approx(sum(brute(v, 3)[index] for v in items.values()) / len(items))
        assert 0.0 <= lo <= hi <= 1.0


@given(st.dictionaries(st.text(max_size=3), st.lists(st.booleans(), min_size=1, max_size=4), max_size=8))
def test_flip_share_counts_items_whose_outcome_changes(items: dict[str, list[bool]]) -> None:
    multi = [v for v in items.values() if len(v) > 1]
    want = sum(1 for v in multi if any(v) and not all(v)) / len(multi) if multi else None
    assert flip_share(items) == want


def test_over_items_example_and_fewer_tries_left_out() -> None:
    items = {"a": [True, True, True], "b": [True, False, False], "c": [False, False, False], "d": [True]}
    mean, lo, hi = over_items(items, 3, "pass@k") or (0, 0, 0)
    assert mean == pytest.approx(2 / 3) and lo <= mean <= hi  # "d" has one try: not in a pass@3
    assert (over_items(items, 3, "pass^k") or (0,))[0] == pytest.approx(1 / 3)
    assert over_items({"d": [True]}, 2) is None
    assert flip_share(items) == pytest.approx(1 / 3)
