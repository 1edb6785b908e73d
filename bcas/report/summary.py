"""Summaries and paired comparisons computed from stored records.

Records are handled as plain dictionaries (the JSON lines of ``records.jsonl``), so
a summary can be recomputed from any past run without the code that produced it.

- Accuracy with a Wilson 95% interval (BCAS Figure 2), or the item-clustered interval
  when items have several epochs (:mod:`bcas.report.paired`).
- Paired comparison of each configuration against its grid's reference on the same
  items: difference with the Newcombe (1998) paired interval (BCAS Figure 3), exact
  McNemar p-value, Holm-adjusted across the grid's comparisons (MADARA §6).
- Paired comparison of every two models on the same configuration and items, Holm
  within each grid × dataset, and a model × configuration accuracy matrix.

Grid membership is not part of an answer's identity: a configuration that several
grids share is one set of answers, shown in each grid's tables and compared with that
grid's own reference (:func:`memberships`).  Answers of one model label with different
fingerprints (another GGUF, another served revision) are never pooled: each gets its own
row, its label followed by a short fingerprint.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from itertools import combinations
from pathlib import Path
from typing import Any

from bcas.report.paired import accuracy, epochs_of, paired, per_item_means
from bcas.stats import holm_bonferroni

GroupKey = tuple[str, str, str, str]  # (grid, model, dataset, label)


def group_key(rec: dict[str, Any]) -> GroupKey:
    """(grid, model, dataset, label) as the record says it was run (its first grid)."""
    extra = rec.get("extra") or {}
    return (
        str(extra.get("grid", "")),
        str(rec.get("model", "")),
        str(rec.get("dataset", "")),
        str(rec.get("label") or extra.get("label") or rec.get("config_id", "")),
    )


def is_correct(rec: dict[str, Any]) -> bool:
    return bool(rec.get("correct_em"))


# -- grid membership -------------------------------------------------------------------


def _seed_of(rec: dict[str, Any]) -> int:
    cfg = rec.get("config") or {}
    return int(cfg.get("seed", 0) or 0) if isinstance(cfg, dict) else 0


def memberships(
    records: Iterable[dict[str, Any]], grids: Mapping[str, Any] | None = None, only: Iterable[str] | None = None
) -> list[tuple[str, bool, str, dict[str, Any]]]:
    """(grid, is_reference, label, record) for every grid a record's configuration belongs to.

    ``grids``: name -> :class:`bcas.report.grids.Grid` (the registered grids); a record
    belongs to each grid with an entry whose configuration, under the record's seed, has
    the record's ``config_id``.  ``only``: grids to consider (default: the grids the
    records were run under).  A record no grid entry matches keeps the grid it was run under.
    """
    recs = list(records)
    wanted = set(only) if only is not None else set()
    wanted |= {str((r.get("extra") or {}).get("grid", "")) for r in recs}
    index: dict[tuple[int, str], list[tuple[str, bool, str]]] = defaultdict(list)
    if grids:
        for seed in sorted({_seed_of(r) for r in recs}):
            for name, grid in grids.items():
                if name not in wanted:
                    continue
                for entry in grid.entries:
                    cid = replace(entry.config, seed=seed).config_id
                    index[(seed, cid)].append((name, bool(entry.reference), entry.label))
    out = []
    for rec in recs:
        found = index.get((_seed_of(rec), str(rec.get("config_id", ""))))
        if found:
            for name, ref, label in dict.fromkeys(found):
                out.append((name, ref, label, rec))
        else:
            extra = rec.get("extra") or {}
            out.append((str(extra.get("grid", "")), bool(extra.get("reference")), group_key(rec)[3], rec))
    return out


def _model_names(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(label, fingerprint) -> display name; a label with several fingerprints gets a short one appended."""
    from bcas.identity import short

    fps: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        fps[str(rec.get("model", ""))].add(str(rec.get("model_fingerprint") or ""))
    names = {}
    for label, prints in fps.items():
        for fp in prints:
            names[(label, fp)] = label if len(prints) == 1 else f"{label} [{short(fp) if fp else 'no fingerprint'}]"
    return names


Groups = dict[GroupKey, list[dict[str, Any]]]


def grouped(records: Iterable[dict[str, Any]], grids: Mapping[str, Any] | None = None,
            only: Iterable[str] | None = None) -> tuple[Groups, dict[tuple[str, str, str], str]]:
    """Records by (grid, model display name, dataset, label), and each (grid, model, dataset)'s reference label."""
    recs = list(records)
    names = _model_names(recs)
    groups: Groups = defaultdict(list)
    references: dict[tuple[str, str, str], str] = {}
    for grid, ref, label, rec in memberships(recs, grids, only):
        model = names[(str(rec.get("model", "")), str(rec.get("model_fingerprint") or ""))]
        key = (grid, model, str(rec.get("dataset", "")), label)
        groups[key].append(rec)
        if ref:
            references[key[:3]] = label
    return groups, references


# -- rows ------------------------------------------------------------------------------


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
    model_fingerprint: str = ""
    epochs: int = 1
    interval: str = "wilson"


def _total_cost(recs: list[dict[str, Any]]) -> float | None:
    """Sum of the records' costs; ``None`` (unknown) as soon as one record has no cost."""
    costs = [r.get("cost_usd") for r in recs]
    if any(c is None for c in costs):
        return None
    return sum(float(c) for c in costs)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _row(key: GroupKey, recs: list[dict[str, Any]], reference_label: str | None) -> SummaryRow:
    grid, model, dataset, label = key
    acc, lo, hi, method = accuracy(recs, is_correct)
    items = per_item_means(recs, is_correct)
    verdicts = [r for r in recs if r.get("judge_verdict") is not None]
    if verdicts:
        jacc, jlo, jhi, _ = accuracy(verdicts, lambda r: bool(r.get("judge_verdict")))
    else:
        jacc = jlo = jhi = None
    treatments = {str((r.get("extra") or {}).get("treatment")) for r in recs if (r.get("extra") or {}).get("treatment")}
    return SummaryRow(
        grid=grid,
        model=model,
        dataset=dataset,
        label=label,
        config_id=str(recs[0].get("config_id", "")),
        n=len(items),
        correct=sum(1 for r in recs if is_correct(r)),
        accuracy=acc,
        ci_lo=lo,
        ci_hi=hi,
        judge_n=len(verdicts),
        judge_accuracy=jacc,
        judge_ci_lo=jlo,
        judge_ci_hi=jhi,
        mean_f1=_mean([float(r.get("f1") or 0.0) for r in recs]),
        mean_searches=_mean([float(r.get("searches_used") or 0) for r in recs]),
        mean_tokens_in=_mean([float(r.get("tokens_in") or 0) for r in recs]),
        mean_tokens_out=_mean([float(r.get("tokens_out") or 0) for r in recs]),
        mean_llm_calls=_mean([float(r.get("llm_calls") or 0) for r in recs]),
        cost_usd=_total_cost(recs),
        errors=sum(1 for r in recs if r.get("stop_reason") == "error"),
        reference=reference_label == label,
        treatment=",".join(sorted(treatments)) or None,
        model_fingerprint=str(recs[0].get("model_fingerprint") or ""),
        epochs=epochs_of(recs),
        interval=method,
    )


def summarize(records: Iterable[dict[str, Any]], grids: Mapping[str, Any] | None = None,
              only: Iterable[str] | None = None) -> list[SummaryRow]:
    groups, references = grouped(records, grids, only)
    return [_row(key, recs, references.get(key[:3])) for key, recs in sorted(groups.items())]


# -- comparisons -----------------------------------------------------------------------


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
    test: str = "mcnemar-exact"


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


def _compare(grid: str, model: str, dataset: str, label: str, ref_label: str,
             cand: list[dict[str, Any]], ref: list[dict[str, Any]], alpha: float) -> Comparison:
    binary = epochs_of(cand) <= 1 and epochs_of(ref) <= 1
    res = paired(per_item_means(cand, is_correct), per_item_means(ref, is_correct), binary, alpha)
    return Comparison(grid, model, dataset, label, ref_label, res.n_paired, res.a, res.b, res.c, res.d, res.diff,
                      res.ci_lo, res.ci_hi, res.p_value, res.p_value, False, res.test)


def _holm(comparisons: list[Comparison], family: Any, alpha: float) -> None:
    families: dict[Any, list[Comparison]] = defaultdict(list)
    for comp in comparisons:
        families[family(comp)].append(comp)
    for comps in families.values():
        reject, adjusted = holm_bonferroni([c.p_value for c in comps], alpha=alpha)
        for comp, rej, adj in zip(comps, reject, adjusted, strict=True):
            comp.p_holm = adj
            comp.significant = bool(rej)


def compare_to_reference(records: Iterable[dict[str, Any]], alpha: float = 0.05, grids: Mapping[str, Any] | None = None,
                         only: Iterable[str] | None = None) -> list[Comparison]:
    """Each configuration against its grid's reference, Holm-adjusted within each grid."""
    groups, references = grouped(records, grids, only)
    out: list[Comparison] = []
    for (grid, model, dataset, label), recs in sorted(groups.items()):
        ref_label = references.get((grid, model, dataset))
        if ref_label is None or ref_label == label:
            continue
        ref = groups.get((grid, model, dataset, ref_label))
        if ref:
            out.append(_compare(grid, model, dataset, label, ref_label, recs, ref, alpha))
    _holm(out, lambda c: c.grid, alpha)
    return out


def compare_models(records: Iterable[dict[str, Any]], alpha: float = 0.05, grids: Mapping[str, Any] | None = None,
                   only: Iterable[str] | None = None) -> list[Comparison]:
    """Every two models on the same configuration and items; Holm within each grid × dataset.

    In each :class:`Comparison`, ``model`` is the candidate and ``reference`` the other model.
    """
    groups, _ = grouped(records, grids, only)
    by_config: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    for (grid, model, dataset, label), recs in groups.items():
        by_config[(grid, dataset, label)][model] = recs
    out: list[Comparison] = []
    for (grid, dataset, label), models in sorted(by_config.items()):
        for first, second in combinations(sorted(models), 2):
            out.append(_compare(grid, first, dataset, label, second, models[first], models[second], alpha))
    _holm(out, lambda c: (c.grid, c.dataset), alpha)
    return out


def model_matrix(rows: list[SummaryRow]) -> dict[str, Any]:
    """Model × configuration accuracy per grid × dataset (only where a run has several models)."""
    panels: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        panels[(r.grid, r.dataset)][r.label][r.model] = r.accuracy
    out = []
    for (grid, dataset), cells in sorted(panels.items()):
        models = sorted({m for by_model in cells.values() for m in by_model})
        if len(models) < 2:
            continue
        out.append({"grid": grid, "dataset": dataset, "models": models,
                    "rows": [{"label": label, "accuracy": [cells[label].get(m) for m in models]}
                             for label in sorted(cells)]})
    return {"panels": out}


# -- files -----------------------------------------------------------------------------


def rows_to_csv(rows: list[SummaryRow]) -> str:
    buf = io.StringIO()
    if not rows:
        return ""
    writer = csv.DictWriter(buf, fieldnames=list(asdict(rows[0]).keys()))
    writer.writeheader()
    for row in rows:
        writer.writerow(asdict(row))
    return buf.getvalue()


@dataclass
class Summaries:
    rows: list[SummaryRow]
    comparisons: list[Comparison]
    model_comparisons: list[Comparison]
    matrix: dict[str, Any]


def build_summaries(records: list[dict[str, Any]], grids: Mapping[str, Any] | None = None,
                    only: Iterable[str] | None = None) -> Summaries:
    rows = summarize(records, grids, only)
    return Summaries(rows, compare_to_reference(records, grids=grids, only=only),
                     compare_models(records, grids=grids, only=only), model_matrix(rows))


def write_summaries(run_dir: Path, records: list[dict[str, Any]], grids: Mapping[str, Any] | None = None,
                    only: Iterable[str] | None = None) -> Summaries:
    """Write ``summary.csv`` and ``summary.json`` into the run directory."""
    result = build_summaries(records, grids, only)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.csv").write_text(rows_to_csv(result.rows), encoding="utf-8")
    payload = {
        "rows": [asdict(r) for r in result.rows],
        "comparisons": [asdict(c) for c in result.comparisons],
        "model_comparisons": [asdict(c) for c in result.model_comparisons],
        "model_matrix": result.matrix,
    }
    (run_dir / "summary.json").write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")
    return result
