"""Cost-of-pass (Erol et al. 2025): the ratio of item means, its bootstrap interval, infinity as None."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcas.metrics.cost import cost_of_pass, cost_of_pass_interval

TRIES = st.lists(st.tuples(st.floats(0, 10, allow_nan=False), st.booleans()), min_size=1, max_size=3)


@given(st.dictionaries(st.text(max_size=3), TRIES, min_size=1, max_size=10))
def test_point_is_mean_cost_over_mean_success_of_item_means(items: dict[str, list[tuple[float, bool]]]) -> None:
    costs = [sum(c for c, _ in v) / len(v) for v in items.values()]
    wins = [sum(p for _, p in v) / len(v) for v in items.values()]
    want = (sum(costs) / len(costs)) / (sum(wins) / len(wins)) if any(wins) else math.inf
    point, lo, hi = cost_of_pass_interval(items, n_resamples=200)
    if math.isinf(want):
        assert point is None
    else:
        assert point == pytest.approx(want)
        assert lo is not None and lo <= point + 1e-9
        assert hi is None or point <= hi + 1e-9


def test_worked_example_and_seeded_interval() -> None:
    assert cost_of_pass(0.02, 0.5) == pytest.approx(0.04)
    assert cost_of_pass(0.02, 0.0) == math.inf
    with pytest.raises(ValueError):
        cost_of_pass(0.02, 1.5)
    # 4 items at $0.01 each, 2 right: $0.02 per correct answer.
    items = {"a": [(0.01, True)], "b": [(0.01, False)], "c": [(0.01, True)], "d": [(0.01, False)]}
    point, lo, hi = cost_of_pass_interval(items)
    assert point == pytest.approx(0.02)
    assert lo is not None and lo < 0.02 and (hi is None or hi > 0.02)
    assert cost_of_pass_interval(items) == (point, lo, hi)  # seeded: the same interval every time
    # A resample without a correct answer has no finite cost-of-pass: with 1 of 4 right it is frequent.
    one = {**items, "c": [(0.01, False)]}
    assert cost_of_pass_interval(one)[2] is None
    assert cost_of_pass_interval({"a": [(1.0, False)]}) == (None, None, None)


def test_interval_matches_a_plain_bootstrap() -> None:
    # Items are resampled in item-id order: ids that sort as the arrays below are built.
    items = {f"q{i:02d}": [(float(i), i % 3 != 0)] for i in range(12)}
    costs = np.array([float(i) for i in range(12)])
    wins = np.array([1.0 if i % 3 else 0.0 for i in range(12)])
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 12, size=(1000, 12))
    ratios = np.sort(costs[idx].mean(axis=1) / wins[idx].mean(axis=1))
    _, lo, hi = cost_of_pass_interval(items)
    assert lo == pytest.approx(ratios[24]) and hi == pytest.approx(ratios[975])


def test_intervals_do_not_depend_on_the_order_of_the_records() -> None:
    """A merged run lists its records in another order than the unsharded one: same intervals."""
    from bcas.metrics.cost import cost_of_pass_interval
    from bcas.metrics.reliability import over_items

    costs = {f"q{i}": [(float(i % 5 + 1), i % 3 == 0), (float(i % 4 + 1), i % 2 == 0)] for i in range(12)}
    backwards = dict(reversed(list(costs.items())))
    assert cost_of_pass_interval(costs) == cost_of_pass_interval(backwards)
    outcomes = {item: [p for _, p in pairs] for item, pairs in costs.items()}
    assert over_items(outcomes, 2) == over_items(dict(reversed(list(outcomes.items()))), 2)
