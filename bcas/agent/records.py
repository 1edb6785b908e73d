"""The answer of a BCAS trajectory (BCAS §3.6-§3.7), and its record through the one builder
(:func:`bcas.records.build_record`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bcas.grading import score_prediction
from bcas.identity import prompt_hash
from bcas.records import Answer, AnswerIdentity, Grades, PriceSheet, Record, build_record, reprice_record

if TYPE_CHECKING:  # pragma: no cover - typing only
    from bcas.agent.trajectory import Trajectory
    from bcas.data import Dataset


def record_from_trajectory(
    trajectory: Trajectory,
    *,
    run_id: str,
    dataset: Dataset | None = None,
    dataset_name: str | None = None,
    dataset_hash: str | None = None,
    scoring: str | None = None,
    judge: Any = None,
    prices: PriceSheet | None = None,
    extra: dict[str, Any] | None = None,
    model_fingerprint: str | None = None,
    epoch: int = 0,
) -> Record:
    """The record of a BCAS trajectory, graded with the dataset's scoring rule.

    ``dataset`` supplies name, hash and scoring rule (or pass them one by one).
    ``judge``: a :class:`bcas.grading.JudgeResult` (or its dict) or ``None``.
    ``prices``: price the agent's usage (and the judge's) under this sheet.
    ``model_fingerprint``: the model's identity (:mod:`bcas.llm.fingerprint`); default
    ``model:<model id>``.  The record always carries the BCAS prompt-template hash, the
    configuration's seed and ``epoch``, so a record made outside the harness has a full
    answer identity (:mod:`bcas.identity`).
    """
    name = dataset_name if dataset_name is not None else (dataset.name if dataset is not None else None)
    hash_ = dataset_hash if dataset_hash is not None else (dataset.hash if dataset is not None else None)
    rule = scoring if scoring is not None else (dataset.scoring if dataset is not None else "qa")
    if name is None or hash_ is None:
        raise ValueError("record_from_trajectory needs dataset= or both dataset_name= and dataset_hash=")
    item = trajectory.item
    correct, f1 = score_prediction(trajectory.prediction, list(item.answers), rule)
    judge_dict = judge.to_dict() if hasattr(judge, "to_dict") else judge
    config = trajectory.config
    identity = AnswerIdentity(
        run_id=run_id,
        config_id=config.config_id,
        config=config.to_dict(),
        dataset=name,
        dataset_hash=hash_,
        item_id=item.id,
        question=item.question,
        answers=list(item.answers),
        model_fingerprint=model_fingerprint or f"model:{trajectory.model}",
        prompt_hash=prompt_hash("bcas"),
        epoch=epoch,
        seed=config.seed,
    )
    record = build_record(
        answer_of_trajectory(trajectory), identity, Grades(bool(correct), float(f1), judge_dict), extra=extra
    )
    return reprice_record(record, prices) if prices is not None else record


def answer_of_trajectory(trajectory: Trajectory) -> Answer:
    """The BCAS loop's answer (BCAS §3.6-§3.7): prediction, ledger totals, steps and the loop's own fields."""
    config = trajectory.config
    details: dict[str, Any] = {
        "action_turns": trajectory.action_turns,
        "invalid_turns": trajectory.invalid_turns,
        "repeated_queries": trajectory.repeated_queries,
        "forced_answer": trajectory.forced_answer,
        "plan": trajectory.plan,
        "budget": dataclasses.asdict(config.budget),
    }
    if trajectory.context_note:
        details["context_window"] = trajectory.context_note
    if trajectory.passage_ids:  # the opaque ids the model saw, mapped back to the chunks
        details["passage_ids"] = dict(trajectory.passage_ids)
    if trajectory.cite is not None:
        details.update(cite=trajectory.cite, cited_docs=trajectory.cited_docs, cite_unseen=trajectory.cite_unseen)
    return Answer(
        prediction=trajectory.prediction,
        method="bcas",
        model=trajectory.model,
        label=config.label,
        searches_used=trajectory.searches_used,
        tokens_in=trajectory.tokens_in,
        tokens_out=trajectory.tokens_out,
        tokens_reasoning=trajectory.tokens_reasoning,
        llm_calls=trajectory.llm_calls,
        early_stop=trajectory.early_stop,
        stop_reason=trajectory.stop_reason,
        latency_s=round(trajectory.latency_s, 6),
        retries=trajectory.retries,
        error=trajectory.error,
        steps=[s.to_dict() for s in trajectory.steps],
        extra=details,
    )
