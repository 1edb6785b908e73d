"""The one record builder: a record from a pipeline's answer, the answer's identity and its grades.

A pipeline (the BCAS loop, a MADARA treatment) returns an :class:`Answer`: its prediction
and its own ledger (tokens, searches, steps, pipeline fields), nothing about which run,
case or grid asked for it.  :func:`build_record` joins it with the
:class:`AnswerIdentity` (run, configuration, dataset, item, model fingerprint, prompt
hash, epoch; :mod:`bcas.identity`) and the :class:`Grades` of its prediction into the
:class:`~bcas.records.schema.Record` (BCAS §3.7: one record per evaluated answer).  The
run engine, ``bcas.agent.records.record_from_trajectory`` and
``bcas.assess.run_madara`` all build their records here.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from bcas.records.schema import Record


@dataclass(frozen=True)
class Answer:
    """What a pipeline produced for one item: its prediction and ledger, no identity, no grades.

    ``model``: the model id the pipeline called; ``label``: the pipeline's own label of its
    configuration (both stand in the record when the identity names none).  ``method``
    names the pipeline (``"bcas"``, ``"madara"``); ``extra`` holds its own fields.
    """

    prediction: str
    method: str
    model: str = ""
    label: str = ""
    searches_used: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_reasoning: int = 0
    llm_calls: int = 0
    early_stop: bool = False
    stop_reason: str = ""
    latency_s: float = 0.0
    retries: int = 0
    error: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> Answer:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class AnswerIdentity:
    """Who asked for an answer and what identifies it (:mod:`bcas.identity`).

    ``model`` and ``label``: the record's model label and configuration label (``None``:
    the answer's own ``model`` and ``label``).
    """

    run_id: str
    config_id: str
    config: dict[str, Any]
    dataset: str
    dataset_hash: str
    item_id: str
    question: str
    answers: list[str]
    model_fingerprint: str
    prompt_hash: str
    epoch: int = 0
    seed: int | None = None
    model: str | None = None
    label: str | None = None


@dataclass(frozen=True)
class Grades:
    """The grades of an answer's prediction: exact match, F1 and the LLM judge's result (or None)."""

    correct_em: bool
    f1: float
    judge: dict[str, Any] | None = None


def build_record(
    answer: Answer,
    identity: AnswerIdentity,
    grades: Grades,
    *,
    extra: dict[str, Any] | None = None,
    created_at: float | None = None,
) -> Record:
    """The record of ``answer`` under ``identity`` with ``grades``; ``extra``: fields of the
    run (grid, case, worker, cache counts) added to the pipeline's own ``extra``."""
    return Record(
        run_id=identity.run_id,
        config_id=identity.config_id,
        config=identity.config,
        label=answer.label if identity.label is None else identity.label,
        model=answer.model if identity.model is None else identity.model,
        dataset=identity.dataset,
        dataset_hash=identity.dataset_hash,
        item_id=identity.item_id,
        question=identity.question,
        answers=list(identity.answers),
        prediction=answer.prediction,
        correct_em=bool(grades.correct_em),
        f1=float(grades.f1),
        judge_verdict=None if grades.judge is None else grades.judge.get("verdict"),
        judge=grades.judge,
        searches_used=answer.searches_used,
        tokens_in=answer.tokens_in,
        tokens_out=answer.tokens_out,
        tokens_reasoning=answer.tokens_reasoning,
        llm_calls=answer.llm_calls,
        early_stop=answer.early_stop,
        stop_reason=answer.stop_reason,
        latency_s=answer.latency_s,
        retries=answer.retries,
        error=answer.error,
        steps=answer.steps,
        method=answer.method,
        extra={**answer.extra, **(extra or {})},
        created_at=time.time() if created_at is None else created_at,
        model_fingerprint=identity.model_fingerprint,
        prompt_hash=identity.prompt_hash,
        epoch=identity.epoch,
        seed=identity.seed,
    )


__all__ = ["Answer", "AnswerIdentity", "Grades", "build_record"]
