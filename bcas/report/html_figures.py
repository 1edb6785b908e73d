"""The report's figures: the papers' plots drawn from the run's own summaries.

- Search and context scaling (BCAS §3.9, §3.10, Figure 2): accuracy over an ordered
  budget axis (max searches 1, 2, 3, unlimited; 500 ... 16K completion tokens) as one
  line per model with its 95% band.  Which configurations lie on that axis is read from
  the configurations themselves (:func:`budget_axis`): those differing only in one budget
  field.  Every other configuration (+ planning, + reflection, retrieval modes, MADARA
  treatments) is categorical and drawn as a dot with its interval, never joined by a line.
- Net shift against the reference with Newcombe paired intervals (BCAS Figure 3;
  ablation and MADARA treatments): one chart per (grid, dataset), models side by side.
- Accuracy against cost with the Pareto frontier: :mod:`bcas.report.html_cost`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from bcas.grading.outcomes import METRIC_NAMES
from bcas.report.charts import scaling_chart, shift_chart
from bcas.report.html_interactive import fr_data
from bcas.report.templating import render
from bcas.report.vega import Figure, slug, unique

BUDGET_FIELDS = ("max_searches", "max_total_tokens")
SCALING_GRIDS = ("search_scaling", "context_scaling")  # no reference-shift bars (the paper plots lines)


def _budget_value(value: Any) -> float:
    return float("inf") if value is None else float(value)


def budget_axis(configs: Mapping[str, dict[str, Any] | None]) -> tuple[str | None, list[str], list[str]]:
    """(budget field, labels on its ordered axis in budget order, the other labels in input order).

    ``configs``: label -> its ``RunConfig.to_dict()`` (None when unknown).  The axis is the
    largest set of at least two configurations that differ only in one budget field
    (``None``, unlimited, last); a label without a known configuration is categorical.
    """
    best: tuple[str | None, list[str]] = (None, [])
    for name in BUDGET_FIELDS:
        groups: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for label, config in configs.items():
            if not isinstance(config, dict) or not isinstance(config.get("budget"), dict):
                continue
            rest = {k: v for k, v in config.items() if k not in ("seed", "label")}
            rest["budget"] = {k: v for k, v in config["budget"].items() if k != name}
            groups[json.dumps(rest, sort_keys=True, default=str)].append(
                (_budget_value(config["budget"].get(name)), label)
            )
        for members in groups.values():
            values = {v for v, _ in members}
            if len(values) == len(members) >= 2 and len(members) > len(best[1]):
                best = (name, [label for _, label in sorted(members)])
    ordered = best[1]
    return best[0], ordered, [label for label in configs if label not in ordered]


def panel_configs(
    grid: str, labels: list[str], records: list[dict[str, Any]], grids: Mapping[str, Any]
) -> dict[str, dict[str, Any] | None]:
    """label -> configuration of a (grid, dataset) panel: the grid table's entry, else a record's own."""
    table = grids.get(grid)
    entries = {e.label: e.config.to_dict() for e in getattr(table, "entries", ())}
    from_records: dict[str, dict[str, Any]] = {}
    for rec in records:
        cfg = rec.get("config")
        label = str(rec.get("label") or "")
        if label in labels and label not in from_records and isinstance(cfg, dict) and "budget" in cfg:
            from_records[label] = cfg
    return {label: entries.get(label) or from_records.get(label) for label in labels}


def figures(
    rows: list[Any],
    comps: list[Any],
    grid_order: dict[str, list[str]],
    records: list[dict[str, Any]],
    grids: Mapping[str, Any],
) -> Markup:
    """HTML of every figure (:func:`figure_list`)."""
    return render("figures.html", figures=figure_list(rows, comps, grid_order, records, grids))


def figure_list(
    rows: list[Any],
    comps: list[Any],
    grid_order: dict[str, list[str]],
    records: list[dict[str, Any]],
    grids: Mapping[str, Any],
) -> list[Figure]:
    """A scaling chart per (grid, dataset), and the net-shift chart where the grid compares entries."""
    out: list[Figure] = []
    by_panel: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for r in rows:
        by_panel[(r.grid, r.dataset)].append(r)
    recs_by_panel: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        recs_by_panel[(str((rec.get("extra") or {}).get("grid", "")), str(rec.get("dataset", "")))].append(rec)
    for (grid, dataset), panel in sorted(by_panel.items()):
        present = {r.label for r in panel}
        order = grid_order.get(grid) or []
        # Configurations the grid table does not know (renamed, or from an older run) still get plotted, last.
        labels = [lab for lab in order if lab in present] + sorted(present - set(order))
        field, ordered, categorical = budget_axis(panel_configs(grid, labels, recs_by_panel[(grid, dataset)], grids))
        series: dict[str, list[tuple[float, float, float] | None]] = {}
        for model in sorted({r.model for r in panel}):
            hits = {r.label: r for r in panel if r.model == model}
            series[model] = [
                (hits[lab].accuracy, hits[lab].ci_lo, hits[lab].ci_hi) if lab in hits else None
                for lab in ordered + categorical
            ]
        metric = ", ".join(sorted({METRIC_NAMES.get(r.metric, r.metric) for r in panel}))
        interval = "item-clustered" if any(getattr(r, "interval", "wilson") != "wilson" for r in panel) else "Wilson"
        axis = f"; line: {field.replace('_', ' ')} in order" if field else ""
        title = f"{grid} — {dataset} ({metric}, 95% {interval}{axis})"
        where = fr_data(grid=grid, dataset=dataset)
        out.append(scaling_chart(slug(f"scaling-{grid}-{dataset}"), title, ordered, categorical, series, where))
        if grid in SCALING_GRIDS:
            continue
        bars = [
            (c.model, c.label, c.diff, c.ci_lo, c.ci_hi)
            for c in comps
            if c.grid == grid and c.dataset == dataset and c.model in series
        ]
        if bars:
            title = f"{grid} — {dataset}: net shift in accuracy vs reference (Newcombe 95%)"
            out.append(shift_chart(slug(f"shift-{grid}-{dataset}"), title, bars, where))
    return unique(out)
