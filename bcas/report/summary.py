"""Summaries and paired comparisons computed from stored records.

Records are handled as plain dictionaries (the JSON lines of ``records.jsonl``), so
a summary can be recomputed from any past run without the code that produced it.

- Accuracy in the grid's primary metric (:mod:`bcas.grading.outcomes`: the LLM judge's
  verdict for BCAS grids when a judge graded, else SQuAD EM; MADARA's strict EM for
  MADARA grids), with a Wilson 95% interval (BCAS Figure 2), or the item-clustered
  interval when items have several epochs (:mod:`bcas.report.paired`).  Empty and
  errored answers count as wrong; SQuAD EM and the judge's accuracy stay beside it.
- Paired comparisons on the same items, in the primary metric: difference with the
  Newcombe (1998) paired interval (BCAS Figure 3), exact McNemar p-value,
  Holm-adjusted within each Holm family the grid declares (default: every entry
  against the reference, one family per grid; MADARA: scoring-only methods vs NF in one
  family, the isolation methods in another and the routed pipeline vs NF in a third),
  pooled over the run's models × datasets as MADARA Table 14 (``holm_scope="grid"``) or
  per model × dataset (``"cell"``, ``--bcas-holm-scope cell``).
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
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from bcas.data import DATASETS
from bcas.grading.outcomes import METRIC_NAMES, outcome, outcome_fn, resolve, token_f1_of
from bcas.identity import same_model
from bcas.metrics.columns import MetricColumns, metric_columns
from bcas.records.case_status import PASSED, CaseStatus, StatusIndex
from bcas.report.comparisons import Comparison, _compare_all, _model_pairings, _reference_pairings, holm_family
from bcas.report.methods import ExtraCost, MethodRow, methods_of_run, to_payload
from bcas.report.paired import accuracy, epochs_of, per_item_means
from bcas.report.status import counting, row_fields, status_lines, with_status


def is_correct(rec: dict[str, Any], metric: str = "correct_em") -> bool:
    """The record passes ``metric`` (an ungraded record does not)."""
    return bool(outcome(rec, metric))


def grid_metrics(
    records: Iterable[dict[str, Any]],
    grids: Mapping[str, Any] | None = None,
    only: Iterable[str] | None = None,
    judge: bool | None = None,
) -> dict[str, str]:
    """Grid name -> the metric its summaries use (the grid's ``primary_metric``, resolved).

    ``judge``: whether a judge is configured; ``None`` reads it from the records (a judge
    graded some answer of the grid).  A grid no table knows uses SQuAD EM.
    """
    by_grid: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for grid, _ref, _label, rec in memberships(records, grids, only):
        by_grid[grid].append(rec)
    out = {}
    for grid, recs in by_grid.items():
        table = (grids or {}).get(grid)
        declared = getattr(table, "primary_metric", None)
        out[grid] = resolve(declared, recs, judge) if declared else "correct_em"
    return out


from bcas.report.membership import GroupKey, Groups, group_key, grouped, memberships  # noqa: E402,F401

# -- rows ------------------------------------------------------------------------------


@dataclass
class SummaryRow(MetricColumns):
    """One grid x model x dataset x configuration; the beyond-accuracy columns come from
    :class:`bcas.metrics.columns.MetricColumns` (keyword-only, after these)."""

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
    metric: str = "correct_em"  # what ``accuracy`` measures (bcas.grading.outcomes)
    em_squad: float = 0.0  # SQuAD EM accuracy, whatever the primary metric
    ungraded: int = 0  # records without an outcome in the metric (answers no judge graded)
    mean_cost_usd: float | None = None  # cost per record; None when any record's cost is unknown
    action_turns: int = 0  # BCAS action turns of the row's records
    invalid_turn_rate: float | None = None  # share of those turns that did not parse into an offered action
    context_window_stops: int = 0  # records whose loop stopped because the context window was full
    docs_per_item: float | None = None  # MADARA: documents an item chose among (mean; None: not a MADARA row)
    retrieved_per_item: float | None = None  # MADARA: of those, retrieved ones (the rest padded from the collection)
    served: str | None = None  # what answered, when known: a GGUF's file name, vLLM's root (run.json; bcas.run.served)
    status: str | None = None  # the case's status (bcas.records.case_status); None: the run folder names none
    reason: str = ""  # why a case that did not pass did not
    file_items: int = 0  # items the case's dataset file holds (cases.jsonl; 0: not known)
    held_out: int = 0  # of them, held out for calibration (MADARA Algorithm 2), never evaluated
    items_note: str = ""  # "20 of 50 items; 30 held for calibration" when n < file_items, else ""

    @property
    def counts(self) -> bool:
        """Whether the row's accuracy is a result: its case passed (or the run wrote no status)."""
        return self.status in (None, PASSED)


def _documents(recs: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """Mean documents per MADARA record and mean retrieved ones (``extra.doc_ids``, ``extra.retrieved_docs``)."""
    extras = [r.get("extra") or {} for r in recs]
    listed = [e for e in extras if isinstance(e.get("doc_ids"), list)]
    if not listed:
        return None, None
    docs = [len(e["doc_ids"]) for e in listed]
    retrieved = [int(e.get("retrieved_docs", len(e["doc_ids"]))) for e in listed]
    return _mean([float(d) for d in docs]), _mean([float(d) for d in retrieved])


def _total_cost(recs: list[dict[str, Any]]) -> float | None:
    """Sum of the records' costs; ``None`` (unknown) as soon as one record has no cost."""
    costs = [r.get("cost_usd") for r in recs]
    if any(c is None for c in costs):
        return None
    return sum(float(c) for c in costs if c is not None)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _row(
    key: GroupKey, recs: list[dict[str, Any]], reference_label: str | None, metric: str = "correct_em"
) -> SummaryRow:
    grid, model, dataset, label = key
    scored = [r for r in recs if outcome(r, metric) is not None]
    acc, lo, hi, method = accuracy(scored, outcome_fn(metric))
    items = per_item_means(scored, outcome_fn(metric))
    # The judge's accuracy: empty and errored answers are wrong, answers it did not grade are left out.
    verdicts = [r for r in recs if outcome(r, "judge_verdict") is not None]
    jacc: float | None
    jlo: float | None
    jhi: float | None
    if any(r.get("judge_verdict") is not None for r in recs):
        jacc, jlo, jhi, _ = accuracy(verdicts, outcome_fn("judge_verdict"))
    else:
        jacc = jlo = jhi = None
    squad, _, _, _ = accuracy(recs, outcome_fn("correct_em"))
    treatments = {str((r.get("extra") or {}).get("treatment")) for r in recs if (r.get("extra") or {}).get("treatment")}
    docs, retrieved = _documents(recs)
    return SummaryRow(
        grid=grid,
        model=model,
        dataset=dataset,
        label=label,
        config_id=str(recs[0].get("config_id", "")),
        n=len(items),
        correct=sum(1 for r in scored if is_correct(r, metric)),
        accuracy=acc,
        ci_lo=lo,
        ci_hi=hi,
        # Counted over the records the judge graded; an unjudged empty answer is not a judged one.
        judge_n=sum(1 for r in recs if r.get("judge_verdict") is not None),
        judge_accuracy=jacc,
        judge_ci_lo=jlo,
        judge_ci_hi=jhi,
        mean_f1=_mean([token_f1_of(r, metric) for r in recs]),
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
        metric=metric,
        em_squad=squad,
        ungraded=len(recs) - len(scored),
        mean_cost_usd=None if (total := _total_cost(recs)) is None else total / len(recs),
        docs_per_item=docs,
        retrieved_per_item=retrieved,
        **_turn_counts(recs),
        **asdict(metric_columns(recs, metric)),
    )


def _turn_counts(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Action turns, the invalid-turn rate and context-window stops of a row's records."""
    turns = sum(int((r.get("extra") or {}).get("action_turns") or 0) for r in recs)
    invalid = sum(int((r.get("extra") or {}).get("invalid_turns") or 0) for r in recs)
    return {
        "action_turns": turns,
        "invalid_turn_rate": invalid / turns if turns else None,
        "context_window_stops": sum(1 for r in recs if r.get("stop_reason") == "context_window"),
    }


def _scope(
    records: Iterable[dict[str, Any]],
    grids: Mapping[str, Any] | None,
    only: Iterable[str] | None,
    judge: bool | None,
) -> tuple[Groups, dict[tuple[str, str, str], str], dict[str, str]]:
    """The records' groups, each (grid, model, dataset)'s reference label, and each grid's metric."""
    recs = list(records)
    groups, references = grouped(recs, grids, only)
    return groups, references, grid_metrics(recs, grids, only, judge)


def summarize(
    records: Iterable[dict[str, Any]],
    grids: Mapping[str, Any] | None = None,
    only: Iterable[str] | None = None,
    judge: bool | None = None,
) -> list[SummaryRow]:
    groups, references, metrics = _scope(records, grids, only, judge)
    return [
        _row(key, g, references.get(key[:3]), metrics.get(key[0], "correct_em")) for key, g in sorted(groups.items())
    ]


# -- comparisons -----------------------------------------------------------------------


def compare_to_reference(
    records: Iterable[dict[str, Any]],
    alpha: float = 0.05,
    grids: Mapping[str, Any] | None = None,
    only: Iterable[str] | None = None,
    judge: bool | None = None,
) -> list[Comparison]:
    """Each configuration against the entries its grid compares it with, Holm-adjusted per family.

    By default an entry is compared with the grid's reference, one family per grid;
    a grid's entries may name other entries and families (``GridEntry.compare``).
    """
    groups, references, metrics = _scope(records, grids, only, judge)
    return _compare_all(
        _reference_pairings(groups, references, grids),
        metrics,
        alpha,
        lambda c: holm_family(c, grids),
        lambda c: (c.label, c.reference),
    )


def compare_models(
    records: Iterable[dict[str, Any]],
    alpha: float = 0.05,
    grids: Mapping[str, Any] | None = None,
    only: Iterable[str] | None = None,
    judge: bool | None = None,
) -> list[Comparison]:
    """Every two models on the same configuration and items; Holm within each grid × dataset.

    In each :class:`Comparison`, ``model`` is the candidate and ``reference`` the other model.
    """
    groups, _, metrics = _scope(records, grids, only, judge)
    return _compare_all(
        _model_pairings(groups), metrics, alpha, lambda c: (c.grid, c.dataset), lambda c: (c.model, c.reference)
    )


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
        out.append(
            {
                "grid": grid,
                "dataset": dataset,
                "models": models,
                "rows": [
                    {"label": label, "accuracy": [cells[label].get(m) for m in models]} for label in sorted(cells)
                ],
            }
        )
    return {"panels": out}


# -- files -----------------------------------------------------------------------------


def rows_to_csv(rows: list[SummaryRow]) -> str:
    """The rows as CSV: the row's own columns, then the beyond-accuracy ones (a list as ``a;b``)."""
    buf = io.StringIO()
    if not rows:
        return ""
    later = [f.name for f in fields(MetricColumns)]
    names = [f.name for f in fields(SummaryRow) if f.name not in later] + later
    writer = csv.DictWriter(buf, fieldnames=names)
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {k: ";".join(f"{x:g}" for x in v) if isinstance(v, list) else v for k, v in row_fields(row).items()}
        )
    return buf.getvalue()


def grid_notes(
    rows: list[SummaryRow], records: Iterable[dict[str, Any]], grids: Mapping[str, Any] | None = None
) -> list[str]:
    """Per grid: the metric its accuracies use, answers without a grade, and the retrieval
    models the run used where the paper names one (and whether they differ from the paper's)."""
    notes = []
    by_grid: dict[str, list[SummaryRow]] = defaultdict(list)
    for row in rows:
        by_grid[row.grid].append(row)
    recs = list(records)
    for grid, grid_rows in sorted(by_grid.items()):
        metrics = sorted({r.metric for r in grid_rows})
        names = ", ".join(METRIC_NAMES.get(m, m) for m in metrics)
        ungraded = sum(r.ungraded for r in grid_rows)
        tail = f" ({ungraded} answers without a judge grade left out)" if ungraded else ""
        notes.append(f"{grid}: accuracy is {names}{tail}")
        if unmapped := sum(r.gold_unmapped for r in grid_rows):
            notes.append(f"{grid}: {unmapped} gold evidence references name no document of the searched collection")
        table = (grids or {}).get(grid)
        metric_note = table.metric_note(metrics[0]) if table is not None and hasattr(table, "metric_note") else None
        if metric_note:
            notes.append(f"{grid}: {metric_note}")
        if table is not None and any(e.compare for e in getattr(table, "entries", ())):
            pooled = getattr(table, "holm_scope", "grid") == "grid"
            notes.append(
                f"{grid}: Holm families " + ("pooled over models × datasets" if pooled else "per model × dataset")
            )
        notes.extend(_dataset_notes(grid, grid_rows))
        if table is not None and hasattr(table, "retrieval_notes"):
            members = {id(rec) for g, _ref, _label, rec in memberships(recs, grids, [grid]) if g == grid}
            configs = [r.get("config") or {} for r in recs if id(r) in members]
            notes.extend(table.retrieval_notes(configs))
    return notes


def _dataset_notes(grid: str, rows: list[SummaryRow]) -> list[str]:
    """Per dataset of the grid: the documents MADARA items chose among, and the dataset's caveat."""
    notes = []
    for dataset in sorted({r.dataset for r in rows}):
        madara = [r for r in rows if r.dataset == dataset and r.docs_per_item is not None]
        if madara:
            notes.append(f"{grid}: {dataset}: items chose among {_documents_note(madara)}")
        spec = DATASETS.get(dataset)
        if spec is not None and spec.caveat:
            notes.append(f"{grid}: {dataset}: {spec.caveat}")
    return notes


def _documents_note(rows: list[SummaryRow]) -> str:
    """The documents per item of MADARA rows, one figure per group of cases that agree.

    Cases of a grid may give their items different numbers of documents (Appendix K's
    reranked top 5 beside No-Filter's 10): a mean over cases (8.3 for 10, 10 and 5)
    describes no item, so each case's figure is a mean over its own items, and cases
    with the same figures are named together.
    """
    by_case: dict[str, list[SummaryRow]] = defaultdict(list)
    for row in rows:
        by_case[row.label].append(row)
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for label, case_rows in by_case.items():
        items = sum(r.n for r in case_rows) or 1
        docs = sum(float(r.docs_per_item or 0) * r.n for r in case_rows) / items
        retrieved = sum(float(r.retrieved_per_item or 0) * r.n for r in case_rows) / items
        padded = f", {retrieved:.1f} of them retrieved, the rest padded from the collection" if retrieved < docs else ""
        groups[(f"{docs:.1f}", padded)].append(label)
    if len(groups) == 1:
        ((docs_text, padded),) = groups
        return f"{docs_text} documents on average{padded}"
    parts = [
        f"{docs} documents on average{padded} ({', '.join(sorted(cases))})" for (docs, padded), cases in groups.items()
    ]
    return "; ".join(parts)


@dataclass
class Summaries:
    rows: list[SummaryRow]
    comparisons: list[Comparison]
    model_comparisons: list[Comparison]
    matrix: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    # The BCAS loop against the methods beside it (bcas.report.methods): worked out once, here, for
    # summary.json, the terminal and the report alike.
    methods: tuple[list[MethodRow], list[ExtraCost]] = field(default_factory=lambda: ([], []))


def build_summaries(
    records: list[dict[str, Any]],
    grids: Mapping[str, Any] | None = None,
    only: Iterable[str] | None = None,
    judge: bool | None = None,
    statuses: Iterable[CaseStatus] = (),
) -> Summaries:
    """Rows, comparisons, the model matrix and notes; ``statuses``: each case's status
    (``cases.jsonl``): the records of a case that did not pass take part in no comparison."""
    index = StatusIndex(statuses)
    rows = with_status(summarize(records, grids, only, judge), index)
    kept = [r for r in records if (s := index.of_record(r)) is None or s.counts]
    comparisons = compare_to_reference(kept, grids=grids, only=only, judge=judge)
    return Summaries(
        rows,
        comparisons,
        compare_models(kept, grids=grids, only=only, judge=judge),
        model_matrix(counting(rows)),
        status_lines(rows) + grid_notes(rows, records, grids),
        methods_of_run(records, counting(rows), comparisons, *_scope(records, grids, only, judge)[::2]),
    )


def served_beside(model: str, served: str | None) -> str:
    """A row's model as shown: its label, with the name of what answered when that is another model."""
    label = model.split(" [", 1)[0]  # a label shown with a short fingerprint (two identities under one label)
    return model if not served or same_model(label, served) else f"{model} (served: {served})"


def write_summaries(
    run_dir: Path,
    records: list[dict[str, Any]],
    grids: Mapping[str, Any] | None = None,
    only: Iterable[str] | None = None,
    judge: bool | None = None,
    routing: list[dict[str, Any]] | None = None,
    served: Mapping[str, str] | None = None,
    statuses: Iterable[CaseStatus] = (),
) -> Summaries:
    """Write ``summary.csv`` and ``summary.json`` into the run directory.

    ``routing``: the routed pipeline's routing cost beside its accuracy, one row per RSC
    probe it made (``bcas.run.rsc_files.routing_rows``), written as ``routing``.
    ``served``: model fingerprint -> the name of what answered (``run.json``'s ``served``,
    :func:`served_by_fingerprint`), set on each row of that fingerprint.
    ``statuses``: each case's status (:func:`bcas.records.case_status.read_case_statuses`), set
    on its rows; a row whose case did not pass is written without accuracy.
    """
    result = build_summaries(records, grids, only, judge, statuses)
    if served:
        result.rows[:] = [replace(r, served=served.get(r.model_fingerprint)) for r in result.rows]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.csv").write_text(rows_to_csv(result.rows), encoding="utf-8")
    payload = {
        "rows": [row_fields(r) for r in result.rows],  # a case that did not pass: no accuracy
        "comparisons": [asdict(c) for c in result.comparisons],
        "model_comparisons": [asdict(c) for c in result.model_comparisons],
        "model_matrix": result.matrix,
        "notes": result.notes,
        "routing": routing or [],
        # The BCAS loop against the methods beside it (bcas.report.methods): rows and extra cost per extra correct answer.
        "methods": to_payload(*result.methods),
    }
    (run_dir / "summary.json").write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")
    return result
