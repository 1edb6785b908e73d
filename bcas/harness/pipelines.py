"""The pipelines of the harness's run kinds: one item of one case to its record.

``run_item_record`` runs the case's pipeline (BCAS agent loop or MADARA treatment) and
returns the record with the answer's identity; grading and pricing are the executor's
(:func:`bcas.records.executor.run_items`)."""

from __future__ import annotations

import time
import traceback
from typing import Any


async def run_item_record(ctx: Any, item: Any, epoch: int = 0) -> Any:
    """Run ``item`` (its ``epoch``-th sample) under the case in ``ctx``; return its ``Record``.

    A failure inside the pipeline never loses the item: it becomes a record with
    ``stop_reason="error"`` and the error text, which the case's invariants report.
    Epoch ``e`` samples with :func:`bcas.identity.epoch_seed` (the run's seed for epoch 0);
    the record keeps the configuration's own id and says its epoch and seed.
    """
    from dataclasses import replace

    from bcas.identity import epoch_seed
    from bcas.records import Record

    session = ctx.session
    case = ctx.case
    kind = case.entry.kind
    run_id = session.settings.run_dir.name
    extra = dict(ctx.extra_base)
    extra["model_id"] = getattr(ctx.model, "model_id", "")
    seed = epoch_seed(ctx.config.seed, epoch)
    sampling = ctx.config if seed == ctx.config.seed else replace(ctx.config, seed=seed)
    started = time.perf_counter()
    try:
        if kind == "bcas":
            record = await _bcas_record(ctx, item, run_id, extra, sampling)
        elif kind == "madara":
            record = await _madara_record(ctx, item, run_id, sampling)
        else:
            raise ValueError(f"kind {kind!r} has no per-item records")
    except Exception as exc:  # noqa: BLE001 - any failure becomes an error record, never a lost item
        record = Record(
            run_id=run_id,
            config_id=ctx.config.config_id,
            config=ctx.config.to_dict(),
            label=case.entry.label,
            model=case.model.label,
            dataset=ctx.dataset.name,
            dataset_hash=ctx.dataset.hash,
            item_id=item.id,
            question=item.question,
            answers=list(item.answers),
            prediction="",
            correct_em=False,
            f1=0.0,
            stop_reason="error",
            error=f"{type(exc).__name__}: {exc}",
            latency_s=time.perf_counter() - started,
            method=kind,
            extra={**extra, "traceback": traceback.format_exc(limit=6)},
            created_at=time.time(),
        )
    merged = {**(record.extra or {}), **extra}
    record = record.replace(
        model=case.model.label,
        label=case.entry.label,
        run_id=run_id,
        extra=merged,
        config_id=ctx.config.config_id,
        config=ctx.config.to_dict(),
        epoch=epoch,
        seed=seed,
        **ctx.identity,
    )
    return record


async def _bcas_record(ctx: Any, item: Any, run_id: str, extra: dict[str, Any], config: Any) -> Any:
    from bcas.agent import run_bcas
    from bcas.agent.records import record_from_trajectory

    trajectory = await run_bcas(item, ctx.model, ctx.retriever, config)
    extra = {**extra, "agent_tokens_out": trajectory.tokens_out}
    record = record_from_trajectory(trajectory, run_id=run_id, dataset=ctx.dataset, extra=extra)
    titles = ctx.session.titles(ctx.case.dataset)
    steps = [
        {**step, "titles": [titles.get(d, d) for d in step.get("docs") or []]} if step.get("docs") else step
        for step in record.steps
    ]
    return record.replace(steps=steps)


async def _madara_record(ctx: Any, item: Any, run_id: str, config: Any) -> Any:
    from bcas.assess import run_madara

    profile = getattr(ctx, "profile", None)
    return await run_madara(item, ctx.model, ctx.retriever, config, dataset=ctx.dataset, profile=profile, run_id=run_id)
