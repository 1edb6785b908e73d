"""Per-record pass/fail metrics: what "correct" means for a grid (BCAS §3.6, MADARA §5.4).

Each metric maps a record (the dict of one ``records.jsonl`` line) to ``True``,
``False`` or ``None`` (not graded: the record carries no outcome in this metric and
is left out of accuracies and pairings, and counted as ungraded).  Summaries, paired
statistics and the regression gate all read outcomes through :func:`outcome`, so one
definition serves them all.

=================  ================================================================
metric             outcome
=================  ================================================================
``correct_em``     SQuAD exact match as graded when the record was made (the
                   dataset's scoring rule: SQuAD-normalised EM, or the label match)
``strict_em``      MADARA §5.4 EM: lower-case + white space only, recomputed from
                   the prediction and the gold answers
``judge_verdict``  the LLM judge's verdict (BCAS §3.6); ``None`` for an answer the
                   judge has not graded or could not read
``attempted``      the answer does not decline, the agent did not abstain and no
                   three-way judge labelled it not attempted (SimpleQA's not
                   attempted, :mod:`bcas.grading.abstention`)
``em_given_        SQuAD EM of attempted answers; ``None`` for a declined one
attempted``        (SimpleQA's correct given attempted)
``evidence_        the searches (BCAS) or the retrieved documents (MADARA) reached
complete``         every gold document (evidence recall 1); ``None`` without gold
``gold_found``     at least one gold document was reached; ``None`` without gold
=================  ================================================================

Whatever the metric, an empty prediction or an item that ended in error is wrong
(``False``): a failure to answer is never left out of a denominator.

A grid declares its primary metric (``Grid.primary_metric``).  ``judge`` means the
judge's verdict when a judge graded the answers and SQuAD EM otherwise; which one a
summary used is resolved by :func:`resolve` and written into the summary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from bcas.grading import strict_exact_match, strict_token_f1
from bcas.grading.abstention import declines
from bcas.registry import Registry

Outcome = Callable[[dict[str, Any]], "bool | None"]

JUDGE = "judge"
"""Declared metric of BCAS grids: ``judge_verdict`` when a judge graded, else ``correct_em``."""

METRIC_NAMES = {
    "correct_em": "SQuAD EM",
    "strict_em": "strict EM (MADARA §5.4)",
    "judge_verdict": "LLM judge (BCAS §3.6)",
    "attempted": "attempted (SimpleQA)",
    "em_given_attempted": "SQuAD EM given attempted (SimpleQA)",
    "evidence_complete": "all gold evidence retrieved",
    "gold_found": "some gold evidence retrieved",
}


def failed(rec: dict[str, Any]) -> bool:
    """The record holds no answer: an error, or an empty prediction (a record without a
    ``prediction`` field, such as a hand-made outcome table, is judged by its outcome alone)."""
    if rec.get("error") is not None or rec.get("stop_reason") == "error":
        return True
    return "prediction" in rec and not str(rec.get("prediction") or "").strip()


def _answers(rec: dict[str, Any]) -> list[str]:
    return [str(a) for a in rec.get("answers") or []]


def _correct_em(rec: dict[str, Any]) -> bool | None:
    if failed(rec):
        return False
    value = rec.get("correct_em")
    return None if value is None else bool(value)


def _strict_em(rec: dict[str, Any]) -> bool | None:
    answers = _answers(rec)
    if failed(rec) or not answers:
        return False
    return strict_exact_match(str(rec.get("prediction") or ""), answers)


def _judge(rec: dict[str, Any]) -> bool | None:
    if failed(rec):
        return False
    verdict = rec.get("judge_verdict")
    return None if verdict is None else bool(verdict)


def abstained(rec: dict[str, Any]) -> bool:
    """Not attempted whatever the answer says: the agent chose ``abstain`` (stop reason
    ``abstained``) or a three-way judge labelled the answer ``not_attempted``."""
    judge = rec.get("judge")
    label = judge.get("label") if isinstance(judge, dict) else None
    return rec.get("stop_reason") == "abstained" or label == "not_attempted"


def _declined(rec: dict[str, Any]) -> bool:
    if failed(rec):
        return False
    return abstained(rec) or declines(str(rec.get("prediction") or ""), _answers(rec))


def _attempted(rec: dict[str, Any]) -> bool | None:
    return not _declined(rec)


def _em_given_attempted(rec: dict[str, Any]) -> bool | None:
    return None if _declined(rec) else _correct_em(rec)


def _recall(rec: dict[str, Any]) -> float | None:
    value = (rec.get("extra") or {}).get("evidence_recall")
    return None if value is None else float(value)


def _evidence_complete(rec: dict[str, Any]) -> bool | None:
    recall = _recall(rec)
    return None if recall is None else recall >= 1.0


def _gold_found(rec: dict[str, Any]) -> bool | None:
    recall = _recall(rec)
    return None if recall is None else recall > 0.0


METRICS: Registry[Outcome] = Registry("metric")
"""Pass/fail metrics of a record: one registration each (``METRICS.register(name, fn)``)."""
METRICS.register("correct_em", _correct_em)
METRICS.register("strict_em", _strict_em)
METRICS.register("judge_verdict", _judge)
METRICS.register("attempted", _attempted)
METRICS.register("em_given_attempted", _em_given_attempted)
METRICS.register("evidence_complete", _evidence_complete)
METRICS.register("gold_found", _gold_found)


def outcome(rec: dict[str, Any], metric: str) -> bool | None:
    """The record's pass/fail value in ``metric``; a plain boolean record field for other names."""
    fn = METRICS.get(metric, None)
    if fn is not None:
        return fn(rec)
    value = rec.get(metric)
    return None if value is None else bool(value)


def outcome_fn(metric: str) -> Outcome:
    return lambda rec: outcome(rec, metric)


def graded(rec: dict[str, Any]) -> bool:
    """A judge graded this record (its answer was sent to a judge, whatever the verdict)."""
    return bool(rec.get("grades")) or rec.get("judge") is not None


def resolve(declared: str | None, records: Iterable[dict[str, Any]] = (), judge: bool | None = None) -> str:
    """The metric to use for a grid that declares ``declared``.

    ``judge`` (BCAS grids) becomes ``judge_verdict`` when a judge is configured
    (``judge=True``) or, when that is not known (a summary recomputed from records),
    when any of ``records`` was graded by a judge; otherwise ``correct_em``.  ``None``
    means ``correct_em``.
    """
    if not declared:
        return "correct_em"
    if declared != JUDGE:
        return declared
    if judge is None:
        judge = any(graded(r) for r in records)
    return "judge_verdict" if judge else "correct_em"


def token_f1_of(rec: dict[str, Any], metric: str) -> float:
    """The token F1 shown beside ``metric``: strict token F1 beside strict EM, else the record's F1."""
    if metric == "strict_em":
        answers = _answers(rec)
        if failed(rec) or not answers:
            return 0.0
        return strict_token_f1(str(rec.get("prediction") or ""), answers)
    return 0.0 if failed(rec) else float(rec.get("f1") or 0.0)


__all__ = [
    "JUDGE",
    "METRICS",
    "METRIC_NAMES",
    "abstained",
    "failed",
    "graded",
    "outcome",
    "outcome_fn",
    "resolve",
    "token_f1_of",
]
