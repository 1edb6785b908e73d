"""The figures of the report, ``bcas compare`` and ``bcas latency`` as Vega-Lite specs built with Altair.

Each function returns a :class:`bcas.report.vega.Figure`: a spec (data inline, so the page
and vl-convert need nothing else), or a sentence when there is nothing to show.  Labels
that would crowd the plot (configuration names on points, intervals, concurrency levels)
are tooltips; models and series are a colour legend; every axis has a title and ticks.
The specs are deterministic (no selection parameters, no generated names): the same
numbers give the same bytes, so a session's page and ``bcas report``'s are identical.

- :func:`scaling_chart`: BCAS Figure 2: accuracy (%) over an ordered budget axis as one
  line per model with its 95% band; configurations off that axis (+ planning, + reflection,
  retrieval modes) as a dot with its interval, never joined by a line.
- :func:`shift_chart`: BCAS Figure 3: net shift in accuracy (points) against the reference
  per configuration, models side by side, Newcombe (1998) paired 95% intervals.
- :func:`cost_chart`: accuracy against cost with the Pareto frontier as a step line
  (:mod:`bcas.report.pareto`).
- :func:`distribution_chart` and :func:`knee_chart`: time per item, and throughput against
  p95 latency per concurrency level (BCAS §6.1).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import altair as alt

from bcas.metrics.latency import percentile
from bcas.report.vega import Figure

WIDTH, HEIGHT = 480, 260
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
CONFIG: dict[str, Any] = {
    "font": FONT,
    "view": {"stroke": None},
    "axis": {"labelFontSize": 11, "titleFontSize": 12, "grid": True, "gridColor": "#e6e6e6"},
    "legend": {"labelFontSize": 11, "titleFontSize": 12, "labelLimit": 320},
    "title": {"fontSize": 13, "anchor": "start", "limit": 0},
}


def _spec(chart: Any, title: str, description: str = "") -> dict[str, Any]:
    """The chart's Vega-Lite spec, with the shared look and its title (wrapped, never cut)."""
    # Vega-Lite draws a list as one title line each; it does not wrap a title itself
    lines = textwrap.wrap(" ".join(title.split()), 72, break_long_words=False, break_on_hyphens=False) or [""]
    # validated against the Vega-Lite schema by the tests (tests/report/test_figures.py), not per page
    out: dict[str, Any] = chart.properties(title=lines if len(lines) > 1 else title).to_dict(validate=False)
    out["config"] = {**CONFIG, **out.get("config", {})}
    if description:
        out["description"] = description
    return out


def _data(rows: list[dict[str, Any]]) -> Any:
    """Inline data: the spec carries its rows, so neither the page nor vl-convert loads anything."""
    return alt.Data(values=rows)  # type: ignore[no-untyped-call]


def _color(title: str, domain: list[str]) -> Any:
    return alt.Color("series:N", title=title, scale=alt.Scale(domain=domain), legend=alt.Legend(orient="bottom"))


def _interval_tips(series_title: str, field: str, field_title: str, fmt: str) -> list[Any]:
    """The tooltip of a point with its 95% interval: its series, configuration, value, low and high."""
    return [
        alt.Tooltip("series:N", title=series_title),
        alt.Tooltip("config:N", title="configuration"),
        alt.Tooltip(f"{field}:Q", title=field_title, format=fmt),
        alt.Tooltip("lo:Q", title="95% low", format=fmt),
        alt.Tooltip("hi:Q", title="95% high", format=fmt),
    ]


def _pct(v: float) -> float:
    return round(100.0 * v, 4)


def scaling_chart(
    name: str,
    title: str,
    ordered: list[str],
    categorical: list[str],
    series: dict[str, list[tuple[float, float, float] | None]],
    data: dict[str, str] | None = None,
) -> Figure:
    """Accuracy per configuration; ``series[model][i] = (acc, lo, hi)`` or None over ``ordered + categorical``.

    The ``ordered`` configurations (one budget axis, in budget order) are joined by a line
    per model with its interval band (BCAS Figure 2); each ``categorical`` one is a dot with
    an interval whisker, never joined to anything."""
    labels = ordered + categorical
    rows: list[dict[str, Any]] = [
        {"series": model, "config": lab, "on_axis": i < len(ordered), "acc": _pct(p[0]), "lo": _pct(p[1]),
         "hi": _pct(p[2])}
        for model, points in sorted(series.items())
        for i, (lab, p) in enumerate(zip(labels, points, strict=True))
        if p is not None
    ]  # fmt: skip
    if not rows:
        return Figure(name, None, f"{title}: no configuration has an accuracy to plot.", data or {})
    models = sorted({r["series"] for r in rows})
    x = alt.X("config:N", title="configuration", sort=labels, axis=alt.Axis(labelAngle=-30, labelLimit=180))
    y = alt.Y("acc:Q", title="accuracy (%)", scale=alt.Scale(domain=[0, 100]))
    low = alt.Y("lo:Q", title="accuracy (%)")  # a band or whisker, from the interval's low end
    color = _color("model", models)
    tip = _interval_tips("model", "acc", "accuracy %", ".1f")
    layers = []
    if any(r["on_axis"] for r in rows):
        base = alt.Chart().transform_filter("datum.on_axis").encode(x=x, color=color)
        layers += [
            base.mark_area(opacity=0.15).encode(y=low, y2="hi:Q").properties(name="budget_band"),
            base.mark_line(strokeWidth=2).encode(y=y).properties(name="budget_line"),
            base.mark_point(filled=True, size=40).encode(y=y, tooltip=tip).properties(name="budget_points"),
        ]
    if not all(r["on_axis"] for r in rows):
        base = (
            alt.Chart()
            .transform_filter("!datum.on_axis")
            .encode(x=x, color=color, xOffset=alt.XOffset("series:N", sort=models))
        )
        layers += [
            base.mark_rule(strokeWidth=1.5).encode(y=low, y2="hi:Q").properties(name="category_interval"),
            base.mark_point(filled=True, size=50, shape="circle")
            .encode(y=y, tooltip=tip)
            .properties(name="category_dots"),
        ]
    chart = alt.layer(*layers, data=_data(rows)).properties(width=WIDTH, height=HEIGHT)
    return Figure(name, _spec(chart, title, "accuracy with 95% intervals per configuration"), data=data or {})


def shift_chart(
    name: str,
    title: str,
    bars: Sequence[tuple[str, str, float, float, float]],
    data: dict[str, str] | None = None,
    series_title: str = "model",
    y_title: str = "net shift in accuracy (points)",
) -> Figure:
    """Net accuracy shift bars ``(series, configuration, diff, lo, hi)`` in points, with their
    Newcombe intervals, one colour per series side by side (BCAS Figure 3)."""
    rows: list[dict[str, Any]] = [
        {"series": s, "config": lab, "diff": _pct(d), "lo": _pct(lo), "hi": _pct(hi)} for s, lab, d, lo, hi in bars
    ]
    if not rows:
        return Figure(name, None, f"{title}: no paired comparison to plot.", data or {})
    series = sorted({r["series"] for r in rows})
    labels = list(dict.fromkeys(r["config"] for r in rows))
    x = alt.X("config:N", title="configuration", sort=labels, axis=alt.Axis(labelAngle=-30, labelLimit=180))
    tip = _interval_tips(series_title, "diff", "shift (points)", "+.1f")
    base = alt.Chart().encode(x=x, xOffset=alt.XOffset("series:N", sort=series))
    chart = alt.layer(
        base.mark_bar().encode(y=alt.Y("diff:Q", title=y_title), color=_color(series_title, series), tooltip=tip),
        base.mark_rule(color="#222").encode(y="lo:Q", y2="hi:Q", tooltip=tip),
        alt.Chart().mark_rule(color="#444").encode(y=alt.datum(0)),
        data=_data(rows),
    ).properties(width=WIDTH, height=HEIGHT)
    return Figure(name, _spec(chart, title, "net shift against the reference with 95% intervals"), data=data or {})


def cost_chart(
    name: str,
    title: str,
    axis_title: str,
    points: Sequence[tuple[str, str, float, float, float, float, bool]],
    money: bool,
    data: dict[str, str] | None = None,
    series_title: str = "model",
) -> Figure:
    """Accuracy (with its interval) against cost; ``points``: (series, label, x, acc, lo, hi, on_frontier).

    Frontier points are ringed and joined by a step line in cost order (everything to its
    lower right costs more for less)."""
    rows: list[dict[str, Any]] = [
        {"series": s, "config": lab, "x": x, "acc": _pct(a), "lo": _pct(lo), "hi": _pct(hi), "frontier": on}
        for s, lab, x, a, lo, hi, on in points
    ]
    if not rows:
        return Figure(name, None, f"{title}: no point to plot (no configuration has a correct answer).", data or {})
    series = sorted({r["series"] for r in rows})
    fmt = "$.3~g" if money else ",.4~g"
    x = alt.X(
        "x:Q",
        title=axis_title,
        scale=alt.Scale(zero=False, nice=True),
        axis=alt.Axis(format=fmt, tickCount=6, labelOverlap=True),
    )
    y = alt.Y("acc:Q", title="accuracy (%)", scale=alt.Scale(domain=[0, 100]))
    tip = [
        *_interval_tips(series_title, "acc", "accuracy %", ".1f"),
        alt.Tooltip("x:Q", title=axis_title, format="$.6~g" if money else ",.6~g"),
        alt.Tooltip("frontier:N", title="on the frontier"),
    ]
    color = _color(series_title, series)
    base = alt.Chart().encode(x=x, color=color)
    front = sorted((r for r in rows if r["frontier"]), key=lambda r: (r["x"], -r["acc"]))
    layers = []
    if len(front) > 1:
        layers.append(
            alt.Chart(_data([{"x": r["x"], "acc": r["acc"], "order": i} for i, r in enumerate(front)]))
            .mark_line(interpolate="step-after", color="#444", strokeDash=[4, 2])
            .encode(x=x, y=y, order="order:Q")
        )
    layers += [
        base.mark_rule(strokeWidth=1.5).encode(y=alt.Y("lo:Q", title="accuracy (%)"), y2="hi:Q"),
        base.mark_point(filled=True, size=60).encode(
            y=y,
            tooltip=tip,
            stroke=alt.condition("datum.frontier", alt.value("#000"), alt.value(None)),
            strokeWidth=alt.condition("datum.frontier", alt.value(1.5), alt.value(0)),
        ),
    ]
    chart = alt.layer(*layers, data=_data(rows)).properties(width=WIDTH, height=HEIGHT)
    return Figure(name, _spec(chart, title, "accuracy against cost with the Pareto frontier"), data=data or {})


def distribution_chart(name: str, series: dict[str, list[float]]) -> Figure:
    """One row per configuration: a tick per item's time, p50 (dot), p95 and p99 (bars)."""
    title = "Time per item by configuration"
    names = sorted(k for k, v in series.items() if v)
    if not names:
        return Figure(name, None, f"{title}: no record holds a time per item.")
    marks = ("item", "p50", "p95", "p99")
    rows: list[dict[str, Any]] = []
    for n in names:
        values = series[n]
        rows += [{"config": n, "mark": "item", "s": v} for v in values]
        rows += [{"config": n, "mark": f"p{q}", "s": percentile(values, q)} for q in (50, 95, 99)]
    y = alt.Y("config:N", title=None, sort=names, axis=alt.Axis(labelLimit=0))
    x = alt.X("s:Q", title="time per item (s)", scale=alt.Scale(zero=True))
    legend = alt.Legend(orient="bottom", title="mark")
    color = alt.Color(
        "mark:N", scale=alt.Scale(domain=list(marks), range=["#1f77b4", "#d62728", "#222222", "#7f7f7f"]), legend=legend
    )
    tip = [alt.Tooltip("config:N", title="configuration"), alt.Tooltip("mark:N"), alt.Tooltip("s:Q", format=".3f")]
    base = alt.Chart().encode(x=x, y=y, color=color, tooltip=tip)
    chart = alt.layer(
        base.transform_filter("datum.mark == 'item'").mark_tick(opacity=0.5, thickness=1),
        base.transform_filter("datum.mark == 'p50'").mark_point(filled=True, size=70),
        base.transform_filter("datum.mark != 'item' && datum.mark != 'p50'").mark_tick(thickness=3, size=22),
        data=_data(rows),
    ).properties(width=WIDTH + 80, height=alt.Step(28))
    return Figure(name, _spec(chart, title + " (ticks: items; dot: p50; bars: p95, p99)"))


def knee_chart(name: str, curves: dict[str, list[dict[str, Any]]]) -> Figure:
    """Throughput (x) against p95 latency (y), one line per configuration, a point per concurrency level."""
    title = "Throughput against p95 latency by concurrency"
    rows: list[dict[str, Any]] = [
        {"series": n, "concurrency": p["concurrency"], "ipm": p["items_per_min"], "p95": p["latency_p95"],
         "n": p["n"]}
        for n, curve in sorted(curves.items())
        for p in curve
        if p["items_per_min"] is not None and p["latency_p95"] is not None
    ]  # fmt: skip
    if len({(r["series"], r["concurrency"]) for r in rows}) < 2:
        return Figure(name, None, f"{title}: fewer than two concurrency levels have a throughput and a p95 latency.")
    series = sorted({r["series"] for r in rows})
    tip = [
        alt.Tooltip("series:N", title="configuration"),
        alt.Tooltip("concurrency:Q"),
        alt.Tooltip("n:Q", title="items"),
        alt.Tooltip("ipm:Q", title="items per minute", format=".1f"),
        alt.Tooltip("p95:Q", title="p95 s", format=".3f"),
    ]
    base = alt.Chart().encode(
        x=alt.X("ipm:Q", title="items per minute"),
        y=alt.Y("p95:Q", title="p95 time per item (s)"),
        color=_color("configuration", series),
        order="concurrency:Q",
    )
    chart = alt.layer(
        base.mark_line(), base.mark_point(filled=True, size=60).encode(tooltip=tip), data=_data(rows)
    ).properties(width=WIDTH, height=HEIGHT)
    return Figure(name, _spec(chart, title))


__all__ = ["cost_chart", "distribution_chart", "knee_chart", "scaling_chart", "shift_chart"]
