"""The cost-accuracy frontier and the budget-ordered figures, against brute-force definitions.

The frontier's sweep is checked against the definition (no other point at most as
costly and at least as accurate, strictly better in one) on random point sets; the
budget axis against the grids' own budget fields; the scaling chart against its promise
that categorical configurations are never joined by a line.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.grids import GRIDS
from bcas.report.charts import cost_chart, scaling_chart
from bcas.report.html_figures import budget_axis
from bcas.report.pareto import COST, TOKENS, Point, axis_for, cheapest_within, frontier, panels
from tests.support.figures import marks


def _point(i: int, x: float, acc: float) -> Point:
    return Point(
        f"m{i % 2}", f"cfg{i}", "g", "d", f"id{i}", "correct_em", acc, max(0.0, acc - 0.1), min(1.0, acc + 0.1), 10, x
    )


def brute_frontier(points: list[Point]) -> set[tuple[str, str]]:
    def dominated(p: Point) -> bool:
        return any(
            q.x <= p.x and q.accuracy >= p.accuracy and (q.x < p.x or q.accuracy > p.accuracy)
            for q in points
            if q is not p
        )

    return {p.key for p in points if not dominated(p)}


values = st.lists(
    st.tuples(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_frontier_is_exactly_the_undominated_points(pairs: list[tuple[float, float]]) -> None:
    points = [_point(i, x, a) for i, (x, a) in enumerate(pairs)]
    found = frontier(points)
    assert {p.key for p in found} == brute_frontier(points)
    assert [p.x for p in found] == sorted(p.x for p in found)  # listed cheapest first


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([0.0, 1.0, 2.0, 5.0, 25.0, 100.0]))
def test_cheapest_within_x_points_of_the_best(pairs: list[tuple[float, float]], band: float) -> None:
    points = [_point(i, x, a) for i, (x, a) in enumerate(pairs)]
    chosen = cheapest_within(points, band)
    assert chosen is not None
    best = max(p.accuracy for p in points)
    eligible = [p for p in points if p.accuracy >= best - band / 100 - 1e-12]
    assert chosen in eligible
    assert chosen.x == min(p.x for p in eligible)
    # The answer always lies on the frontier (a cheaper point at least as accurate would be chosen instead).
    assert chosen.key in brute_frontier(points)


def test_axis_is_cost_only_when_every_point_has_a_price() -> None:
    assert axis_for([{"mean_cost_usd": 0.1}, {"mean_cost_usd": 0.0}]) == COST
    assert axis_for([{"mean_cost_usd": 0.1}, {"mean_cost_usd": None}]) == TOKENS  # unknown is not 0
    assert axis_for([{"mean_cost_usd": 0.0}, {"mean_cost_usd": 0.0}]) == TOKENS  # no price applies


def test_panels_merge_a_configuration_shared_by_grids() -> None:
    base = {
        "model": "m",
        "dataset": "d",
        "metric": "correct_em",
        "accuracy": 0.5,
        "ci_lo": 0.3,
        "ci_hi": 0.7,
        "n": 10,
        "mean_cost_usd": 0.01,
        "mean_tokens_out": 40.0,
    }
    rows = [
        {**base, "grid": "a", "label": "x", "config_id": "c1"},
        {**base, "grid": "b", "label": "x", "config_id": "c1"},
        {**base, "grid": "b", "label": "y", "config_id": "c2", "accuracy": 0.7, "mean_cost_usd": 0.02},
    ]
    (panel,) = panels(rows)
    assert [(p.grid, p.label) for p in panel.points] == [("a", "x"), ("b", "y")]
    assert panel.axis == COST and [p.label for p in panel.frontier] == ["x", "y"]


def test_budget_axis_of_the_paper_grids() -> None:
    def axis(grid: str) -> tuple[str | None, list[str], list[str]]:
        return budget_axis({e.label: e.config.to_dict() for e in GRIDS[grid].entries})

    field, ordered, categorical = axis("search_scaling")
    assert field == "max_searches"
    assert ordered == ["hs/s1/t16k", "hs/s2/t16k", "hs/s3/t16k", "hs/sinf/t16k"]  # unlimited last
    assert categorical == ["hs/sinf/t16k/plan", "hs/sinf/t16k/plan/rf"]
    field, ordered, categorical = axis("context_scaling")
    assert field == "max_total_tokens"
    assert [label.split("/")[2] for label in ordered] == ["t500", "t1k", "t2k", "t4k", "t16k"]
    assert len(categorical) == 2
    assert axis("ablation")[:2] == (None, [])  # retrieval modes and agent features: no order
    assert axis("madara")[:2] == (None, [])
    # A label without a known configuration is categorical.
    assert budget_axis({"a": None, "b": None}) == (None, [], ["a", "b"])


def test_categorical_configurations_are_never_joined() -> None:
    series = {
        "m1": [(0.2, 0.1, 0.3), (0.4, 0.3, 0.5), (0.5, 0.4, 0.6), (0.6, 0.5, 0.7)],
        "m2": [(0.3, 0.2, 0.4), None, (0.5, 0.4, 0.6), (0.7, 0.6, 0.8)],
    }
    drawn = marks(scaling_chart("f", "t", ["s1", "s2"], ["plan", "plan+rf"], series).spec)
    assert sorted(len(line) for line in drawn["line"]) == [1, 2]  # only the ordered budgets, per model
    assert sorted(len(band) for band in drawn["area"]) == [1, 2]  # each line's 95% band
    assert sum(len(g) for g in drawn["rule"]) == 4  # an interval whisker per categorical point
    only_categories = marks(scaling_chart("f", "t", [], ["a", "b", "c"], {"m": [(0.1, 0, 0.2)] * 3}).spec)
    assert "line" not in only_categories and sum(len(g) for g in only_categories["rule"]) == 3


def test_cost_chart_draws_the_frontier_through_its_points() -> None:
    pts = [
        ("m", "a", 1.0, 0.2, 0.1, 0.3, True),
        ("m", "b", 2.0, 0.1, 0.0, 0.2, False),
        ("m<x>", "c", 3.0, 0.6, 0.5, 0.7, True),
    ]
    drawn = marks(cost_chart("f", "cost <&>", "USD", pts, money=True).spec)
    [step] = drawn["line"]
    assert len(step) == 2  # the frontier's two points, joined by a step
    symbols = [item for group in drawn["symbol"] for item in group]
    ringed = [item for item in symbols if item.get("strokeWidth")]
    assert len(symbols) == 3 and len(ringed) == 2
    assert sorted((round(i["x"]), round(i["y"])) for i in ringed) == sorted(
        (round(p["x"]), round(p["y"])) for p in step
    )
