"""The cost-accuracy view: on the cost of a correct answer (cost-of-pass where every point is
priced, tokens-of-pass otherwise; points with no correct answer left out and named;
everything escaped), and every number of each panel as a reader uses it."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from bcas.report.html_cost import cost_section
from bcas.report.pareto import COST, COST_OF_PASS, TOKENS_OF_PASS, panels, to_dict
from bcas.report.vega import page_figures
from tests.support.figures import marks, texts

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


# The panels as a reader uses them: every number of the points table, the frontier list,
# the "cheapest within 2 points" answer, the axis note and the chart.  What a reader would
# lose if these broke: a point's accuracy or interval misprinted (the table is what gets
# copied into papers), the wrong points marked as on the frontier or ringed in the chart,
# the page answering "which configuration is cheapest" with another point or with nothing,
# a point the filter bar cannot hide, dollars printed as tokens, the metric's name lost.
# The numbers are chosen so that each differs from what a slipped factor or a swapped
# field would print.


def cost_row(model: str, label: str, grid: str, n: int, acc: float, lo: float, hi: float, cost: float | None,
        tokens: float, metric: str = "correct_em", dataset: str = "hotpotqa") -> dict[str, Any]:  # fmt: skip
    cop = None if cost is None or acc == 0 else cost / acc
    top = None if acc == 0 else tokens * 4 / acc
    return {
        "n": n, "dataset": dataset, "metric": metric, "model": model, "label": label, "grid": grid,
        "config_id": f"id-{model}-{label}", "accuracy": acc, "ci_lo": lo, "ci_hi": hi,
        "mean_cost_usd": cost, "mean_tokens_out": tokens,
        "cost_of_pass": cop, "cost_of_pass_lo": None if cop is None else round(cop * 0.8, 6),
        "cost_of_pass_hi": None if cop is None else round(cop * 1.5, 6),
        "tokens_of_pass": top, "tokens_of_pass_lo": None if top is None else round(top * 0.9),
        "tokens_of_pass_hi": None,
    }  # fmt: skip


# Mean cost order: gamma/s0 0.001, delta/s0 0.002, alpha/s1 0.010, beta/s2 0.0125, beta/s1 0.020, alpha/s3 0.030.
# Frontier on mean cost: gamma/s0 (cheapest), alpha/s1, beta/s1, alpha/s3; delta/s0 (as accurate as gamma/s0,
# dearer) and beta/s2 (alpha/s1 is cheaper and more accurate) are dominated.
ROWS = [
    cost_row("alpha", "s1", "g1", 10, 0.50, 0.40, 0.60, 0.010, 1200.0),
    cost_row("alpha", "s3", "g2", 12, 0.80, 0.70, 0.90, 0.030, 4000.0),
    cost_row("beta", "s1", "g1", 10, 0.79, 0.65, 0.88, 0.020, 2500.0),
    cost_row("beta", "s2", "g2", 10, 0.45, 0.35, 0.55, 0.0125, 3100.0),
    cost_row("gamma", "s0", "g1", 10, 0.0, 0.0, 0.1, 0.001, 900.0),  # no correct answer
    cost_row("delta", "s0", "g2", 10, 0.0, 0.0, 0.1, 0.002, 950.0),  # nor here
]


def panel_of(page: str, pid: str) -> str:
    start = page.index(f'id="{pid}"')
    end = page.find('<div class="cost-panel', start + 1)
    return page[start : end if end > 0 else len(page)]


def points(section: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Each row of a panel's points table: its data attributes and its cells, by (model, config)."""
    out = {}
    for attrs, body in re.findall(r'<tr class="pt fr" ([^>]*)>(.*?)</tr>', section, flags=re.S):
        data = {k: unescape(v) for k, v in re.findall(r'data-([a-z-]+)="([^"]*)"', attrs)}
        cells = [unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", body, flags=re.S)]
        out[(data["model"], data["config"])] = {"data": data, "cells": cells}
    return out


def frontier_list(section: str) -> list[tuple[dict[str, str], str]]:
    ol = section.split('class="frontier"', 1)[1].split("</ol>", 1)[0]
    return [
        ({k: unescape(v) for k, v in re.findall(r'data-([a-z-]+)="([^"]*)"', attrs)}, unescape(text))
        for attrs, text in re.findall(r'<li class="fr"([^>]*)>(.*?)</li>', ol, flags=re.S)
    ]


def answer(section: str) -> str:
    return unescape(re.search(r'<span class="answer">(.*?)</span>', section, flags=re.S).group(1))


def test_every_point_row_prints_its_own_numbers_filter_keys_and_frontier_mark() -> None:
    table = points(panel_of(cost_section(ROWS), "cost-0"))
    assert table[("alpha", "s1")]["cells"] == ["alpha", "s1", "g1", "10", "50.0", "40.0–60.0", "0.01", "yes"]
    assert table[("alpha", "s3")]["cells"] == ["alpha", "s3", "g2", "12", "80.0", "70.0–90.0", "0.03", "yes"]
    assert table[("beta", "s1")]["cells"] == ["beta", "s1", "g1", "10", "79.0", "65.0–88.0", "0.02", "yes"]
    assert table[("beta", "s2")]["cells"] == ["beta", "s2", "g2", "10", "45.0", "35.0–55.0", "0.0125", ""]
    assert table[("gamma", "s0")]["cells"][-1] == "yes" and table[("delta", "s0")]["cells"][-1] == ""
    # The filter bar hides a point by these keys; the page's "within" answer reads x, acc and the
    # paired verdict against the top point (none here: no records given).
    assert table[("beta", "s2")]["data"] == {
        "panel": "cost-0", "x": "0.0125", "acc": "0.45", "shown": "$0.0125", "verdict": "",
        "model": "beta", "dataset": "hotpotqa", "grid": "g2", "config": "s2",
    }  # fmt: skip


def test_the_frontier_list_names_each_frontier_point_cheapest_first_with_its_numbers() -> None:
    listed = frontier_list(panel_of(cost_section(ROWS), "cost-0"))
    assert [text for _, text in listed] == [
        "gamma · s0: 0.0% [0.0, 10.0] at $0.001",
        "alpha · s1: 50.0% [40.0, 60.0] at $0.01",
        "beta · s1: 79.0% [65.0, 88.0] at $0.02",
        "alpha · s3: 80.0% [70.0, 90.0] at $0.03",
    ]
    assert listed[2][0] == {"model": "beta", "dataset": "hotpotqa", "grid": "g1", "config": "s1"}


def test_the_cheapest_configuration_within_two_points_of_the_best_is_answered() -> None:
    page = cost_section(ROWS)
    # Best 80.0% (alpha/s3 at $0.03); beta/s1 is 1 point below at $0.02: that is the answer.
    assert answer(panel_of(page, "cost-0")) == "beta · s1: 79.0% at $0.02"
    assert answer(panel_of(page, "cop-0")) == "beta · s1: 79.0% at $0.0253165 per correct answer"


def test_the_cost_of_a_correct_answer_panel_prints_its_interval_and_names_what_it_left_out() -> None:
    section = panel_of(cost_section(ROWS), "cop-0")
    table = points(section)
    assert set(table) == {("alpha", "s1"), ("alpha", "s3"), ("beta", "s1"), ("beta", "s2")}
    assert table[("alpha", "s1")]["cells"] == ["alpha", "s1", "g1", "10", "50.0", "40.0–60.0", "0.02", "0.016 – 0.03", "yes"]  # fmt: skip
    assert table[("beta", "s2")]["cells"][-1] == ""  # 0.0278 per correct answer at 45%: beta/s1 is cheaper
    assert table[("alpha", "s3")]["data"]["shown"] == "$0.0375 per correct answer"
    assert section.count("<th>95% CI</th>") == 2
    assert "No correct answer, so no finite cost of one (left out): gamma · s0; delta · s0" in section
    assert "cost of a correct answer: mean cost per item / accuracy" in section


def test_the_axis_says_what_it_measures_and_unpriced_points_are_counted_in_tokens() -> None:
    priced = cost_section(ROWS)
    assert "x: mean cost per item under the run&#39;s price sheet" in panel_of(priced, "cost-0")
    unpriced = cost_section([{**r, "mean_cost_usd": None} for r in ROWS])
    tokens = panel_of(unpriced, "cost-0")
    assert "x: mean completion tokens per item (no price applies" in tokens
    assert points(tokens)[("beta", "s2")]["data"]["shown"] == "3,100 tokens"
    assert answer(tokens) == "beta · s1: 79.0% at 2,500 tokens"
    per_pass = panel_of(unpriced, "cop-0")
    assert "x: tokens of a correct answer: mean prompt + completion tokens per item / accuracy" in per_pass
    assert points(per_pass)[("alpha", "s1")]["data"]["shown"] == "9,600 tokens per correct answer"


def test_the_chart_rings_the_frontier_and_prints_money_as_money() -> None:
    priced = panel_of(cost_section(ROWS), "cost-0")
    [(_, spec)] = page_figures(priced)
    dots = [item for group in marks(spec)["symbol"] for item in group]
    assert len([d for d in dots if d["strokeWidth"]]) == 4 and len([d for d in dots if not d["strokeWidth"]]) == 2
    [beta_s2] = [d["description"] for d in dots if "model: beta; configuration: s2;" in d["description"]]
    assert "$0.0125" in beta_s2 and "accuracy %: 45.0" in beta_s2  # dollars to their last digit
    tokens = panel_of(cost_section([{**r, "mean_cost_usd": None} for r in ROWS]), "cost-0")
    ticks = [t for t in texts(page_figures(tokens)[0][1]) if t[:1].isdigit()]
    assert ticks and all("e+" not in t for t in ticks) and any("," in t for t in ticks)  # 1,000s, not 1e+03


def test_the_panel_heading_names_the_metric() -> None:
    page = cost_section(
        ROWS + [cost_row("alpha", "s1", "g1", 10, 0.5, 0.4, 0.6, 0.01, 100.0, metric="my_metric", dataset="nq")]
    )
    assert "<h3>hotpotqa — SQuAD EM</h3>" in page
    assert "<h3>nq — my_metric</h3>" in page  # a metric without a display name keeps its own
