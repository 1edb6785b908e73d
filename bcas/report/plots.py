"""Inline SVG figures for the HTML report (no plotting library, no network).

``scaling_chart`` draws accuracy against the configurations of a grid (BCAS Figure 2):
configurations on an ordered budget axis (max searches 1, 2, 3, unlimited; 500 ... 16K
tokens) as lines with 95% bands, every other configuration (planning, reflection,
retrieval modes, MADARA treatments) as a dot with its interval, never joined to
anything, since there is no order between them.  ``shift_bars`` draws the net accuracy
shift of each configuration against the reference with Newcombe intervals (BCAS
Figure 3).  ``cost_scatter`` draws accuracy against cost with the Pareto frontier
(:mod:`bcas.report.pareto`).  Every element is built by
:func:`bcas.report.templating.element`, which escapes every label and attribute value.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from markupsafe import Markup

from bcas.report.templating import element as el

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def _f(v: float) -> str:
    return f"{v:.1f}"


def svg_chart(title: str, width: int, height: int, parts: list[Markup]) -> Markup:
    # a long title is set smaller (about 0.58 em a character) rather than cut at the chart's edges
    size = max(9.0, min(13.0, (width - 8) / (0.58 * max(len(title), 1))))
    head = el("text", {"x": width / 2, "y": 16, "text_anchor": "middle", "font_size": f"{size:.1f}"}, [title])
    attrs = {"xmlns": "http://www.w3.org/2000/svg", "width": width, "height": height, "role": "img"}
    return el("svg", {**attrs, "aria_label": title}, [head, *parts])


def _tick_label(x: float, y: float, text: str) -> Markup:
    attrs = {"x": _f(x), "y": y, "font_size": 10, "text_anchor": "end", "transform": f"rotate(-30 {_f(x)} {y})"}
    return el("text", attrs, [text])


def _accuracy_scale(left: float, right: float, top: float, ph: float) -> tuple[Callable[[float], float], list[Markup]]:
    """An accuracy axis: the y of a value in [0, 1] (clamped) on a plot ``ph`` high below ``top``,
    and its grid lines from ``left`` to ``right`` labelled 0, 25, ..., 100."""

    def y(v: float) -> float:
        return top + ph * (1.0 - max(0.0, min(1.0, v)))

    grid: list[Markup] = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        grid.append(el("line", {"x1": left, "x2": right, "y1": _f(y(tick)), "y2": _f(y(tick)), "stroke": "#ddd"}))
        label = {"x": left - 6, "y": _f(y(tick) + 4), "text_anchor": "end", "font_size": 10}
        grid.append(el("text", label, [str(int(tick * 100))]))
    return y, grid


LEGEND_ROW = 14.0  # pixels per row of the legend under a chart


def _legend_layout(names: list[str], width: float, left: float) -> list[tuple[float, int]]:
    """Each name's x and row in a legend under the plot, wrapped at ``width`` (about 6 px a character)."""
    out, x, row = [], left, 0
    for name in names:
        span = 18 + 6.2 * len(name)
        if x > left and x + span > width - 8:
            x, row = left, row + 1
        out.append((x, row))
        x += span + 14
    return out


def _legend(names: list[str], width: float, left: float, top: float) -> tuple[list[Markup], float]:
    """A legend under the plot, starting at ``top``: a coloured dot and the name per series,
    so it never covers a point; returns its elements and its height."""
    if not names:
        return [], 0.0
    placed = _legend_layout(names, width, left)
    parts = []
    for idx, (name, (x, row)) in enumerate(zip(names, placed, strict=True)):
        color = PALETTE[idx % len(PALETTE)]
        y = top + LEGEND_ROW * row
        parts.append(el("circle", {"class_": "legend", "cx": _f(x + 5), "cy": _f(y - 3.5), "r": 4, "fill": color}))
        parts.append(el("text", {"x": _f(x + 13), "y": _f(y), "font_size": 10, "fill": "#222"}, [name]))
    return parts, LEGEND_ROW * (placed[-1][1] + 1)


def _axis_titles(left: float, top: float, pw: float, ph: float, x_y: float, x_title: str, y_title: str) -> list[Markup]:
    """The axis titles: ``x_title`` centred under the plot at ``x_y``, ``y_title`` up the left edge."""
    cy = top + ph / 2
    y_attrs = {"class_": "axis-title", "x": 12, "y": _f(cy), "font_size": 11, "text_anchor": "middle"}
    x_attrs = {"class_": "axis-title", "x": _f(left + pw / 2), "y": _f(x_y), "font_size": 11, "text_anchor": "middle"}
    return [
        el("text", {**y_attrs, "transform": f"rotate(-90 12 {_f(cy)})"}, [y_title]),
        el("text", x_attrs, [x_title]),
    ]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten apart) from at or below ``lo`` to
    at or above ``hi``, about ``count`` of them."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def scaling_chart(
    title: str,
    ordered: list[str],
    categorical: list[str],
    series: dict[str, list[tuple[float, float, float] | None]],
    width: int = 600,
    height: int = 300,
) -> Markup:
    """Accuracy per configuration; ``series[model][i] = (acc, lo, hi)`` or None over ``ordered + categorical``.

    The ``ordered`` configurations (one budget axis, in budget order) are joined by a
    line per model with its interval band; each ``categorical`` one is a dot with an
    interval whisker, models side by side, after a separator.
    """
    left, right, top, bottom = 56.0, 16.0, 28.0, 96.0
    legend, legend_h = _legend(sorted(series), width, left, height + 4)
    pw, ph = width - left - right, height - top - bottom
    n_ord, n_cat = len(ordered), len(categorical)
    slots = n_ord + n_cat + (0.5 if n_ord and n_cat else 0.0)
    slot = pw / max(slots, 1.0)
    xs = [left + slot * (i + 0.5) for i in range(n_ord)]
    cat0 = left + slot * (n_ord + (0.5 if n_ord else 0.0))
    cxs = [cat0 + slot * (i + 0.5) for i in range(n_cat)]

    y, parts = _accuracy_scale(left, width - right, top, ph)
    if n_ord and n_cat:
        sep = _f(cat0 - slot * 0.25)
        attrs = {"x1": sep, "x2": sep, "y1": top, "y2": top + ph, "stroke": "#999", "stroke_dasharray": "3,3"}
        parts.append(el("line", attrs))
    for x, cat in zip(xs + cxs, ordered + categorical, strict=True):
        parts.append(_tick_label(x, top + ph + 14, cat))
    models = sorted(series)
    dodge = slot * 0.5 / max(len(models), 1)
    for idx, name in enumerate(models):
        color = PALETTE[idx % len(PALETTE)]
        points = series[name]
        present = [(x, p) for x, p in zip(xs, points[:n_ord], strict=True) if p is not None]
        if present:
            upper = " ".join(f"{x:.1f},{y(p[2]):.1f}" for x, p in present)
            lower = " ".join(f"{x:.1f},{y(p[1]):.1f}" for x, p in reversed(present))
            band = {"points": f"{upper} {lower}", "fill": color, "fill_opacity": "0.15", "stroke": "none"}
            parts.append(el("polygon", band))
            line = " ".join(f"{x:.1f},{y(p[0]):.1f}" for x, p in present)
            attrs = {"class_": "budget-line", "points": line, "fill": "none", "stroke": color, "stroke_width": 2}
            parts.append(el("polyline", attrs))
            for (x, p), cat in zip(
                present, [c for c, q in zip(ordered, points[:n_ord], strict=True) if q], strict=True
            ):
                tip = el("title", {}, [f"{name} · {cat}: {p[0]:.3f} [{p[1]:.3f}, {p[2]:.3f}]"])
                parts.append(el("circle", {"cx": _f(x), "cy": _f(y(p[0])), "r": 3, "fill": color}, [tip]))
        offset = (idx - (len(models) - 1) / 2) * dodge
        for x, cat, est in zip(cxs, categorical, points[n_ord:], strict=True):
            if est is None:
                continue
            cx = _f(x + offset)
            whisker = {"class_": "interval", "x1": cx, "x2": cx, "y1": _f(y(est[1])), "y2": _f(y(est[2]))}
            parts.append(el("line", {**whisker, "stroke": color}))
            tip = el("title", {}, [f"{name} · {cat}: {est[0]:.3f} [{est[1]:.3f}, {est[2]:.3f}]"])
            dot = {"class_": "category-dot", "cx": cx, "cy": _f(y(est[0])), "r": "3.5", "fill": color}
            parts.append(el("circle", dot, [tip]))
    parts += _axis_titles(left, top, pw, ph, height - 8, "configuration", "accuracy (%)")
    return svg_chart(title, width, int(height + legend_h + 8), parts + legend)


def shift_bars(
    title: str,
    bars: list[tuple[str, float, float, float]],
    width: int = 560,
    height: int = 280,
) -> Markup:
    """Net accuracy shift bars ``(label, diff, lo, hi)`` with interval whiskers, in points."""
    left, right, top, bottom = 56.0, 16.0, 28.0, 96.0
    pw, ph = width - left - right, height - top - bottom
    # round ticks in points over every interval and zero (a shift of 0 is always on the axis)
    ticks = [
        t / 100 for t in nice_ticks(min([-10.0] + [b[2] * 100 for b in bars]), max([10.0] + [b[3] * 100 for b in bars]))
    ]
    lo_axis, hi_axis = ticks[0], ticks[-1]

    def y(v: float) -> float:
        return top + ph * (hi_axis - v) / (hi_axis - lo_axis)

    parts = []
    for tick in ticks:
        line = {"x1": left, "x2": width - right, "y1": _f(y(tick)), "y2": _f(y(tick)), "stroke": "#eee"}
        parts.append(el("line", line))
        at = {"class_": "y-tick", "x": left - 6, "y": _f(y(tick) + 4), "text_anchor": "end", "font_size": 10}
        parts.append(el("text", at, [f"{tick * 100:+.0f}" if tick else "0"]))
    parts.append(el("line", {"x1": left, "x2": width - right, "y1": _f(y(0)), "y2": _f(y(0)), "stroke": "#444"}))
    n = max(1, len(bars))
    slot = pw / n
    for i, (label, diff, lo, hi) in enumerate(bars):
        cx = left + slot * (i + 0.5)
        bw = slot * 0.5
        y0, y1 = sorted((y(0), y(diff)))
        color = PALETTE[0] if diff >= 0 else PALETTE[1]
        tip = el("title", {}, [f"{label}: {diff * 100:+.1f} [{lo * 100:+.1f}, {hi * 100:+.1f}]"])
        rect = {"x": _f(cx - bw / 2), "y": _f(y0), "width": _f(bw), "height": _f(max(1.0, y1 - y0)), "fill": color}
        parts.append(el("rect", rect, [tip]))
        parts.append(el("line", {"x1": _f(cx), "x2": _f(cx), "y1": _f(y(lo)), "y2": _f(y(hi)), "stroke": "#000"}))
        parts.append(_tick_label(cx, top + ph + 14, label))
    parts += _axis_titles(left, top, pw, ph, height - 8, "configuration", "shift vs reference (pts)")
    return svg_chart(title, width, height, parts)


def _fmt_axis(v: float, money: bool) -> str:
    if money:
        return f"{v:.3g}" if v else "0"
    return f"{v:,.0f}" if v >= 10 else f"{v:.2g}"


def cost_scatter(
    title: str,
    axis_label: str,
    points: list[tuple[str, str, float, float, float, float, bool]],
    money: bool,
    width: int = 600,
    height: int = 320,
) -> Markup:
    """Accuracy (with its interval) against cost; ``points``: (model, label, x, acc, lo, hi, on_frontier).

    Frontier points are ringed and joined by a step line in cost order (everything to its
    lower right costs more for less); one colour per model.
    """
    left, right, top, bottom = 56.0, 36.0, 36.0, 44.0
    pw, ph = width - left - right, height - top - bottom
    models = sorted({p[0] for p in points})
    legend, legend_h = _legend(models, width, left, height + 4)  # under the plot: never on a point
    xs = [p[2] for p in points] or [0.0]
    pad = (max(xs) - min(xs)) * 0.08 or abs(max(xs)) * 0.08 or 1.0
    ticks = nice_ticks(max(0.0, min(xs) - pad), max(xs) + pad)
    x_min, x_max = ticks[0], ticks[-1]  # the axis starts and ends on round ticks
    if x_max <= x_min:
        x_max = x_min + 1.0

    def x(v: float) -> float:
        return left + pw * (v - x_min) / (x_max - x_min)

    y, parts = _accuracy_scale(left, width - right, top, ph)
    decimals = max(0, -math.floor(math.log10(ticks[1] - ticks[0]) + 1e-9) + 1) if len(ticks) > 1 else 2
    for tick in ticks:
        at = {"class_": "x-tick", "x": _f(x(tick)), "y": top + ph + 14, "font_size": 10, "text_anchor": "middle"}
        shown = f"{tick:.{decimals}f}".rstrip("0").rstrip(".") if money else _fmt_axis(tick, False)
        parts.append(el("text", at, [shown]))
    parts += _axis_titles(left, top, pw, ph, height - 6, axis_label, "accuracy (%)")
    front = sorted((p for p in points if p[6]), key=lambda p: (p[2], -p[3]))
    if len(front) > 1:
        steps = []
        for i, p in enumerate(front):
            if i:
                steps.append(f"{x(p[2]):.1f},{y(front[i - 1][3]):.1f}")
            steps.append(f"{x(p[2]):.1f},{y(p[3]):.1f}")
        line = {"class_": "frontier", "points": " ".join(steps), "fill": "none", "stroke": "#444"}
        parts.append(el("polyline", {**line, "stroke_dasharray": "4,2"}))
    labels = _point_labels(points, x, y, left + pw)
    for idx, model in enumerate(models):
        color = PALETTE[idx % len(PALETTE)]
        for _, label, xv, acc, lo, hi, on in (p for p in points if p[0] == model):
            cx = _f(x(xv))
            parts.append(el("line", {"x1": cx, "x2": cx, "y1": _f(y(lo)), "y2": _f(y(hi)), "stroke": color}))
            shown = f"{xv:.6g}" if money else _fmt_axis(xv, False)
            tip = el("title", {}, [f"{model} · {label}: {acc:.3f} [{lo:.3f}, {hi:.3f}] at {shown}"])
            dot = {"class_": "on-frontier" if on else "point", "cx": cx, "cy": _f(y(acc)), "r": 4, "fill": color}
            ring = {"stroke": "#000", "stroke_width": "1.5"} if on else {}
            parts.append(el("circle", {**dot, **ring}, [tip]))
    for lx, ly, anchor, text in labels:
        tag = {"class_": "point-label", "x": _f(lx), "y": _f(ly), "font_size": 9, "text_anchor": anchor}
        parts.append(el("text", tag, [text]))
    return svg_chart(title, width, int(height + legend_h + 8), parts + legend)


Scaled = Callable[[float], float]


def _point_labels(
    points: list[tuple[str, str, float, float, float, float, bool]], x: Scaled, y: Scaled, x_end: float
) -> list[tuple[float, float, str, str]]:
    """Labels (x, y, anchor, configuration) beside the points, frontier points first; a label that
    would cover one already placed is left out (the point's tooltip and the table below name it)."""
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for _, label, xv, acc, *_rest in sorted(points, key=lambda p: (not p[6], p[2], -p[3])):
        px, py = x(xv), y(acc)
        span = 5.2 * len(label)
        for dx, dy in ((7, -5), (7, 12), (-7, -5), (-7, 12)):
            x0 = px + dx if dx > 0 else px + dx - span
            box = (x0, py + dy - 9, x0 + span, py + dy + 2)
            inside = x0 >= 0 and box[2] <= x_end + 30
            if inside and not any(_overlap(box, other) for other in placed):
                placed.append(box)
                out.append((px + dx, py + dy, "start" if dx > 0 else "end", label))
                break
    return out


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
