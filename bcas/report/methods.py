"""Is agency worth its cost?  The BCAS loop against the methods beside it (BCAS §6.1, §7).

Per grid × model × dataset, computed from the records and the paired comparisons the grid
declares (:mod:`bcas.report.summary`; a method's entry is compared with the loop of its
retrieval mode, ``bcas.grids.baselines``):

* **one row per method** (:class:`MethodRow`): its accuracy and the loop's, the paired
  difference method − loop with the Newcombe (1998) interval, the exact McNemar p-value and
  its Holm adjustment over the grid's family, and what a correct answer costs: dollars
  (cost-of-pass, Erol et al. 2025) where every answer is priced, and tokens (prompt +
  completion) per correct answer, with the mean searches and completion tokens per item;
* **the extra cost per extra correct answer** of the loop over the method of its cell with
  the highest observed accuracy (:class:`ExtraCost`; ties: the cheaper): ``Δcost / Δaccuracy``
  over the items both answered, an incremental cost-effectiveness ratio, with a percentile
  bootstrap interval over items (seeded; a resample in which the loop is no more accurate
  counts as ∞).  Said plainly when no ratio applies: ``cheaper`` when the loop is at least
  as accurate for no more cost, ``∞`` when it costs more and buys no extra correct answer,
  ``cheaper, less accurate`` when it saves cost and loses answers.  The cost is in dollars
  when every record of both is priced (and some cost is above 0), else in tokens.
  No verdict without its evidence (:mod:`bcas.report.verdict`): each of these words needs
  the paired test of the loop against that method to separate them after Holm; otherwise
  the verdict is ``not separable`` and its text says at which n and how many paired items
  80% power would need, beside the per-item cost difference.

The rows are written into ``summary.json`` (``methods``), the report's "Agent against
methods" section and the terminal's lines; they are a pure function of the records.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bcas.grading.outcomes import outcome_fn
from bcas.registry import METHODS
from bcas.report.paired import order_bounds

AGENT_METHOD = "bcas"
BRIDGED_METHOD = "agent"  # the records of an agent that answered through the bridge (bcas.bridge)
N_RESAMPLES = 2000


@dataclass
class MethodRow:
    """One method against the loop of its cell (one grid × model × dataset)."""

    grid: str
    model: str
    dataset: str
    label: str
    method: str
    agent: str
    n_paired: int
    accuracy: float
    agent_accuracy: float
    diff: float  # method − loop, paired
    ci_lo: float
    ci_hi: float
    p_value: float
    p_holm: float
    significant: bool
    verdict: str  # bcas.report.verdict's words on the method against the loop
    mean_searches: float
    mean_tokens_out: float
    mean_tokens: float  # prompt + completion per item
    mean_cost_usd: float | None
    cost_per_correct: float | None  # USD; None: unpriced, or no correct answer
    tokens_per_correct: float | None  # None: no correct answer
    latency_p50_s: float | None = None  # median seconds per item (the summary row's latency_p50)


@dataclass
class ExtraCost:
    """What one more correct answer costs with the loop instead of the method of its cell with the
    highest observed accuracy (``method``)."""

    grid: str
    model: str
    dataset: str
    agent: str
    method: str
    unit: str  # "usd" or "tokens"
    n_paired: int
    agent_accuracy: float
    method_accuracy: float
    extra_correct: float  # per item: accuracy of the loop − of the best method
    extra_cost: float  # per item, in ``unit``
    value: float | None  # per extra correct answer; None when ``verdict`` says why there is none
    lo: float | None  # 95% bootstrap interval (None: unbounded above, or no ratio)
    hi: float | None
    verdict: str  # "ratio", "cheaper", "∞", "cheaper, less accurate", or "not separable"
    separation: str = ""  # bcas.report.verdict's words on the loop against ``method`` (the evidence)

    @property
    def text(self) -> str:
        return extra_cost_text(self)


def _fmt(value: float, unit: str) -> str:
    return f"${value:.6g}" if unit == "usd" else f"{value:,.0f} tokens"


def extra_cost_text(e: ExtraCost | Mapping[str, Any]) -> str:
    """The extra cost per extra correct answer said plainly (from an :class:`ExtraCost` or its dict)."""
    data: Mapping[str, Any] = e if isinstance(e, Mapping) else asdict(e)
    verdict, unit = str(data.get("verdict")), str(data.get("unit"))
    evidence = str(data.get("separation") or "")
    if verdict == "not separable":
        cost = float(data.get("extra_cost") or 0.0)
        return f"{evidence}; the agent's cost per item minus the method's: {'+' if cost >= 0 else '−'}{_fmt(abs(cost), unit)}"
    tail = f" ({evidence})" if evidence else ""
    if verdict == "cheaper":
        return f"cheaper: the agent is more accurate for no more cost{tail}"
    if verdict == "∞":
        return f"∞: the agent costs more and answers fewer items correctly{tail}"
    if verdict == "cheaper, less accurate":
        return f"cheaper, less accurate: the agent saves cost and loses correct answers{tail}"
    lo, hi, value = data.get("lo"), data.get("hi"), data.get("value")
    band = f" (95% CI {'−∞' if lo is None else _fmt(float(lo), unit)} – {'∞' if hi is None else _fmt(float(hi), unit)})"
    return f"{_fmt(float(value or 0.0), unit)} per extra correct answer{band}{tail}"


def _per_item(recs: Iterable[dict[str, Any]], outcome: Any, unit: str) -> dict[str, tuple[float, float]]:
    """Item id -> (mean cost in ``unit``, mean outcome) over its epochs."""
    acc: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in recs:
        graded = outcome(r)
        if graded is None:  # an ungraded answer is left out, as the paired comparison leaves it out
            continue
        cost = (
            float(r.get("cost_usd") or 0.0)
            if unit == "usd"
            else float(r.get("tokens_in") or 0) + float(r.get("tokens_out") or 0)
        )
        acc[str(r.get("item_id"))].append((cost, 1.0 if graded else 0.0))
    return {i: (sum(c for c, _ in v) / len(v), sum(o for _, o in v) / len(v)) for i, v in acc.items()}


def _unit(*groups: list[dict[str, Any]]) -> str:
    costs = [r.get("cost_usd") for g in groups for r in g]
    priced = [float(c) for c in costs if c is not None]
    return "usd" if costs and len(priced) == len(costs) and any(c > 0 for c in priced) else "tokens"


def extra_cost(
    agent: list[dict[str, Any]], best: list[dict[str, Any]], outcome: Any, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> tuple[str, int, float, float, float | None, float | None, float | None, str]:
    """(unit, n, Δaccuracy, Δcost, ratio, lo, hi, verdict) of the loop's records over ``best``'s (module docstring)."""
    unit = _unit(agent, best)
    a, b = _per_item(agent, outcome, unit), _per_item(best, outcome, unit)
    shared = sorted(set(a) & set(b))
    if not shared:
        return unit, 0, 0.0, 0.0, None, None, None, "∞"
    d_cost = np.array([a[i][0] - b[i][0] for i in shared])
    d_acc = np.array([a[i][1] - b[i][1] for i in shared])
    dc, da = float(d_cost.mean()), float(d_acc.mean())
    if da > 0 and dc > 0:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(shared), size=(n_resamples, len(shared)))
        rc, ra = d_cost[idx].mean(axis=1), d_acc[idx].mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(ra > 0, rc / np.where(ra > 0, ra, 1.0), np.inf)
        ratios.sort()
        lo, hi = order_bounds(ratios)  # the paired bootstrap's 95% percentile interval (bcas.report.paired)
        return (
            unit,
            len(shared),
            da,
            dc,
            dc / da,
            lo if math.isfinite(lo) else None,
            hi if math.isfinite(hi) else None,
            "ratio",
        )
    if da >= 0 and dc <= 0:
        verdict = "cheaper"
    elif dc > 0:
        verdict = "∞"
    else:
        verdict = "cheaper, less accurate"
    return unit, len(shared), da, dc, None, None, None, verdict


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def method_comparison(
    records: list[dict[str, Any]],
    rows: Iterable[Any],
    comparisons: Iterable[Any],
    groups: Mapping[tuple[str, str, str, str], list[dict[str, Any]]],
    outcome_of: Any,
) -> tuple[list[MethodRow], list[ExtraCost]]:
    """The method rows and each cell's extra cost per extra correct answer.

    ``rows``/``comparisons``: the summary's (:class:`bcas.report.summary.SummaryRow`,
    ``Comparison``); ``groups``: (grid, model, dataset, label) -> its records;
    ``outcome_of``: grid -> the outcome function of the grid's primary metric.
    A comparison counts when its candidate's records are a registered method's, or a bridged
    agent's (``method`` ``agent``, :mod:`bcas.bridge`), and its reference's the loop's.
    """
    by_key = {(r.grid, r.model, r.dataset, r.label): r for r in rows}
    out: list[MethodRow] = []
    for c in comparisons:
        cand = groups.get((c.grid, c.model, c.dataset, c.label)) or []
        ref = groups.get((c.grid, c.model, c.dataset, c.reference)) or []
        method = str(cand[0].get("method")) if cand else ""
        compared = method in METHODS or method == BRIDGED_METHOD
        if not cand or not ref or not compared or str(ref[0].get("method")) != AGENT_METHOD:
            continue
        row, agent_row = (
            by_key.get((c.grid, c.model, c.dataset, c.label)),
            by_key.get((c.grid, c.model, c.dataset, c.reference)),
        )
        if row is None or agent_row is None:
            continue
        tokens = [float(r.get("tokens_in") or 0) + float(r.get("tokens_out") or 0) for r in cand]
        out.append(
            MethodRow(
                grid=c.grid, model=c.model, dataset=c.dataset, label=c.label, method=method, agent=c.reference,
                n_paired=c.n_paired, accuracy=row.accuracy, agent_accuracy=agent_row.accuracy, diff=c.diff,
                ci_lo=c.ci_lo, ci_hi=c.ci_hi, p_value=c.p_value, p_holm=c.p_holm, significant=c.significant,
                verdict=c.verdict,
                mean_searches=row.mean_searches, mean_tokens_out=row.mean_tokens_out, mean_tokens=_mean(tokens),
                mean_cost_usd=row.mean_cost_usd, cost_per_correct=row.cost_of_pass, tokens_per_correct=row.tokens_of_pass,
                latency_p50_s=getattr(row, "latency_p50", None),
            )
        )  # fmt: skip
    cells: dict[tuple[str, str, str, str], list[MethodRow]] = defaultdict(list)
    for m in out:
        cells[(m.grid, m.model, m.dataset, m.agent)].append(m)
    extras = []
    for (grid, model, dataset, agent), methods in sorted(cells.items()):
        top = max(methods, key=lambda m: (m.accuracy, -m.mean_tokens, m.label))  # highest observed accuracy
        fn = outcome_of(grid)
        unit, n, da, dc, value, lo, hi, verdict = extra_cost(
            groups[(grid, model, dataset, agent)], groups[(grid, model, dataset, top.label)], fn
        )
        if not top.significant:  # no verdict without its evidence (bcas.report.verdict)
            verdict, value, lo, hi = "not separable", None, None, None
        extras.append(
            ExtraCost(grid, model, dataset, agent, top.label, unit, n, top.agent_accuracy, top.accuracy, da, dc,
                      value, lo, hi, verdict, top.verdict)
        )  # fmt: skip
    return out, extras


def methods_of_run(
    records: list[dict[str, Any]],
    rows: Iterable[Any],
    comparisons: Iterable[Any],
    groups: Mapping[tuple[str, str, str, str], list[dict[str, Any]]],
    metrics: Mapping[str, str],
) -> tuple[list[MethodRow], list[ExtraCost]]:
    """:func:`method_comparison` with each grid's outcome from its metric name (``metrics``: grid -> metric)."""
    return method_comparison(records, rows, comparisons, groups, lambda g: outcome_fn(metrics.get(g, "correct_em")))


def agent_rows(rows: Iterable[Any], method_rows: Iterable[MethodRow]) -> list[Any]:
    """The summary rows of the loops the method rows are compared with (for the figure and the tables)."""
    wanted = {(m.grid, m.model, m.dataset, m.agent) for m in method_rows}
    return [r for r in rows if (r.grid, r.model, r.dataset, r.label) in wanted]


def to_payload(method_rows: list[MethodRow], extras: list[ExtraCost]) -> dict[str, Any]:
    """What ``summary.json`` holds under ``methods``."""
    return {
        "rows": [asdict(m) for m in method_rows],
        "extra_cost": [{**asdict(e), "text": e.text} for e in extras],
    }


def method_lines(method_rows: list[MethodRow], extras: list[ExtraCost]) -> list[str]:
    """The terminal's answer: per cell, each method against the loop and the loop's extra cost."""
    lines = []
    for e in extras:
        lines.append(
            f"agent vs methods {e.grid} {e.model} {e.dataset} ({e.agent}): extra cost per extra correct answer "
            f"over {e.method}: {e.text}"
        )
        for m in method_rows:
            if (m.grid, m.model, m.dataset, m.agent) != (e.grid, e.model, e.dataset, e.agent):
                continue
            per = "no correct answer" if m.tokens_per_correct is None else f"{m.tokens_per_correct:,.0f} tokens/correct"
            usd = "" if m.cost_per_correct is None else f", ${m.cost_per_correct:.6g}/correct"
            usd += "" if m.latency_p50_s is None else f", p50 {m.latency_p50_s:.2f} s/item"
            lines.append(
                f"  {m.label}: {m.accuracy * 100:.1f}% vs agent {m.agent_accuracy * 100:.1f}%, "
                f"diff {m.diff * 100:+.1f} [{m.ci_lo * 100:.1f}, {m.ci_hi * 100:.1f}] p_holm={m.p_holm:.3g}"
                f"{' *' if m.significant else ''}; {m.mean_searches:.2f} searches, {m.mean_tokens_out:.0f} completion "
                f"tokens/item; {per}{usd}; {m.verdict}"
            )
    return lines


__all__ = [
    "AGENT_METHOD",
    "ExtraCost",
    "MethodRow",
    "agent_rows",
    "extra_cost",
    "extra_cost_text",
    "method_comparison",
    "method_lines",
    "methods_of_run",
    "to_payload",
]
