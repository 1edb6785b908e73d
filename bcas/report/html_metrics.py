"""Beyond accuracy in the report: a table per row, terminal lines, a trajectory panel per record.

The numbers are the summary rows' :class:`bcas.metrics.columns.MetricColumns` (evidence
and trajectory, SimpleQA's three-way grading, pass@k / pass^k and flips over epochs,
cost-of-pass / tokens-of-pass); the trajectory panel reads what the harness stored in a
record's ``extra`` (recall after each search, the gold documents each search returned).
Rendered from templates with autoescaping (:mod:`bcas.report.templating`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from bcas.report.html_interactive import fr_data
from bcas.report.summary import SummaryRow
from bcas.report.templating import render


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "—" if v is None else format(v, fmt)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v * 100:.1f}"


def _interval(v: float | None, lo: float | None, hi: float | None, fmt: str, scale: float = 1.0) -> str:
    """``v [lo, hi]``; an infinite value or bound (``None`` beside a finite value) is ``∞``."""
    if v is None and lo is None:
        return "—"

    def one(x: float | None) -> str:
        return "∞" if x is None else format(x * scale, fmt)

    return f"{one(v)} [{one(lo)}, {one(hi)}]"


def _steps(curve: Sequence[float]) -> str:
    return " → ".join(f"{x * 100:.0f}" for x in curve) if curve else "—"


def row_cells(r: SummaryRow) -> list[str]:
    """The beyond-accuracy cells of one row (plain text; the template escapes it)."""
    k = r.pass_k
    return [
        str(r.gold_n),
        str(r.gold_unmapped),
        _pct(r.evidence_recall),
        _steps(r.recall_at_step),
        _num(r.first_gold_step),
        _num(r.redundant_searches),
        _num(r.wasted_searches),
        f"{_pct(r.kept_precision)} / {_pct(r.kept_recall)}",
        f"{r.n_correct} / {r.n_incorrect} / {r.n_not_attempted}",
        _pct(r.accuracy_given_attempted),
        _pct(r.f_score),
        f"k={k}: " + _interval(r.pass_at_k, r.pass_at_k_lo, r.pass_at_k_hi, ".1f", 100) if k else "—",
        f"k={k}: " + _interval(r.pass_hat_k, r.pass_hat_k_lo, r.pass_hat_k_hi, ".1f", 100) if k else "—",
        _pct(r.flip_share),
        _interval(r.cost_of_pass, r.cost_of_pass_lo, r.cost_of_pass_hi, ".4f"),
        _interval(r.tokens_of_pass, r.tokens_of_pass_lo, r.tokens_of_pass_hi, ".0f"),
        f"{_pct(r.citation_precision)} / {_pct(r.citation_recall)} (n={r.cite_n})" if r.cite_n else "—",
    ]


HEADERS = [
    "grid",
    "model",
    "dataset",
    "config",
    "gold n",
    "gold unmapped",
    "evidence recall %",
    "recall % after search 1 → 2 → …",
    "first gold search",
    "redundant searches",
    "wasted searches",
    "kept precision / recall %",
    "correct / incorrect / not attempted",
    "acc. given attempted %",
    "F-score %",
    "pass@k % [95%]",
    "pass^k % [95%]",
    "flips %",
    "cost-of-pass $ [95%]",
    "tokens-of-pass [95%]",
    "citation precision / recall %",
]


def metrics_section(rows: Sequence[SummaryRow]) -> Markup:
    """The "Beyond accuracy" table (one line per summary row)."""
    if not rows:
        return Markup()
    body = [
        {
            "cells": [r.grid, r.model, r.dataset, r.label, *row_cells(r)],
            "cls": "fr",
            "data": fr_data(grid=r.grid, model=r.model, dataset=r.dataset, config=r.label),
        }
        for r in rows
    ]
    return render("metrics.html", headers=HEADERS, rows=body)


def metric_lines(rows: Sequence[SummaryRow]) -> list[str]:
    """Terminal lines: one per summary row with its beyond-accuracy numbers."""
    out = []
    for r in rows:
        c = row_cells(r)
        parts = [f"  {r.grid}/{r.model}/{r.dataset}/{r.label}:"]
        if r.gold_n:
            parts.append(f"evidence recall {c[2]}% (per search {c[3]}), first gold search {c[4]}, wasted {c[6]},")
        if r.gold_unmapped:
            parts.append(f"{r.gold_unmapped} gold refs unmapped,")
        if r.kept_precision is not None or r.kept_recall is not None:
            parts.append(f"kept precision/recall {c[7]}%,")
        if r.cite_n:
            parts.append(f"citation precision/recall {c[16]},")
        parts.append(f"redundant {c[5]}, correct/incorrect/not attempted {c[8]}, F-score {c[10]}%,")
        if r.pass_k > 1:
            at_k = _interval(r.pass_at_k, r.pass_at_k_lo, r.pass_at_k_hi, ".1f", 100)
            hat_k = _interval(r.pass_hat_k, r.pass_hat_k_lo, r.pass_hat_k_hi, ".1f", 100)
            parts.append(f"pass@{r.pass_k} {at_k}%, pass^{r.pass_k} {hat_k}%,")
            parts.append(f"flips {c[13]}%,")
        parts.append(f"cost-of-pass ${c[14]}" if r.cost_of_pass is not None else f"tokens-of-pass {c[15]}")
        out.append(" ".join(parts))
    return (["beyond accuracy:"] + out) if out else []


def trajectory_panel(rec: dict[str, Any]) -> Markup:
    """A record's searches with the gold documents each returned marked ★ and the recall after it."""
    extra = rec.get("extra") or {}
    curve = extra.get("recall_at_step")
    if not isinstance(curve, list):
        return Markup()
    raw_hits = extra.get("gold_hits")
    hits: list[Any] = raw_hits if isinstance(raw_hits, list) else []
    searches = [
        s
        for s in rec.get("steps") or []
        if s.get("kind") == "search" and s.get("flag") not in ("repeated_query", "search_error")
    ]
    rows = []
    for n, step in enumerate(searches):
        gold = set(map(str, hits[n])) if n < len(hits) and isinstance(hits[n], list) else set()
        docs = [str(d) for d in step.get("docs") or []]
        titles = step.get("titles") or docs
        shown = ", ".join(
            ("★ " if d in gold else "") + str(titles[j] if j < len(titles) else d) for j, d in enumerate(docs)
        )
        recall = curve[n] if n < len(curve) else None
        rows.append(
            {
                "n": n + 1,
                "gold": bool(gold),
                "query": str(step.get("query") or ""),
                "documents": shown,
                "recall": _pct(recall if isinstance(recall, (int, float)) else None),
            }
        )

    def shown_or_dash(value: Any) -> str:
        return "—" if value is None or value == "" else str(value)

    return render(
        "trajectory.html",
        rows=rows,
        recall=_pct(extra.get("evidence_recall")),
        first_gold=shown_or_dash(extra.get("first_gold_step")),
        redundant=shown_or_dash(extra.get("redundant_searches")),
        wasted=shown_or_dash(extra.get("wasted_searches")),
    )


__all__ = ["HEADERS", "metric_lines", "metrics_section", "row_cells", "trajectory_panel"]
