"""Run the BCAS loop over a dataset into the results store, resumably (BCAS §3.6-§3.7).

Each item yields one record: the trajectory, graded by the dataset's scoring rule,
optionally judged by an :class:`~bcas.grading.LLMJudge`, priced under a price sheet,
and appended to a :class:`~bcas.records.ResultStore` as soon as it is finished.  Items
already recorded for the same ``config_id`` and dataset hash are skipped, so a killed
run resumes with nothing lost or doubled; items whose only records are errors are
run again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bcas.agent.loop import Retriever, run_bcas
from bcas.agent.records import record_from_trajectory
from bcas.config import RunConfig
from bcas.data import Dataset
from bcas.llm.base import ChatModel
from bcas.records import PriceSheet, Record, ResultStore


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
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    from bcas.identity import prompt_hash

    fingerprint = model_fingerprint or f"model:{model.model_id}"
    phash = prompt_hash("bcas")
    done = store.done_keys(include_errors=False) if store is not None else set()
    todo = [
        item for item in dataset.items if (fingerprint, config.config_id, dataset.hash, item.id, phash, 0) not in done
    ]
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Any) -> Record:
        async with gate:
            traj = await run_bcas(item, model, retriever, config)
            verdict = None
            if judge is not None and traj.stop_reason != "error":
                verdict = await judge.judge(item.question, list(item.answers), traj.prediction)
            record = record_from_trajectory(traj, run_id=run_id, dataset=dataset, judge=verdict, prices=prices)
            record = record.replace(model_fingerprint=fingerprint, prompt_hash=phash, seed=config.seed)
            if store is not None:
                store.append(record)
            return record

    return list(await asyncio.gather(*(one(item) for item in todo)))
