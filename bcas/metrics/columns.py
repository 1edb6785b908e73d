"""The beyond-accuracy columns of a summary row, computed from the row's records.

:class:`MetricColumns` is the part of :class:`bcas.report.summary.SummaryRow` that
this package fills (keyword-only fields, so the row keeps its own field order): the
evidence and trajectory means (:mod:`bcas.metrics.trajectory`, read from the fields
the harness stored in each record's ``extra``), SimpleQA's three-way counts and
scores (:mod:`bcas.grading.abstention`), pass@k / pass^k / flip share over epochs
(:mod:`bcas.metrics.reliability`) and cost-of-pass / tokens-of-pass
(:mod:`bcas.metrics.cost`), and the latency columns (:mod:`bcas.metrics.latency`).  ``None`` means "not measurable here" (no gold, no
epochs, no price), never 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bcas.grading.abstention import CORRECT, INCORRECT, NOT_ATTEMPTED, simpleqa_scores, three_way
from bcas.grading.outcomes import abstained, failed, outcome
from bcas.metrics.cost import cost_of_pass_interval
from bcas.metrics.latency import LatencyColumns, latency_columns
from bcas.metrics.reliability import flip_share, over_items


@dataclass(kw_only=True)
class MetricColumns(LatencyColumns):  # the latency columns (bcas.metrics.latency) first
    gold_n: int = 0  # records whose item has mapped gold evidence
    gold_unmapped: int = 0  # gold references of the row's items that name no document (per item, once)
    evidence_recall: float | None = None
    recall_at_step: list[float] = field(default_factory=list)  # mean recall after search 1, 2, ...
    first_gold_step: float | None = None  # mean, over records that found gold, of the first such search
    redundant_searches: float | None = None
    wasted_searches: float | None = None
    kept_precision: float | None = None  # MADARA: kept documents against gold
    kept_recall: float | None = None
    cite_n: int = 0  # records whose answer was asked for citations and whose item has gold
    citation_precision: float | None = None  # mean over those that cited something (ALCE §2.2)
    citation_recall: float | None = None  # mean over cite_n
    n_correct: int = 0  # SimpleQA's three-way grading in the row's metric
    n_incorrect: int = 0
    n_not_attempted: int = 0
    not_attempted_rate: float | None = None
    accuracy_given_attempted: float | None = None
    f_score: float | None = None
    pass_k: int = 0  # the k of pass@k / pass^k: the fewest tries any item of the row has
    pass_at_k: float | None = None
    pass_at_k_lo: float | None = None
    pass_at_k_hi: float | None = None
    pass_hat_k: float | None = None
    pass_hat_k_lo: float | None = None
    pass_hat_k_hi: float | None = None
    flip_share: float | None = None
    cost_of_pass: float | None = None  # US dollars per correct answer; None: unpriced or no correct answer
    cost_of_pass_lo: float | None = None
    cost_of_pass_hi: float | None = None
    tokens_of_pass: float | None = None  # tokens (in + out) per correct answer
    tokens_of_pass_lo: float | None = None
    tokens_of_pass_hi: float | None = None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _extra(rec: dict[str, Any]) -> dict[str, Any]:
    extra = rec.get("extra")
    return extra if isinstance(extra, dict) else {}


def _numbers(recs: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [float(v) for r in recs if isinstance(v := _extra(r).get(key), (int, float)) and not isinstance(v, bool)]


def recall_by_step(recs: Sequence[dict[str, Any]]) -> list[float]:
    """Mean recall after search ``j`` for ``j = 1..`` the most searches of a record; a record that
    stopped searching earlier keeps its last value (0 with no search)."""
    curves = [list(c) for r in recs if isinstance(c := _extra(r).get("recall_at_step"), list)]
    longest = max((len(c) for c in curves), default=0)
    if not longest:
        return []
    return [sum((c[min(j, len(c) - 1)] if c else 0.0) for c in curves) / len(curves) for j in range(longest)]


def _trajectory(recs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    with_gold = [r for r in recs if _extra(r).get("evidence_recall") is not None]
    unmapped: dict[str, int] = {}
    for r in recs:
        unmapped[str(r.get("item_id"))] = int(_extra(r).get("gold_unmapped") or 0)
    return {
        "gold_n": len(with_gold),
        "gold_unmapped": sum(unmapped.values()),
        "evidence_recall": _mean(_numbers(with_gold, "evidence_recall")),
        "recall_at_step": recall_by_step(with_gold),
        "first_gold_step": _mean(_numbers(with_gold, "first_gold_step")),
        "redundant_searches": _mean(_numbers(recs, "redundant_searches")),
        "wasted_searches": _mean(_numbers(with_gold, "wasted_searches")),
        "kept_precision": _mean(_numbers(recs, "kept_precision")),
        "kept_recall": _mean(_numbers(recs, "kept_recall")),
        "cite_n": sum(1 for r in with_gold if _extra(r).get("citation_recall") is not None),
        "citation_precision": _mean(_numbers(with_gold, "citation_precision")),
        "citation_recall": _mean(_numbers(with_gold, "citation_recall")),
    }


def three_way_counts(recs: Sequence[dict[str, Any]], metric: str) -> dict[str, int]:
    """Correct / incorrect / not-attempted counts in ``metric`` (ungraded attempts left out)."""
    counts = {CORRECT: 0, INCORRECT: 0, NOT_ATTEMPTED: 0}
    for r in recs:
        answers = [str(a) for a in r.get("answers") or []]
        grade = three_way(outcome(r, metric), str(r.get("prediction") or ""), answers, failed(r), abstained(r))
        if grade is not None:
            counts[grade] += 1
    return counts


def _abstention(recs: Sequence[dict[str, Any]], metric: str) -> dict[str, Any]:
    counts = three_way_counts(recs, metric)
    scores = simpleqa_scores(counts[CORRECT], counts[INCORRECT], counts[NOT_ATTEMPTED])
    return {
        "n_correct": counts[CORRECT],
        "n_incorrect": counts[INCORRECT],
        "n_not_attempted": counts[NOT_ATTEMPTED],
        "not_attempted_rate": scores["not_attempted_rate"],
        "accuracy_given_attempted": scores["correct_given_attempted"],
        "f_score": scores["f_score"],
    }


def _reliability(recs: Sequence[dict[str, Any]], metric: str) -> dict[str, Any]:
    by_item: dict[str, list[bool]] = defaultdict(list)
    for r in recs:
        value = outcome(r, metric)
        if value is not None:
            by_item[str(r.get("item_id"))].append(bool(value))
    if not by_item:
        return {}
    k = min(len(v) for v in by_item.values())
    at, hat = over_items(by_item, k, "pass@k"), over_items(by_item, k, "pass^k")
    out: dict[str, Any] = {"pass_k": k, "flip_share": flip_share(by_item)}
    for name, values in (("pass_at_k", at), ("pass_hat_k", hat)):
        if values is not None:
            out[name], out[f"{name}_lo"], out[f"{name}_hi"] = values
    return out


def _of_pass(recs: Sequence[dict[str, Any]], metric: str) -> dict[str, Any]:
    scored = [(r, v) for r in recs if (v := outcome(r, metric)) is not None]
    out: dict[str, Any] = {}
    tokens: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for r, v in scored:
        tokens[str(r.get("item_id"))].append((float(r.get("tokens_in") or 0) + float(r.get("tokens_out") or 0), v))
    out["tokens_of_pass"], out["tokens_of_pass_lo"], out["tokens_of_pass_hi"] = cost_of_pass_interval(tokens)
    if scored and all(r.get("cost_usd") is not None for r, _ in scored):
        costs: dict[str, list[tuple[float, bool]]] = defaultdict(list)
        for r, v in scored:
            costs[str(r.get("item_id"))].append((float(r["cost_usd"]), v))
        out["cost_of_pass"], out["cost_of_pass_lo"], out["cost_of_pass_hi"] = cost_of_pass_interval(costs)
    return out


def metric_columns(recs: Sequence[dict[str, Any]], metric: str = "correct_em") -> MetricColumns:
    """The beyond-accuracy columns of one summary row's records, in the row's pass/fail ``metric``."""
    return MetricColumns(
        **_trajectory(recs),
        **_abstention(recs, metric),
        **_reliability(recs, metric),
        **_of_pass(recs, metric),
        **asdict(latency_columns(recs)),
    )


__all__ = ["MetricColumns", "metric_columns", "recall_by_step", "three_way_counts"]
