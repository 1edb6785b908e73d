"""The report's "Agent against methods" section: is agency worth its cost (BCAS §6.1, §7)?

Per grid × model × dataset where the BCAS loop was compared with methods beside it
(:mod:`bcas.report.methods`): the extra cost per extra correct answer of the loop over the
method with the highest observed accuracy (a verdict only where the paired test separates
them: :mod:`bcas.report.verdict`), each method's paired difference against the loop (Newcombe
interval, McNemar, Holm over the grid's family, its verdict) with its cost and tokens per
correct answer, and a figure of
accuracy against mean tokens (or cost, where every point is priced) per item with the Pareto
frontier (:func:`bcas.report.pareto.frontier`, drawn by :func:`bcas.report.charts.cost_chart`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from markupsafe import Markup

from bcas.report.charts import cost_chart
from bcas.report.html_interactive import fr_data
from bcas.report.methods import ExtraCost, MethodRow
from bcas.report.pareto import AXIS_NAMES, COST, TOKENS, Point, axis_for, frontier
from bcas.report.templating import render
from bcas.report.vega import slug

HEADERS = [
    "model", "dataset", "method", "agent", "n", "method acc %", "agent acc %", "diff (method − agent) pts",
    "95% CI (Newcombe)", "p (McNemar)", "p Holm", "verdict", "searches/item", "completion tokens/item",
    "tokens/correct", "USD/correct", "p50 latency s/item",
]  # fmt: skip


def _pct(v: float) -> str:
    return f"{v * 100:.1f}"


def _row(m: MethodRow) -> dict[str, Any]:
    return {
        "cls": "fr sig" if m.significant else "fr",
        "data": fr_data(model=m.model, dataset=m.dataset, grid=m.grid, config=m.label),
        "cells": [
            m.model, m.dataset, m.label, m.agent, m.n_paired, _pct(m.accuracy), _pct(m.agent_accuracy),
            f"{m.diff * 100:+.1f}", f"{_pct(m.ci_lo)} – {_pct(m.ci_hi)}", f"{m.p_value:.3g}",
            f"{m.p_holm:.3g}" + (" *" if m.significant else ""), m.verdict, f"{m.mean_searches:.2f}",
            f"{m.mean_tokens_out:.0f}",
            "none correct" if m.tokens_per_correct is None else f"{m.tokens_per_correct:,.0f}",
            "–" if m.cost_per_correct is None else f"${m.cost_per_correct:.6g}",
            "–" if m.latency_p50_s is None else f"{m.latency_p50_s:.2f}",
        ],
    }  # fmt: skip


def _figure(i: int, cell: tuple[str, str, str], rows: list[Any]) -> dict[str, Any]:
    grid, model, dataset = cell
    axis = axis_for(rows)
    points = [
        Point(model=r.model, label=r.label, grid=r.grid, dataset=r.dataset, config_id=r.config_id, metric=r.metric,
              accuracy=r.accuracy, ci_lo=r.ci_lo, ci_hi=r.ci_hi, n=r.n,
              x=float((r.mean_cost_usd if axis == COST else r.mean_tokens_out) or 0.0))
        for r in rows
    ]  # fmt: skip
    front = frontier(points)
    on = {p.label for p in front}
    figure = cost_chart(
        slug(f"methods-{grid}-{model}-{dataset}"),
        f"{dataset} · {model}: accuracy against {AXIS_NAMES[axis]} per method",
        AXIS_NAMES[axis],
        [(p.label, p.label, p.x, p.accuracy, p.ci_lo, p.ci_hi, p.label in on) for p in points],
        axis == COST,
        series_title="method",
    )

    def unit(x: float) -> str:
        return f"${x:.6g}" if axis == COST else f"{x:,.0f} tokens"

    return {
        "id": f"methods-fig-{i}",
        "data": fr_data(model=model, dataset=dataset, grid=grid),
        "title": f"{grid} · {model} · {dataset}",
        "figure": figure,
        "axis": AXIS_NAMES[axis if axis in (COST, TOKENS) else TOKENS],
        "frontier": [f"{p.label}: {_pct(p.accuracy)}% at {unit(p.x)}" for p in front],
    }


def methods_section(rows: list[Any], computed: tuple[list[MethodRow], list[ExtraCost]]) -> Markup:
    """The section (empty when no method was compared with the loop): ``computed``, the run's
    method rows and extra costs as its summary has them (``Summaries.methods``), beside its ``rows``."""
    method_rows, extras = computed
    if not method_rows:
        return Markup()
    by_cell: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    wanted = {(m.grid, m.model, m.dataset, label) for m in method_rows for label in (m.label, m.agent)}
    for r in rows:
        if (r.grid, r.model, r.dataset, r.label) in wanted:
            by_cell[(r.grid, r.model, r.dataset)].append(r)
    return render(
        "methods.html",
        extras=[
            {
                "data": fr_data(model=e.model, dataset=e.dataset, grid=e.grid, config=e.agent),
                "cells": [
                    e.model,
                    e.dataset,
                    e.agent,
                    e.method,
                    e.n_paired,
                    _pct(e.agent_accuracy),
                    _pct(e.method_accuracy),
                    e.text,
                ],
            }
            for e in extras
        ],  # fmt: skip
        headers=HEADERS,
        rows=[_row(m) for m in method_rows],
        figures=[_figure(i, cell, cell_rows) for i, (cell, cell_rows) in enumerate(sorted(by_cell.items()))],
    )


__all__ = ["HEADERS", "methods_section"]
