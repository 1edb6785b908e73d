"""The report's "Latency and throughput" section (BCAS §6.1: queueing and throughput).

Built from the summary rows' latency columns (:mod:`bcas.metrics.latency`) and the
records' ``timing``: a table per case, a figure of each configuration's distribution of
time per item (every item a tick, p50/p95/p99 marked), and, where the records hold more
than one concurrency level of one configuration, throughput against p95 latency per
level (the knee: :func:`bcas.metrics.latency.load_curve`).  The figures are Vega-Lite specs
(:mod:`bcas.report.charts`), the section a Jinja2 template.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from bcas.metrics.latency import load_curve
from bcas.report.charts import distribution_chart, knee_chart
from bcas.report.membership import group_key
from bcas.report.templating import render

HEADERS = (
    "model", "dataset", "configuration", "source", "concurrency", "n", "p50 s", "p95 s", "p99 s",
    "mean wait s", "s / model call", "s / search", "TTFT s", "items/min", "model %", "search %", "wait %", "harness %",
)  # fmt: skip


def _s(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _with_ci(value: float | None, lo: float | None, hi: float | None) -> str:
    return "—" if value is None else f"{value:.3f} [{_s(lo)}, {_s(hi)}]"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _row_cells(row: Any) -> list[str]:
    return [
        row.model, row.dataset, row.label, str(row.latency_source), _s(row.concurrency, 0) if row.concurrency else "—",
        str(row.latency_n), _with_ci(row.latency_p50, row.latency_p50_lo, row.latency_p50_hi),
        _with_ci(row.latency_p95, row.latency_p95_lo, row.latency_p95_hi),
        _with_ci(row.latency_p99, row.latency_p99_lo, row.latency_p99_hi), _s(row.mean_wait_s),
        _s(row.mean_model_call_s), _s(row.mean_search_s), _s(row.mean_ttft_s), _s(row.items_per_min, 1),
        _pct(row.share_model), _pct(row.share_search), _pct(row.share_wait), _pct(row.share_harness),
    ]  # fmt: skip


def _times(records: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for rec in records:
        timing = rec.get("timing")
        if isinstance(timing, dict) and isinstance(timing.get("item_s"), int | float):
            grid, model, dataset, label = group_key(rec)
            out[f"{model} · {dataset} · {label}"].append(float(timing["item_s"]))
    return out


def load_curves(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per configuration (model · dataset · label), its :func:`load_curve`, kept when it has two levels or more."""
    by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        _, model, dataset, label = group_key(rec)
        by_case[f"{model} · {dataset} · {label}"].append(rec)
    curves = {name: load_curve(recs) for name, recs in by_case.items()}
    return {name: c for name, c in curves.items() if len(c) > 1}


def latency_section(rows: Sequence[Any], records: Sequence[dict[str, Any]]) -> Markup:
    """The "Latency and throughput" section (empty when no record has a timing)."""
    timed = [r for r in rows if getattr(r, "latency_n", 0)]
    if not timed:
        return Markup()
    curves = load_curves(records)
    curve_rows = [
        [name, str(p["concurrency"]), str(p["n"]), _s(p["items_per_min"], 1), _s(p["latency_p50"]), _s(p["latency_p95"]), _s(p["mean_wait_s"])]
        for name, curve in sorted(curves.items())
        for p in curve
    ]  # fmt: skip
    return render(
        "latency.html",
        headers=HEADERS,
        rows=[_row_cells(r) for r in timed],
        replayed=any(r.latency_source != "live" for r in timed),
        distribution=distribution_chart("latency-per-item", _times(records)),
        curve_rows=curve_rows,
        knee=knee_chart("latency-knee", curves) if curves else None,
    )


__all__ = ["latency_section", "load_curves"]
