"""The report's cost–accuracy view: per dataset, accuracy against cost and its Pareto frontier.

One panel per dataset (and metric): a scatter of every model × configuration with its
accuracy interval, the frontier drawn as a step line and listed, a table of every point
(sortable, filterable), and "the cheapest configuration within X points of the best"
answered from the points (X editable on the page).  Computed by :mod:`bcas.report.pareto`
from the summary rows, the same numbers ``summary.json`` holds.  A second set of panels
puts the cost of a correct answer on the x axis (cost-of-pass, or tokens-of-pass where
no price applies), with its bootstrap interval in the table.
"""

from __future__ import annotations

from html import escape
from typing import Any

from bcas.grading.outcomes import METRIC_NAMES
from bcas.report.html_interactive import fr_attrs
from bcas.report.pareto import AXIS_NAMES, COST, COST_OF_PASS, MONEY_AXES, TOKENS, Panel, Point, cheapest_within, panels
from bcas.report.plots import cost_scatter

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


def _panel(i: int, panel: Panel, prefix: str = "cost") -> str:
    pid = f"{prefix}-{i}"
    front = panel.frontier
    on = {p.key for p in front}
    money = panel.axis in MONEY_AXES
    per_pass = panel.axis not in (COST, TOKENS)
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
        f"<th>{escape(AXIS_NAMES[panel.axis])}</th>{'<th>95% CI</th>' if per_pass else ''}<th>on frontier</th></tr>"
    )
    body = "".join(
        f'<tr class="pt fr" data-panel="{pid}" data-x="{p.x!r}" data-acc="{p.accuracy!r}" '
        f'data-shown="{escape(_x_text(p, panel.axis))}"'
        f"{fr_attrs(model=p.model, dataset=p.dataset, grid=p.grid, config=p.label)}>"
        f'<td class="t">{escape(p.model)}</td><td class="t">{escape(p.label)}</td><td class="t">{escape(p.grid)}</td>'
        f"<td>{p.n}</td><td>{p.accuracy * 100:.1f}</td><td>{p.ci_lo * 100:.1f}–{p.ci_hi * 100:.1f}</td>"
        f"<td>{p.x:.6g}</td>{f'<td>{escape(_interval(p))}</td>' if per_pass else ''}"
        f"<td>{'yes' if p.key in on else ''}</td></tr>"
        for p in panel.points
    )
    best = cheapest_within(panel.points, WITHIN_DEFAULT)
    answer = (
        ""
        if best is None
        else (f"{best.model} · {best.label}: {best.accuracy * 100:.1f}% at {_x_text(best, panel.axis)}")
    )
    axis_note = _AXIS_NOTES.get(panel.axis, _TOKENS_OF_PASS_NOTE)
    excluded = (
        f'<p class="excluded">No correct answer, so no finite cost of one (left out): '
        f"{escape('; '.join(panel.excluded))}</p>"
        if panel.excluded
        else ""
    )
    return (
        f'<div class="cost-panel fr" id="{pid}" data-dataset="{escape(panel.dataset)}" data-axis="{panel.axis}">'
        f"<h3>{escape(panel.dataset)} — {escape(metric)}</h3>"
        f"<p>x: {escape(axis_note)}; y: accuracy with its 95% interval; ringed points and the dashed step "
        "line: the Pareto frontier (no other point is as cheap and as accurate, and better in one).</p>"
        f'<div class="fig">{svg}</div>{excluded}'
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
        "one point (the same answers).</p>"
        + "".join(_panel(i, p) for i, p in enumerate(found))
        + '<h3 id="cost-of-pass">Cost of a correct answer</h3>'
        "<p>The same points against what one correct answer costs (failed attempts paid for too): "
        "cost-of-pass where every point is priced, else tokens-of-pass; 95% bootstrap interval over items.</p>"
        + "".join(_panel(i, p, "cop") for i, p in enumerate(panels(rows, per_pass=True)))
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
