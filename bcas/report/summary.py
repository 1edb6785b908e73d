"""Summaries and paired comparisons computed from stored records.

Records are handled as plain dictionaries (the JSON lines of ``records.jsonl``), so
a summary can be recomputed from any past run without the code that produced it.

- Accuracy with a Wilson 95% interval (BCAS Figure 2).
- Paired comparison of each configuration against its grid's reference on the same
  items: difference with the Newcombe (1998) paired interval (BCAS Figure 3), exact
  McNemar p-value, Holm-adjusted across the grid's comparisons (MADARA §6).
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bcas.stats import holm_bonferroni, mcnemar_exact, newcombe_paired_diff, wilson_interval

GroupKey = tuple[str, str, str, str]  # (grid, model, dataset, label)


def group_key(rec: dict[str, Any]) -> GroupKey:
    extra = rec.get("extra") or {}
    return (
        str(extra.get("grid", "")),
        str(rec.get("model", "")),
        str(rec.get("dataset", "")),
        str(rec.get("label") or extra.get("label") or rec.get("config_id", "")),
    )


def is_correct(rec: dict[str, Any]) -> bool:
    return bool(rec.get("correct_em"))


@dataclass
class SummaryRow:
    grid: str
    model: str
    dataset: str
    label: str
    config_id: str
    n: int
    correct: int
    accuracy: float
    ci_lo: float
    ci_hi: float
    judge_n: int
    judge_accuracy: float | None
    judge_ci_lo: float | None
    judge_ci_hi: float | None
    mean_f1: float
    mean_searches: float
    mean_tokens_in: float
    mean_tokens_out: float
    mean_llm_calls: float
    cost_usd: float | None  # None when any record of the row has no known cost (never shown as 0)
    errors: int
    reference: bool
    treatment: str | None = None


def _total_cost(recs: list[dict[str, Any]]) -> float | None:
    """Sum of the records' costs; ``None`` (unknown) as soon as one record has no cost."""
    costs = [r.get("cost_usd") for r in recs]
    if any(c is None for c in costs):
        return None
    return sum(float(c) for c in costs)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarize(records: Iterable[dict[str, Any]]) -> list[SummaryRow]:
    groups: dict[GroupKey, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        groups[group_key(rec)].append(rec)
    rows = []
    for (grid, model, dataset, label), recs in sorted(groups.items()):
        n = len(recs)
        k = sum(is_correct(r) for r in recs)
        lo, hi = wilson_interval(k, n)
        verdicts = [r.get("judge_verdict") for r in recs if r.get("judge_verdict") is not None]
        jk = sum(bool(v) for v in verdicts)
        jlo, jhi = wilson_interval(jk, len(verdicts)) if verdicts else (None, None)
        treatments = {str((r.get("extra") or {}).get("treatment")) for r in recs if (r.get("extra") or {}).get("treatment")}
        rows.append(
            SummaryRow(
                grid=grid,
                model=model,
                dataset=dataset,
                label=label,
                config_id=str(recs[0].get("config_id", "")),
                n=n,
                correct=k,
                accuracy=k / n if n else 0.0,
                ci_lo=lo,
                ci_hi=hi,
                judge_n=len(verdicts),
                judge_accuracy=(jk / len(verdicts)) if verdicts else None,
                judge_ci_lo=jlo,
                judge_ci_hi=jhi,
                mean_f1=_mean([float(r.get("f1") or 0.0) for r in recs]),
                mean_searches=_mean([float(r.get("searches_used") or 0) for r in recs]),
                mean_tokens_in=_mean([float(r.get("tokens_in") or 0) for r in recs]),
                mean_tokens_out=_mean([float(r.get("tokens_out") or 0) for r in recs]),
                mean_llm_calls=_mean([float(r.get("llm_calls") or 0) for r in recs]),
                cost_usd=_total_cost(recs),
                errors=sum(1 for r in recs if r.get("stop_reason") == "error"),
                reference=bool((recs[0].get("extra") or {}).get("reference")),
                treatment=",".join(sorted(treatments)) or None,
            )
        )
    return rows


@dataclass
class Comparison:
    grid: str
    model: str
    dataset: str
    label: str
    reference: str
    n_paired: int
    a: int
    b: int
    c: int
    d: int
    diff: float
    ci_lo: float
    ci_hi: float
    p_value: float
    p_holm: float
    significant: bool


def paired_table(candidate: dict[str, bool], reference: dict[str, bool]) -> tuple[int, int, int, int]:
    """(a, b, c, d) over the items both record: a both right, b candidate only, c reference only, d neither."""
    a = b = c = d = 0
    for item_id in sorted(set(candidate) & set(reference)):
        x, y = candidate[item_id], reference[item_id]
        if x and y:
            a += 1
        elif x:
            b += 1
        elif y:
            c += 1
        else:
            d += 1
    return a, b, c, d


def compare_to_reference(records: Iterable[dict[str, Any]], alpha: float = 0.05) -> list[Comparison]:
    """Each configuration against its grid's reference, Holm-adjusted within each grid."""
    by_group: dict[GroupKey, dict[str, bool]] = defaultdict(dict)
    reference_labels: dict[tuple[str, str, str], str] = {}
    for rec in records:
        key = group_key(rec)
        by_group[key][str(rec.get("item_id"))] = is_correct(rec)
        if (rec.get("extra") or {}).get("reference"):
            reference_labels[key[:3]] = key[3]
    out: list[Comparison] = []
    for (grid, model, dataset, label), outcomes in sorted(by_group.items()):
        ref_label = reference_labels.get((grid, model, dataset))
        if ref_label is None or ref_label == label:
            continue
        ref = by_group[(grid, model, dataset, ref_label)]
        a, b, c, d = paired_table(outcomes, ref)
        diff, lo, hi = newcombe_paired_diff(a, b, c, d, alpha=alpha)
        p = mcnemar_exact(b, c)
        out.append(Comparison(grid, model, dataset, label, ref_label, a + b + c + d, a, b, c, d, diff, lo, hi, p, p, False))
    by_grid: dict[str, list[Comparison]] = defaultdict(list)
    for comp in out:
        by_grid[comp.grid].append(comp)
    for comps in by_grid.values():
        reject, adjusted = holm_bonferroni([c.p_value for c in comps], alpha=alpha)
        for comp, rej, adj in zip(comps, reject, adjusted, strict=True):
            comp.p_holm = adj
            comp.significant = bool(rej)
    return out


def rows_to_csv(rows: list[SummaryRow]) -> str:
    buf = io.StringIO()
    if not rows:
        return ""
    writer = csv.DictWriter(buf, fieldnames=list(asdict(rows[0]).keys()))
    writer.writeheader()
    for row in rows:
        writer.writerow(asdict(row))
    return buf.getvalue()


def write_summaries(run_dir: Path, records: list[dict[str, Any]]) -> tuple[list[SummaryRow], list[Comparison]]:
    """Write ``summary.csv`` and ``summary.json`` into the run directory."""
    rows = summarize(records)
    comparisons = compare_to_reference(records)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.csv").write_text(rows_to_csv(rows), encoding="utf-8")
    payload = {
        "rows": [asdict(r) for r in rows],
        "comparisons": [asdict(c) for c in comparisons],
    }
    (run_dir / "summary.json").write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")
    return rows, comparisons
