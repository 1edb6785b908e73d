"""Cost against accuracy: one point per model × configuration, and the Pareto frontier.

BCAS §3.7 keeps a cost ledger "so practitioners can recompute dollar metrics"; this
module answers the question the ledger is for: which configurations buy accuracy
cheaply.  Per dataset (and metric), each model × configuration of the run is a point
(mean cost per item, accuracy with its interval).  When any point of a panel has no
known cost, or every cost is 0 (no price applies: self-hosted models, ``--bcas-prices
none``), the panel uses mean completion tokens per item instead, so the axis always
means one thing for every point of a panel.

The same view can use the **cost of a correct answer** instead (``panels(rows,
per_pass=True)``): cost-of-pass, mean cost / accuracy (Erol et al. 2025, eq. 1;
:mod:`bcas.metrics.cost`), with its bootstrap interval, when every point is priced, else
tokens-of-pass (prompt + completion tokens per correct answer).  A configuration with no
correct answer has no finite cost-of-pass: it is left out of the panel and named in
``Panel.excluded``.

A point is on the frontier when no other point is at most as costly and at least as
accurate, and strictly better in one of the two.  :func:`cheapest_within` answers "the
cheapest configuration within X points of the highest observed accuracy".  Both read
point estimates: whether the top point is ahead of another is said only by the paired
test (:func:`verdicts_against_top`, worded by :mod:`bcas.report.verdict`).  Everything but
those verdicts is computed from summary rows (``summary.json``), so anyone can recompute
it from the file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bcas.grading.outcomes import outcome_fn
from bcas.report.paired import paired_table, per_item_means
from bcas.report.verdict import paired_verdict
from bcas.stats import holm_bonferroni, mcnemar_exact

COST = "cost"  # mean cost per item, US dollars
TOKENS = "tokens"  # mean completion tokens per item
COST_OF_PASS = "cost_of_pass"  # mean cost / accuracy, US dollars per correct answer
TOKENS_OF_PASS = "tokens_of_pass"  # (prompt + completion) tokens per correct answer
AXIS_NAMES = {
    COST: "mean cost per item (USD)",
    TOKENS: "mean completion tokens per item",
    COST_OF_PASS: "cost per correct answer (USD, cost-of-pass)",
    TOKENS_OF_PASS: "tokens per correct answer (tokens-of-pass)",
}
MONEY_AXES = (COST, COST_OF_PASS)


@dataclass(frozen=True)
class Point:
    """One model × configuration on one dataset."""

    model: str
    label: str
    grid: str
    dataset: str
    config_id: str
    metric: str
    accuracy: float
    ci_lo: float
    ci_hi: float
    n: int
    x: float  # the panel's axis: mean cost or mean completion tokens, or their cost of a correct answer
    x_lo: float | None = None  # per-pass axes: the 95% bootstrap interval (None: unbounded or unknown)
    x_hi: float | None = None
    items_note: str = ""  # "20 of 50 items; ..." when the case evaluated fewer items than its file holds

    @property
    def key(self) -> tuple[str, str]:
        return (self.model, self.config_id)


@dataclass(frozen=True)
class Panel:
    dataset: str
    metric: str
    axis: str  # COST, TOKENS, COST_OF_PASS or TOKENS_OF_PASS
    points: tuple[Point, ...]
    excluded: tuple[str, ...] = ()  # per-pass axes: "model · label" of points with no correct answer

    @property
    def frontier(self) -> list[Point]:
        return frontier(self.points)


def _get(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)


def axis_for(rows: Iterable[Any]) -> str:
    """COST when every row has a known mean cost and some cost is above 0, else TOKENS."""
    costs = [_get(r, "mean_cost_usd") for r in rows]
    if costs and all(c is not None for c in costs) and any(float(c) > 0 for c in costs):
        return COST
    return TOKENS


def panels(rows: Iterable[Any], per_pass: bool = False) -> list[Panel]:
    """Points per (dataset, metric) from summary rows (``SummaryRow`` or ``summary.json`` dicts).

    A configuration listed under several grids (the same answers) is one point, named by
    the first grid it appears in.  ``per_pass``: the x axis is the cost (or tokens) of a
    correct answer (module docstring).
    """
    by_panel: dict[tuple[str, str], dict[tuple[str, str], Any]] = defaultdict(dict)
    for row in rows:
        if not int(_get(row, "n") or 0):
            continue
        key = (str(_get(row, "dataset")), str(_get(row, "metric") or "correct_em"))
        by_panel[key].setdefault((str(_get(row, "model")), str(_get(row, "config_id"))), row)
    out = []
    for (dataset, metric), chosen in sorted(by_panel.items()):
        axis = axis_for(chosen.values())
        if per_pass:
            axis = COST_OF_PASS if axis == COST else TOKENS_OF_PASS
        points, excluded = [], []
        for row in chosen.values():
            x = _get(row, {COST: "mean_cost_usd", TOKENS: "mean_tokens_out"}.get(axis, axis))
            if per_pass and x is None:
                excluded.append(f"{_get(row, 'model')} · {_get(row, 'label')}")
                continue
            bounds = (_get(row, f"{axis}_lo"), _get(row, f"{axis}_hi")) if per_pass else (None, None)
            points.append(
                Point(
                    model=str(_get(row, "model")),
                    label=str(_get(row, "label")),
                    grid=str(_get(row, "grid")),
                    dataset=dataset,
                    config_id=str(_get(row, "config_id")),
                    metric=metric,
                    accuracy=float(_get(row, "accuracy")),
                    ci_lo=float(_get(row, "ci_lo")),
                    ci_hi=float(_get(row, "ci_hi")),
                    n=int(_get(row, "n")),
                    x=float(x or 0.0),
                    x_lo=None if bounds[0] is None else float(bounds[0]),
                    x_hi=None if bounds[1] is None else float(bounds[1]),
                    items_note=str(_get(row, "items_note") or ""),
                )
            )
        points.sort(key=lambda p: (p.x, -p.accuracy, p.model, p.label))
        out.append(Panel(dataset, metric, axis, tuple(points), tuple(excluded)))
    return out


def frontier(points: Iterable[Point]) -> list[Point]:
    """The points no other point dominates (is at most as costly and at least as accurate
    as, and strictly better in one), cheapest first (one sweep over points sorted by cost)."""
    ordered = sorted(points, key=lambda p: (p.x, -p.accuracy))
    out: list[Point] = []
    best = float("-inf")
    i = 0
    while i < len(ordered):
        # Points of equal cost: only the most accurate of them can be on the frontier (and its ties).
        j = i
        while j < len(ordered) and ordered[j].x == ordered[i].x:
            j += 1
        top = ordered[i].accuracy
        if top > best:
            out.extend(p for p in ordered[i:j] if p.accuracy == top)
            best = top
        i = j
    return out


def cheapest_within(points: Iterable[Point], points_below_best: float) -> Point | None:
    """The cheapest point whose accuracy is at most ``points_below_best`` percentage points under the best.

    Ties in cost go to the more accurate point.  ``None`` for no points.
    """
    pts = list(points)
    if not pts:
        return None
    best = max(p.accuracy for p in pts)
    # Accuracies are fractions; a tolerance keeps "exactly X points below" inside the band.
    eligible = [p for p in pts if p.accuracy >= best - points_below_best / 100.0 - 1e-12]
    return min(eligible, key=lambda p: (p.x, -p.accuracy, p.model, p.label))


def top_point(points: Iterable[Point]) -> Point | None:
    """The point with the highest observed accuracy (ties: the cheaper, then by name)."""
    return min(points, key=lambda p: (-p.accuracy, p.x, p.model, p.label), default=None)


def verdicts_against_top(
    panel: Panel, records: Iterable[dict[str, Any]], alpha: float = 0.05
) -> dict[tuple[str, str], str]:
    """Point key -> what the paired test says of it against the panel's :func:`top_point`.

    The "cheapest within X points" answer and the frontier read point estimates; whether
    the point with the highest observed accuracy is ahead of another is said only by the
    paired test: exact McNemar on the items both answered, Holm over the panel's points
    against it, worded by :func:`bcas.report.verdict.paired_verdict`.  The top point
    itself gets "the highest observed accuracy".  A point whose records cannot be found
    (a model shown with a fingerprint) gets no text.
    """
    top = top_point(panel.points)
    if top is None:
        return {}
    by_point: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_point[(str(rec.get("model")), str(rec.get("dataset")), str(rec.get("config_id")))].append(rec)
    fn = outcome_fn(panel.metric)

    def items(p: Point) -> dict[str, bool]:
        return {i: m >= 1.0 for i, m in per_item_means(by_point.get((p.model, p.dataset, p.config_id), []), fn).items()}

    top_items = items(top)
    others = [p for p in panel.points if p.key != top.key]
    tables = {p.key: paired_table(items(p), top_items) for p in others}
    _, adjusted = holm_bonferroni([mcnemar_exact(t[1], t[2]) for t in tables.values()], alpha)
    out = {top.key: "the highest observed accuracy"} if top_items else {}
    top_name = f"{top.model} · {top.label}"
    for p, p_holm in zip(others, adjusted, strict=True):
        a, b, c, d = tables[p.key]
        if not top_items or a + b + c + d == 0:
            continue
        found = paired_verdict(f"{p.model} · {p.label}", top_name, b, c, a + b + c + d, p_holm, alpha, len(others))
        out[p.key] = f"against the highest observed accuracy ({top_name}): {found.text}"
    return out


def to_dict(panel: Panel) -> dict[str, Any]:
    """A panel as plain data (``summary.json``-style) with its frontier."""

    def plain(p: Point) -> dict[str, Any]:
        return {
            "model": p.model,
            "label": p.label,
            "grid": p.grid,
            "config_id": p.config_id,
            "x": p.x,
            "x_lo": p.x_lo,
            "x_hi": p.x_hi,
            "accuracy": p.accuracy,
            "ci_lo": p.ci_lo,
            "ci_hi": p.ci_hi,
            "n": p.n,
        }

    return {
        "dataset": panel.dataset,
        "metric": panel.metric,
        "axis": panel.axis,
        "points": [plain(p) for p in panel.points],
        "frontier": [plain(p) for p in panel.frontier],
        "excluded": list(panel.excluded),
    }
