"""The agent-vs-method figures count an ungraded answer nowhere, as the paired comparison does."""

from __future__ import annotations

from bcas.report.methods import _per_item


def test_an_ungraded_answer_is_left_out_of_an_items_mean_not_counted_wrong() -> None:
    recs = [
        {"item_id": "a", "cost_usd": 1.0, "o": True},
        {"item_id": "a", "cost_usd": 3.0, "o": None},  # not graded
        {"item_id": "b", "cost_usd": 2.0, "o": False},
    ]
    means = _per_item(recs, lambda r: r["o"], "usd")
    assert means == {"a": (1.0, 1.0), "b": (2.0, 0.0)}
