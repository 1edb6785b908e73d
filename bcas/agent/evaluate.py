"""Run the BCAS loop over a dataset into the results store, resumably (BCAS §3.6-§3.7).

Each item yields one record: the trajectory, graded by the dataset's scoring rule,
optionally judged by an :class:`~bcas.grading.LLMJudge`, priced under a price sheet,
and appended to a :class:`~bcas.records.ResultStore` as soon as it is finished -- by the
same executor the pytest harness uses (:func:`bcas.records.executor.run_items`).  Items
already recorded for the same ``config_id`` and dataset hash are skipped, so a killed
run resumes with nothing lost or doubled; items whose only records are errors are
run again.
"""

from __future__ import annotations

from typing import Any

from bcas.agent.loop import Retriever, run_bcas
from bcas.agent.records import record_from_trajectory
from bcas.config import RunConfig
from bcas.data import Dataset
from bcas.grading import grade_record
from bcas.llm.base import ChatModel
from bcas.records import PriceSheet, Record, ResultStore, reprice_record
from bcas.records.executor import run_items


async def evaluate_bcas(
    dataset: Dataset,
    model: ChatModel,
    retriever: Retriever,
    config: RunConfig,
    *,
    run_id: str,
    store: ResultStore | None = None,
    judge: Any = None,
    prices: PriceSheet | None = None,
    concurrency: int = 4,
    model_fingerprint: str | None = None,
) -> list[Record]:
    """Records of every item of ``dataset`` under ``config`` (recorded ones are skipped).

    ``judge``: an ``LLMJudge`` (or ``None``).  ``concurrency``: trajectories in flight
    at once (backends batch concurrent requests).  ``model_fingerprint``: the model's
    identity (:mod:`bcas.llm.fingerprint`); default ``model:<model_id>``.  Returns the records made by this
    call, in dataset order.
    """
    from bcas.identity import grade_id, prompt_hash

    fingerprint = model_fingerprint or f"model:{model.model_id}"
    phash = prompt_hash("bcas")
    done = store.done_keys(include_errors=False) if store is not None else set()
    todo = [
        (item, 0)
        for item in dataset.items
        if (fingerprint, config.config_id, dataset.hash, item.id, phash, 0) not in done
    ]

    async def produce(item: Any, epoch: int) -> Record:
        traj = await run_bcas(item, model, retriever, config, task=getattr(dataset, "task", None))
        return record_from_trajectory(traj, run_id=run_id, dataset=dataset, model_fingerprint=fingerprint, epoch=epoch)

    grade = None
    if judge is not None:
        gid = grade_id(f"model:{getattr(judge.model, 'model_id', '')}", getattr(judge, "repeats", 1))

        async def grade(record: Record) -> Record:
            graded: Record = await grade_record(record, judge, gid)
            return graded

    made = await run_items(
        todo,
        produce,
        store,
        grade=grade,
        price=(lambda r: reprice_record(r, prices)) if prices is not None else None,
        concurrency=concurrency,
    )
    order = {item.id: i for i, item in enumerate(dataset.items)}
    return sorted(made, key=lambda r: order[r.item_id])
