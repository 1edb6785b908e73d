"""The report's cost–accuracy view: per dataset, accuracy against cost and its Pareto frontier.

One panel per dataset (and metric): a scatter of every model × configuration with its
accuracy interval, the frontier drawn as a step line and listed, a table of every point
(sortable, filterable), and "the cheapest configuration within X points of the best"
answered from the points (X editable on the page).  Computed by :mod:`bcas.report.pareto`
from the summary rows, the same numbers ``summary.json`` holds.
"""

from __future__ import annotations

from html import escape
from typing import Any

from bcas.grading.outcomes import METRIC_NAMES
from bcas.report.html_interactive import fr_attrs
from bcas.report.pareto import AXIS_NAMES, COST, Panel, Point, cheapest_within, panels
from bcas.report.plots import cost_scatter

WITHIN_DEFAULT = 2.0  # percentage points: the band the page answers first


def _x_text(p: Point, axis: str) -> str:
    return f"${p.x:.6g}" if axis == COST else f"{p.x:,.0f} tokens"


def _panel(i: int, panel: Panel) -> str:
    pid = f"cost-{i}"
    front = panel.frontier
    on = {p.key for p in front}
    money = panel.axis == COST
    metric = METRIC_NAMES.get(panel.metric, panel.metric)
    title = f"{panel.dataset}: {metric} against {AXIS_NAMES[panel.axis]}"
    svg = cost_scatter(
        title,
        AXIS_NAMES[panel.axis],
        [(p.model, p.label, p.x, p.accuracy, p.ci_lo, p.ci_hi, p.key in on) for p in panel.points],
        money,
    )
    listed = "".join(
        f'<li class="fr"{fr_attrs(model=p.model, dataset=p.dataset, grid=p.grid, config=p.label)}>'
        f"{escape(p.model)} · {escape(p.label)}: {p.accuracy * 100:.1f}% "
        f"[{p.ci_lo * 100:.1f}, {p.ci_hi * 100:.1f}] at {escape(_x_text(p, panel.axis))}</li>"
        for p in front
    )
    head = (
        "<tr><th>model</th><th>config</th><th>grid</th><th>n</th><th>acc %</th><th>95% CI</th>"
        f"<th>{'mean cost $' if money else 'mean completion tokens'}</th><th>on frontier</th></tr>"
    )
    body = "".join(
        f'<tr class="pt fr" data-panel="{pid}" data-x="{p.x!r}" data-acc="{p.accuracy!r}" '
        f'data-shown="{escape(_x_text(p, panel.axis))}"'
        f"{fr_attrs(model=p.model, dataset=p.dataset, grid=p.grid, config=p.label)}>"
        f'<td class="t">{escape(p.model)}</td><td class="t">{escape(p.label)}</td><td class="t">{escape(p.grid)}</td>'
        f"<td>{p.n}</td><td>{p.accuracy * 100:.1f}</td><td>{p.ci_lo * 100:.1f}–{p.ci_hi * 100:.1f}</td>"
        f"<td>{p.x:.6g}</td><td>{'yes' if p.key in on else ''}</td></tr>"
        for p in panel.points
    )
    best = cheapest_within(panel.points, WITHIN_DEFAULT)
    answer = (
        ""
        if best is None
        else (f"{best.model} · {best.label}: {best.accuracy * 100:.1f}% at {_x_text(best, panel.axis)}")
    )
    axis_note = (
        "mean cost per item under the run's price sheet"
        if money
        else "mean completion tokens per item (no price applies to every point of this dataset)"
    )
    return (
        f'<div class="cost-panel fr" id="{pid}" data-dataset="{escape(panel.dataset)}" data-axis="{panel.axis}">'
        f"<h3>{escape(panel.dataset)} — {escape(metric)}</h3>"
        f"<p>x: {escape(axis_note)}; y: accuracy with its 95% interval; ringed points and the dashed step "
        "line: the Pareto frontier (no other point is as cheap and as accurate, and better in one).</p>"
        f'<div class="fig">{svg}</div>'
        f'<p>Pareto frontier, cheapest first:</p><ol class="frontier" id="{pid}-frontier">{listed}</ol>'
        f'<p class="within" data-panel="{pid}"><label>The cheapest configuration within '
        f'<input type="number" min="0" step="0.5" value="{WITHIN_DEFAULT:g}"> points of the best:</label> '
        f'<span class="answer">{escape(answer)}</span></p>'
        f'<table class="sortable" id="{pid}-points"><thead>{head}</thead><tbody>{body}</tbody></table></div>'
    )


def cost_section(rows: list[Any]) -> str:
    """The "Cost against accuracy" section (empty without summary rows)."""
    found = panels(rows)
    if not found:
        return ""
    return (
        '<h2 id="cost-accuracy">Cost against accuracy</h2>'
        "<p>One point per model × configuration on each dataset. A configuration shared by several grids is "
        "one point (the same answers).</p>" + "".join(_panel(i, p) for i, p in enumerate(found))
    )


def stops_section(stops: list[dict[str, Any]]) -> str:
    """Cases the session's ``--bcas-max-cost`` stopped before all their items ran (empty when none)."""
    if not stops:
        return ""
    first = stops[0]
    items = "".join(
        f"<li>{escape(str(s.get('case_id')))}: {int(s.get('recorded') or 0)} of {int(s.get('total') or 0)} items "
        "recorded</li>"
        for s in stops
    )
    return (
        f'<div id="cost-stop" class="bad"><h2>Stopped at the cost cap</h2><p>--bcas-max-cost '
        f"{float(first.get('cap_usd') or 0):.6g} USD: the session's priced spend reached "
        f"{float(max(s.get('spent_usd') or 0 for s in stops)):.6g} USD, so no new items were started. "
        "Run the same command again to resume: recorded items are kept, the rest run.</p>"
        f"<ul>{items}</ul></div>"
    )
