"""The one executor (bcas.records.executor.run_items): concurrency, the cost-cap hook,
who is graded, pricing and appends -- and that every run kind goes through it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bcas.records import Record, ResultStore
from bcas.records.executor import run_items


def _record(item: str, epoch: int, *, prediction: str = "a", error: str | None = None) -> Record:
    return Record(
        run_id="r",
        config_id="c",
        model="m",
        dataset="d",
        dataset_hash="h",
        item_id=item,
        question="?",
        answers=["a"],
        prediction=prediction,
        correct_em=prediction == "a",
        f1=1.0,
        error=error,
        stop_reason="error" if error else "answered",
        epoch=epoch,
    )


def test_graded_priced_appended_and_bounded(tmp_path: Path) -> None:
    in_flight = peak = 0
    graded: list[str] = []

    async def produce(item: str, epoch: int) -> Record:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        if item == "bad":
            return _record(item, epoch, prediction="", error="ModelError: boom")
        return _record(item, epoch, prediction="" if item == "empty" else "a")

    async def grade(record: Record) -> Record:
        graded.append(record.item_id)
        return record.replace(judge_verdict=True)

    store = ResultStore(tmp_path)
    jobs = [(i, 0) for i in ("q1", "q2", "bad", "empty", "q3")]
    made = asyncio.run(
        run_items(jobs, produce, store, grade=grade, price=lambda r: r.replace(cost_usd=0.5), concurrency=2)
    )
    assert peak == 2 and len(made) == 5
    assert sorted(graded) == ["q1", "q2", "q3"]  # errored and empty answers are never sent to the judge
    assert all(r.cost_usd == 0.5 for r in made)
    assert sorted(r.item_id for r in store.records()) == sorted(i for i, _ in jobs)


def test_admit_can_refuse_and_settle_sees_each_record() -> None:
    admitted = 0
    settled: list[tuple[int, str]] = []

    async def admit() -> int | None:
        nonlocal admitted
        admitted += 1
        return admitted if admitted <= 2 else None  # a cap reached after two items

    async def produce(item: str, epoch: int) -> Record:
        return _record(item, epoch)

    made = asyncio.run(
        run_items(
            [(f"q{i}", 0) for i in range(5)],
            produce,
            admit=admit,
            settle=lambda token, r: settled.append((token, r.item_id)),
        )
    )
    assert len(made) == 2 and [t for t, _ in settled] == [1, 2]


def test_every_run_kind_uses_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Structural: evaluate_bcas and the harness's cases both call run_items (one executor)."""
    import bcas.agent.evaluate as evaluate
    import bcas.run.session as runner

    assert evaluate.run_items is run_items and runner.run_items is run_items
    calls: list[str] = []

    async def counting(jobs, produce, store=None, **kw):  # type: ignore[no-untyped-def]
        calls.append("run_items")
        return await run_items(jobs, produce, store, **kw)

    monkeypatch.setattr(evaluate, "run_items", counting)
    from bcas.config import Budget, RetrievalConfig, RunConfig
    from bcas.data import load_dataset
    from bcas.testing.mock import MockModel
    from bcas.testing.scripted import FakeRetriever

    ds = load_dataset("hotpotqa", limit=2)
    model = MockModel("gold")
    model.register_items(ds.items)
    config = RunConfig(budget=Budget(max_searches=1, max_total_tokens=400), retrieval=RetrievalConfig(mode="bm25"))
    records = asyncio.run(
        evaluate.evaluate_bcas(
            ds,
            model,
            FakeRetriever([("d1", "Terry Richardson", "Terry Richardson is a photographer.")]),
            config,
            run_id="r",
            store=ResultStore(tmp_path),
        )
    )
    assert calls == ["run_items"] and len(records) == 2
    assert [r.item_id for r in records] == [it.id for it in ds.items]
