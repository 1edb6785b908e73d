"""The cost-accuracy view on the cost of a correct answer: cost-of-pass where every point is priced,
tokens-of-pass otherwise; points with no correct answer left out and named; everything escaped."""

from __future__ import annotations

import re
from typing import Any

from bcas.report.html_cost import cost_section
from bcas.report.pareto import COST, COST_OF_PASS, TOKENS_OF_PASS, panels, to_dict

HOSTILE = '<img src=x onerror="alert(1)">'


def row(model: str, label: str, acc: float, cost: float | None, cop: float | None, top: float | None) -> dict[str, Any]:
    return {
        "n": 10, "dataset": "hotpotqa", "metric": "correct_em", "model": model, "label": label, "grid": "g",
        "config_id": f"id-{model}-{label}", "accuracy": acc, "ci_lo": max(0.0, acc - 0.1), "ci_hi": min(1.0, acc + 0.1),
        "mean_cost_usd": cost, "mean_tokens_out": 100.0, "cost_of_pass": cop,
        "cost_of_pass_lo": None if cop is None else cop * 0.8, "cost_of_pass_hi": None if cop is None else cop * 1.5,
        "tokens_of_pass": top, "tokens_of_pass_lo": None if top is None else top * 0.9, "tokens_of_pass_hi": None,
    }  # fmt: skip


PRICED = [
    row("a", "s1", 0.5, 0.010, 0.020, 400.0),
    row("a", "s3", 0.8, 0.030, 0.0375, 600.0),
    row("b", "s1", 0.4, 0.004, 0.010, 500.0),  # cheapest per item and per correct answer
    row(HOSTILE, "s0", 0.0, 0.001, None, None),  # no correct answer: no finite cost of one
]


def test_priced_points_use_cost_of_pass_with_intervals_and_leave_out_the_unanswered() -> None:
    (mean,) = panels(PRICED)
    (per,) = panels(PRICED, per_pass=True)
    assert mean.axis == COST and per.axis == COST_OF_PASS
    assert [(p.model, p.label, p.x) for p in per.points] == [
        ("b", "s1", 0.010),
        ("a", "s1", 0.020),
        ("a", "s3", 0.0375),
    ]
    assert per.points[0].x_lo == 0.010 * 0.8 and per.points[0].x_hi == 0.010 * 1.5
    assert per.excluded == (f"{HOSTILE} · s0",)
    # frontier on cost per correct answer: b/s1 (cheapest), a/s3 (most accurate); a/s1 is dominated by neither? no:
    # b/s1 is cheaper but less accurate than a/s1, so a/s1 stays on it too
    assert [(p.model, p.label) for p in per.frontier] == [("b", "s1"), ("a", "s1"), ("a", "s3")]
    assert to_dict(per)["excluded"] == [f"{HOSTILE} · s0"] and to_dict(per)["points"][0]["x_lo"] == 0.010 * 0.8


def test_unpriced_points_use_tokens_of_pass() -> None:
    unpriced = [{**r, "mean_cost_usd": None} for r in PRICED]
    (per,) = panels(unpriced, per_pass=True)
    assert per.axis == TOKENS_OF_PASS
    assert sorted(p.x for p in per.points) == [400.0, 500.0, 600.0]
    assert all(p.x_hi is None for p in per.points)  # an unbounded upper limit stays unknown, not a number


def test_the_page_shows_the_cost_of_a_correct_answer_escaped() -> None:
    page = cost_section(PRICED)
    assert 'id="cost-of-pass"' in page and 'id="cop-0"' in page and 'id="cost-0"' in page
    table = page.split('id="cop-0-points"')[1].split("</table>")[0]
    cells = re.findall(r"<tr class=\"pt fr\" data-panel=\"cop-0\" data-x=\"([^\"]+)\"", table)
    assert sorted(float(x) for x in cells) == [0.010, 0.020, 0.0375]
    assert "0.008 – 0.015" in table  # b/s1's bootstrap interval
    assert "cost per correct answer (USD, cost-of-pass)" in page
    assert HOSTILE not in page and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page
    unpriced = cost_section([{**r, "mean_cost_usd": None} for r in PRICED])
    assert "tokens per correct answer (tokens-of-pass)" in unpriced and "360 – ∞" in unpriced
