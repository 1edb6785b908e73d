"""Inline SVG figures for the HTML report (no plotting library, no network).

``line_chart`` draws accuracy against the configurations of a scaling grid with
95% Wilson bands (BCAS Figure 2); ``shift_bars`` draws the net accuracy shift of
each configuration against the reference with Newcombe intervals (BCAS Figure 3).
Every label is escaped before it is written into the SVG.
"""

from __future__ import annotations

from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def _x_positions(n: int, left: float, width: float) -> list[float]:
    if n == 1:
        return [left + width / 2]
    return [left + i * width / (n - 1) for i in range(n)]


def line_chart(
    title: str,
    categories: list[str],
    series: dict[str, list[tuple[float, float, float] | None]],
    width: int = 560,
    height: int = 300,
) -> str:
    """Accuracy lines with CI bands; ``series[name][i] = (acc, lo, hi)`` or None."""
    left, right, top, bottom = 48.0, 16.0, 28.0, 70.0
    pw, ph = width - left - right, height - top - bottom
    xs = _x_positions(len(categories), left + 10, pw - 20)

    def y(v: float) -> float:
        return top + ph * (1.0 - max(0.0, min(1.0, v)))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="10">{int(tick * 100)}</text>'
        )
    for x, cat in zip(xs, categories, strict=True):
        parts.append(
            f'<text x="{x:.1f}" y="{top + ph + 14}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {x:.1f} {top + ph + 14})">{escape(cat)}</text>'
        )
    for idx, (name, points) in enumerate(sorted(series.items())):
        color = PALETTE[idx % len(PALETTE)]
        present = [(x, p) for x, p in zip(xs, points, strict=True) if p is not None]
        if not present:
            continue
        upper = " ".join(f"{x:.1f},{y(p[2]):.1f}" for x, p in present)
        lower = " ".join(f"{x:.1f},{y(p[1]):.1f}" for x, p in reversed(present))
        parts.append(f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.15" stroke="none"/>')
        line = " ".join(f"{x:.1f},{y(p[0]):.1f}" for x, p in present)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, p in present:
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y(p[0]):.1f}" r="3" fill="{color}">'
                f"<title>{escape(name)}: {p[0]:.3f} [{p[1]:.3f}, {p[2]:.3f}]</title></circle>"
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
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>',
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
