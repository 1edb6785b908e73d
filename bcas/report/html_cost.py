"""The report's cost–accuracy view: per dataset, accuracy against cost and its Pareto frontier.

One panel per dataset (and metric): a scatter of every model × configuration with its
accuracy interval, the frontier drawn as a step line and listed, a table of every point
(sortable, filterable), and "the cheapest configuration within X points of the highest observed accuracy" (with the
paired verdict against that point, :func:`bcas.report.pareto.verdicts_against_top`)
answered from the points (X editable on the page).  Computed by :mod:`bcas.report.pareto`
from the summary rows, the same numbers ``summary.json`` holds.  A second set of panels
puts the cost of a correct answer on the x axis (cost-of-pass, or tokens-of-pass where
no price applies), with its bootstrap interval in the table.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from bcas.grading.outcomes import METRIC_NAMES
from bcas.report.charts import cost_chart
from bcas.report.columns import n_cell
from bcas.report.html_interactive import fr_data
from bcas.report.pareto import (
    AXIS_NAMES,
    COST,
    COST_OF_PASS,
    MONEY_AXES,
    TOKENS,
    Panel,
    Point,
    cheapest_within,
    panels,
    verdicts_against_top,
)
from bcas.report.templating import render
from bcas.report.vega import slug

WITHIN_DEFAULT = 2.0  # percentage points: the band the page answers first


_AXIS_NOTES = {
    COST: "mean cost per item under the run's price sheet",
    TOKENS: "mean completion tokens per item (no price applies to every point of this dataset)",
    COST_OF_PASS: "cost of a correct answer: mean cost per item / accuracy (cost-of-pass, Erol et al. 2025)",
}
_TOKENS_OF_PASS_NOTE = (
    "tokens of a correct answer: mean prompt + completion tokens per item / accuracy (tokens-of-pass; "
    "no price applies to every point of this dataset)"
)


def _x_text(p: Point, axis: str) -> str:
    if axis in MONEY_AXES:
        return f"${p.x:.6g}" + (" per correct answer" if axis == COST_OF_PASS else "")
    return f"{p.x:,.0f} tokens" + ("" if axis == TOKENS else " per correct answer")


def _interval(p: Point) -> str:
    lo = "–" if p.x_lo is None else f"{p.x_lo:.6g}"
    return f"{lo} – {'∞' if p.x_hi is None else f'{p.x_hi:.6g}'}"


def _panel(i: int, panel: Panel, prefix: str = "cost", records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the template shows of one panel: the chart, the frontier, the points, the answer
    (with what the paired test says of it against the highest observed accuracy)."""
    pid = f"{prefix}-{i}"
    verdicts = verdicts_against_top(panel, records or [])
    on = {p.key for p in panel.frontier}
    per_pass = panel.axis not in (COST, TOKENS)
    metric = METRIC_NAMES.get(panel.metric, panel.metric)
    figure = cost_chart(
        slug(f"{prefix}-{panel.dataset}-{panel.metric}-{panel.axis}"),
        f"{panel.dataset}: {metric} against {AXIS_NAMES[panel.axis]}",
        AXIS_NAMES[panel.axis],
        [(p.model, p.label, p.x, p.accuracy, p.ci_lo, p.ci_hi, p.key in on) for p in panel.points],
        panel.axis in MONEY_AXES,
    )

    def data(p: Point) -> dict[str, str]:
        return fr_data(model=p.model, dataset=p.dataset, grid=p.grid, config=p.label)

    frontier = [
        {
            "data": data(p),
            "text": f"{p.model} · {p.label}: {p.accuracy * 100:.1f}% [{p.ci_lo * 100:.1f}, {p.ci_hi * 100:.1f}] "
            f"at {_x_text(p, panel.axis)}",
        }
        for p in panel.frontier
    ]
    points = [
        {
            "x": repr(p.x),
            "acc": repr(p.accuracy),
            "shown": _x_text(p, panel.axis),
            "data": data(p),
            "verdict": verdicts.get(p.key, ""),
            "cells": [
                p.model,
                p.label,
                p.grid,
                n_cell(p.n, p.items_note),
                f"{p.accuracy * 100:.1f}",
                f"{p.ci_lo * 100:.1f}–{p.ci_hi * 100:.1f}",
                f"{p.x:.6g}",
                *([_interval(p)] if per_pass else []),
                "yes" if p.key in on else "",
            ],
        }
        for p in panel.points
    ]
    best = cheapest_within(panel.points, WITHIN_DEFAULT)
    return {
        "id": pid,
        "dataset": panel.dataset,
        "axis": panel.axis,
        "axis_name": AXIS_NAMES[panel.axis],
        "axis_note": _AXIS_NOTES.get(panel.axis, _TOKENS_OF_PASS_NOTE),
        "metric": metric,
        "figure": figure,
        "excluded": "; ".join(panel.excluded),
        "frontier": frontier,
        "points": points,
        "per_pass": per_pass,
        "answer": "" if best is None else _answer(best, panel.axis, verdicts.get(best.key, "")),
    }


def _answer(p: Point, axis: str, verdict: str) -> str:
    """The cheapest-within answer: the point's numbers, then the paired verdict against the top point."""
    return f"{p.model} · {p.label}: {p.accuracy * 100:.1f}% at {_x_text(p, axis)}" + (f"; {verdict}" if verdict else "")


def cost_section(rows: list[Any], records: list[dict[str, Any]] | None = None) -> Markup:
    """The "Cost against accuracy" section (empty without summary rows); ``records``: the run's,
    for the paired verdicts against each panel's highest observed accuracy."""
    found = panels(rows)
    if not found:
        return Markup()
    return render(
        "cost.html",
        cost_panels=[_panel(i, p, records=records) for i, p in enumerate(found)],
        pass_panels=[_panel(i, p, "cop", records) for i, p in enumerate(panels(rows, per_pass=True))],
        within=f"{WITHIN_DEFAULT:g}",
    )


def stops_section(stops: list[dict[str, Any]]) -> Markup:
    """Cases the session's ``--bcas-max-cost`` stopped before all their items ran (empty when none)."""
    if not stops:
        return Markup()
    return render(
        "stops.html",
        cap=f"{float(stops[0].get('cap_usd') or 0):.6g}",
        spent=f"{float(max(s.get('spent_usd') or 0 for s in stops)):.6g}",
        stops=[
            {
                "case_id": str(s.get("case_id")),
                "recorded": int(s.get("recorded") or 0),
                "total": int(s.get("total") or 0),
            }
            for s in stops
        ],
    )
