"""The report's "Latency and throughput" section (BCAS §6.1: queueing and throughput).

Built from the summary rows' latency columns (:mod:`bcas.metrics.latency`) and the
records' ``timing``: a table per case, a figure of each configuration's distribution of
time per item (every item a tick, p50/p95/p99 marked), and, where the records hold more
than one concurrency level of one configuration, throughput against p95 latency per
level (the knee: :func:`bcas.metrics.latency.load_curve`).  Every element goes through
:func:`bcas.report.templating.element`, every page through a Jinja2 template.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from bcas.metrics.latency import load_curve, percentile
from bcas.report.membership import group_key
from bcas.report.plots import PALETTE, svg_chart
from bcas.report.templating import element as el
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


def distribution_chart(series: dict[str, list[float]]) -> Markup:
    """One line per configuration: a tick per item's time, p50 (circle), p95 and p99 (bars)."""
    names = sorted(series)
    width, left, right, line = 760, 260, 20, 26
    height = 50 + line * len(names)
    top = max((max(v) for v in series.values() if v), default=1.0) or 1.0

    def x(v: float) -> float:
        return left + (width - left - right) * max(0.0, v) / top

    parts: list[Markup] = []
    for tick in range(5):
        v = top * tick / 4
        parts.append(
            el("line", {"x1": f"{x(v):.1f}", "x2": f"{x(v):.1f}", "y1": 26, "y2": height - 20, "stroke": "#ddd"})
        )
        parts.append(
            el("text", {"x": f"{x(v):.1f}", "y": height - 6, "font_size": 10, "text_anchor": "middle"}, [f"{v:.2f} s"])
        )
    for i, name in enumerate(names):
        y, color, values = 40 + line * i, PALETTE[i % len(PALETTE)], series[name]
        parts.append(el("text", {"x": left - 8, "y": y + 4, "font_size": 10, "text_anchor": "end"}, [name]))
        for v in values:
            parts.append(
                el(
                    "line",
                    {
                        "x1": f"{x(v):.1f}",
                        "x2": f"{x(v):.1f}",
                        "y1": y - 6,
                        "y2": y + 6,
                        "stroke": color,
                        "stroke_opacity": 0.5,
                    },
                )
            )
        p50, p95, p99 = (percentile(values, q) for q in (50, 95, 99))
        parts.append(
            el(
                "circle",
                {"cx": f"{x(p50):.1f}", "cy": y, "r": 4, "fill": color},
                [el("title", {}, [f"p50 {p50:.3f} s"])],
            )
        )
        for q, v in (("p95", p95), ("p99", p99)):
            parts.append(
                el(
                    "rect",
                    {"x": f"{x(v) - 1.5:.1f}", "y": y - 9, "width": 3, "height": 18, "fill": "#333"},
                    [el("title", {}, [f"{q} {v:.3f} s"])],
                )
            )
    title = "Time per item by configuration (ticks: items; dot: p50; bars: p95, p99)"
    return svg_chart(title, width, height, parts)


def knee_chart(curves: dict[str, list[dict[str, Any]]]) -> Markup:
    """Throughput (x) against p95 latency (y), one line per configuration, a point per level."""
    width, height, left, bottom, top_pad = 560, 320, 60, 40, 30
    points = [p for c in curves.values() for p in c if p["items_per_min"] is not None and p["latency_p95"] is not None]
    xmax = max((p["items_per_min"] for p in points), default=1.0) or 1.0
    ymax = max((p["latency_p95"] for p in points), default=1.0) or 1.0

    def px(v: float) -> float:
        return left + (width - left - 20) * v / xmax

    def py(v: float) -> float:
        return height - bottom - (height - bottom - top_pad) * v / ymax

    parts: list[Markup] = [
        el("text", {"x": width / 2, "y": height - 6, "font_size": 11, "text_anchor": "middle"}, ["items per minute"]),
        el(
            "text",
            {
                "x": 12,
                "y": height / 2,
                "font_size": 11,
                "transform": f"rotate(-90 12 {height / 2})",
                "text_anchor": "middle",
            },
            ["p95 s"],
        ),
        el("text", {"x": left, "y": height - bottom + 14, "font_size": 10}, ["0"]),
        el(
            "text", {"x": width - 20, "y": height - bottom + 14, "font_size": 10, "text_anchor": "end"}, [f"{xmax:.1f}"]
        ),
        el("text", {"x": left - 4, "y": top_pad + 4, "font_size": 10, "text_anchor": "end"}, [f"{ymax:.2f}"]),
        el("line", {"x1": left, "x2": width - 20, "y1": height - bottom, "y2": height - bottom, "stroke": "#999"}),
        el("line", {"x1": left, "x2": left, "y1": top_pad, "y2": height - bottom, "stroke": "#999"}),
    ]
    for i, (name, curve) in enumerate(sorted(curves.items())):
        color = PALETTE[i % len(PALETTE)]
        pts = [p for p in curve if p["items_per_min"] is not None and p["latency_p95"] is not None]
        path = " ".join(f"{px(p['items_per_min']):.1f},{py(p['latency_p95']):.1f}" for p in pts)
        parts.append(el("polyline", {"points": path, "fill": "none", "stroke": color}))
        for p in pts:
            label = (
                f"{name}: concurrency {p['concurrency']}, {p['items_per_min']:.1f}/min, p95 {p['latency_p95']:.3f} s"
            )
            parts.append(
                el(
                    "circle",
                    {"cx": f"{px(p['items_per_min']):.1f}", "cy": f"{py(p['latency_p95']):.1f}", "r": 4, "fill": color},
                    [el("title", {}, [label])],
                )
            )
            parts.append(
                el(
                    "text",
                    {
                        "x": f"{px(p['items_per_min']) + 6:.1f}",
                        "y": f"{py(p['latency_p95']) - 6:.1f}",
                        "font_size": 10,
                        "fill": color,
                    },
                    [f"c={p['concurrency']}"],
                )
            )
    title = "Throughput against p95 latency by concurrency"
    return svg_chart(title, width, height, parts)


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
        distribution=distribution_chart(_times(records)),
        curve_rows=curve_rows,
        knee=knee_chart(curves) if curves else Markup(),
    )


__all__ = ["distribution_chart", "knee_chart", "latency_section", "load_curves"]
