"""Inline SVG figures for the HTML report (no plotting library, no network).

``scaling_chart`` draws accuracy against the configurations of a grid (BCAS Figure 2):
configurations on an ordered budget axis (max searches 1, 2, 3, unlimited; 500 ... 16K
tokens) as lines with 95% bands, every other configuration (planning, reflection,
retrieval modes, MADARA treatments) as a dot with its interval, never joined to
anything, since there is no order between them.  ``shift_bars`` draws the net accuracy
shift of each configuration against the reference with Newcombe intervals (BCAS
Figure 3).  ``cost_scatter`` draws accuracy against cost with the Pareto frontier
(:mod:`bcas.report.pareto`).  Every label is escaped before it is written into the SVG.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def _header(title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>',
    ]


def _tick_label(x: float, y: float, text: str) -> str:
    return (
        f'<text x="{x:.1f}" y="{y}" font-size="10" text-anchor="end" '
        f'transform="rotate(-30 {x:.1f} {y})">{escape(text)}</text>'
    )


def _accuracy_scale(left: float, right: float, top: float, ph: float) -> tuple[Callable[[float], float], list[str]]:
    """An accuracy axis: the y of a value in [0, 1] (clamped) on a plot ``ph`` high below ``top``,
    and its grid lines from ``left`` to ``right`` labelled 0, 25, ..., 100."""

    def y(v: float) -> float:
        return top + ph * (1.0 - max(0.0, min(1.0, v)))

    grid = [
        f'<line x1="{left}" x2="{right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>'
        f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="10">{int(tick * 100)}</text>'
        for tick in (0.0, 0.25, 0.5, 0.75, 1.0)
    ]
    return y, grid


def scaling_chart(
    title: str,
    ordered: list[str],
    categorical: list[str],
    series: dict[str, list[tuple[float, float, float] | None]],
    width: int = 600,
    height: int = 300,
) -> str:
    """Accuracy per configuration; ``series[model][i] = (acc, lo, hi)`` or None over ``ordered + categorical``.

    The ``ordered`` configurations (one budget axis, in budget order) are joined by a
    line per model with its interval band; each ``categorical`` one is a dot with an
    interval whisker, models side by side, after a separator.
    """
    left, right, top, bottom = 48.0, 16.0, 28.0, 78.0
    pw, ph = width - left - right, height - top - bottom
    n_ord, n_cat = len(ordered), len(categorical)
    slots = n_ord + n_cat + (0.5 if n_ord and n_cat else 0.0)
    slot = pw / max(slots, 1.0)
    xs = [left + slot * (i + 0.5) for i in range(n_ord)]
    cat0 = left + slot * (n_ord + (0.5 if n_ord else 0.0))
    cxs = [cat0 + slot * (i + 0.5) for i in range(n_cat)]

    y, grid = _accuracy_scale(left, width - right, top, ph)
    parts = [*_header(title, width, height), *grid]
    if n_ord and n_cat:
        sep = cat0 - slot * 0.25
        parts.append(
            f'<line x1="{sep:.1f}" x2="{sep:.1f}" y1="{top}" y2="{top + ph}" stroke="#999" stroke-dasharray="3,3"/>'
        )
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
            parts.append(f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.15" stroke="none"/>')
            line = " ".join(f"{x:.1f},{y(p[0]):.1f}" for x, p in present)
            parts.append(
                f'<polyline class="budget-line" points="{line}" fill="none" stroke="{color}" stroke-width="2"/>'
            )
            for (x, p), cat in zip(
                present, [c for c, q in zip(ordered, points[:n_ord], strict=True) if q], strict=True
            ):
                parts.append(
                    f'<circle cx="{x:.1f}" cy="{y(p[0]):.1f}" r="3" fill="{color}">'
                    f"<title>{escape(name)} · {escape(cat)}: {p[0]:.3f} [{p[1]:.3f}, {p[2]:.3f}]</title></circle>"
                )
        offset = (idx - (len(models) - 1) / 2) * dodge
        for x, cat, est in zip(cxs, categorical, points[n_ord:], strict=True):
            if est is None:
                continue
            cx = x + offset
            parts.append(
                f'<line class="interval" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(est[1]):.1f}" y2="{y(est[2]):.1f}" '
                f'stroke="{color}"/>'
                f'<circle class="category-dot" cx="{cx:.1f}" cy="{y(est[0]):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(name)} · {escape(cat)}: {est[0]:.3f} [{est[1]:.3f}, {est[2]:.3f}]</title></circle>"
            )
        parts.append(
            f'<text x="{width - right}" y="{top + 12 * idx}" font-size="10" text-anchor="end" '
            f'fill="{color}">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def shift_bars(
    title: str,
    bars: list[tuple[str, float, float, float]],
    width: int = 560,
    height: int = 280,
) -> str:
    """Net accuracy shift bars ``(label, diff, lo, hi)`` with interval whiskers, in points."""
    left, right, top, bottom = 48.0, 16.0, 28.0, 80.0
    pw, ph = width - left - right, height - top - bottom
    lo_axis = min([-0.1] + [b[2] for b in bars])
    hi_axis = max([0.1] + [b[3] for b in bars])

    def y(v: float) -> float:
        return top + ph * (hi_axis - v) / (hi_axis - lo_axis)

    parts = [
        *_header(title, width, height),
        f'<line x1="{left}" x2="{width - right}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#444"/>',
    ]
    for tick in (lo_axis, 0.0, hi_axis):
        parts.append(
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="10">{tick * 100:+.0f}</text>'
        )
    n = max(1, len(bars))
    slot = pw / n
    for i, (label, diff, lo, hi) in enumerate(bars):
        cx = left + slot * (i + 0.5)
        bw = slot * 0.5
        y0, y1 = sorted((y(0), y(diff)))
        color = PALETTE[0] if diff >= 0 else PALETTE[1]
        parts.append(
            f'<rect x="{cx - bw / 2:.1f}" y="{y0:.1f}" width="{bw:.1f}" height="{max(1.0, y1 - y0):.1f}" '
            f'fill="{color}"><title>{escape(label)}: {diff * 100:+.1f} [{lo * 100:+.1f}, {hi * 100:+.1f}]'
            f"</title></rect>"
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" stroke="#000"/>'
            f'<text x="{cx:.1f}" y="{top + ph + 14}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {cx:.1f} {top + ph + 14})">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


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
) -> str:
    """Accuracy (with its interval) against cost; ``points``: (model, label, x, acc, lo, hi, on_frontier).

    Frontier points are ringed and joined by a step line in cost order (everything to its
    lower right costs more for less); one colour per model.
    """
    left, right, top, bottom = 56.0, 16.0, 28.0, 44.0
    pw, ph = width - left - right, height - top - bottom
    xs = [p[2] for p in points] or [0.0]
    pad = (max(xs) - min(xs)) * 0.05 or abs(max(xs)) * 0.05 or 1.0
    x_min, x_max = max(0.0, min(xs) - pad), max(xs) + pad

    def x(v: float) -> float:
        return left + pw * (v - x_min) / (x_max - x_min)

    y, grid = _accuracy_scale(left, width - right, top, ph)
    parts = [*_header(title, width, height), *grid]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        tick = x_min + frac * (x_max - x_min)
        parts.append(
            f'<text x="{x(tick):.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">'
            f"{escape(_fmt_axis(tick, money))}</text>"
        )
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" font-size="11" text-anchor="middle">{escape(axis_label)}</text>'
    )
    front = sorted((p for p in points if p[6]), key=lambda p: (p[2], -p[3]))
    if len(front) > 1:
        steps = []
        for i, p in enumerate(front):
            if i:
                steps.append(f"{x(p[2]):.1f},{y(front[i - 1][3]):.1f}")
            steps.append(f"{x(p[2]):.1f},{y(p[3]):.1f}")
        parts.append(
            f'<polyline class="frontier" points="{" ".join(steps)}" fill="none" stroke="#444" stroke-dasharray="4,2"/>'
        )
    models = sorted({p[0] for p in points})
    for idx, model in enumerate(models):
        color = PALETTE[idx % len(PALETTE)]
        for _, label, xv, acc, lo, hi, on in (p for p in points if p[0] == model):
            cx = x(xv)
            ring = ' stroke="#000" stroke-width="1.5"' if on else ""
            parts.append(
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" stroke="{color}"/>'
                f'<circle class="{"on-frontier" if on else "point"}" cx="{cx:.1f}" cy="{y(acc):.1f}" r="4" '
                f'fill="{color}"{ring}><title>{escape(model)} · {escape(label)}: {acc:.3f} [{lo:.3f}, {hi:.3f}] '
                f"at {escape(f'{xv:.6g}' if money else _fmt_axis(xv, False))}</title></circle>"
            )
        parts.append(
            f'<text x="{width - right}" y="{top + 12 * idx}" font-size="10" text-anchor="end" '
            f'fill="{color}">{escape(model)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
