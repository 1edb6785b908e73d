"""What the executor spends between a wave's answers, counted (not timed): record writes are
group commits, so items that finish together cost one ``fsync`` between them, and each record
is on disk before anyone is told of it (``bcas.records.executor``, step 6)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from bcas.records import Record, ResultStore
from bcas.records.executor import run_items


def _record(item: str) -> Record:
    return Record(
        run_id="r", config_id="c", model="m", dataset="d", dataset_hash="h", item_id=item, question="?",
        answers=["a"], prediction="a", correct_em=True, f1=1.0, stop_reason="answered",
    )  # fmt: skip


def test_a_wave_of_items_costs_a_few_fsyncs_not_one_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsyncs = 0
    real_fsync = os.fsync

    def counted(fd: int) -> None:
        nonlocal fsyncs
        fsyncs += 1
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    store = ResultStore(tmp_path)
    on_disk_when_told: list[bool] = []

    def told(record: Record) -> None:  # the progress line sees a record only once it is durable
        lines = (tmp_path / "records.jsonl").read_text().splitlines()
        on_disk_when_told.append(any(json.loads(line)["item_id"] == record.item_id for line in lines))

    async def produce(item: str, epoch: int) -> Record:
        await asyncio.sleep(0)  # every item of a wave answers in the same turn of the loop
        return _record(item)

    jobs = [(f"q{i}", 0) for i in range(32)]
    made = asyncio.run(run_items(jobs, produce, store, concurrency=16, on_record=told))
    assert len(made) == 32 and all(on_disk_when_told)
    # One fsync a record would be 32; two waves of 16 that finish together write in a few group commits.
    assert fsyncs <= 4, f"{fsyncs} fsyncs for 32 records"
    written = [json.loads(line)["item_id"] for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert written == [r.item_id for r in made]  # in completion order, each once


def test_a_failed_write_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ResultStore(tmp_path)

    def full(records: list[Record]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "append_many", full)

    async def produce(item: str, epoch: int) -> Record:
        return _record(item)

    with pytest.raises(OSError, match="No space left"):
        asyncio.run(run_items([("q1", 0), ("q2", 0)], produce, store, concurrency=2))


def test_the_progress_line_reads_a_records_spend_without_serializing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from bcas.run.cost import record_spend

    record = _record("q1").replace(
        tokens_in=120,
        tokens_out=30,
        cost_usd=0.25,
        judge={"model": "j", "tokens_in": 7, "tokens_out": 3, "cost_usd": 0.5},
    )
    from_dict = record_spend(record.to_dict())

    def serialized(self: Record) -> dict[str, object]:
        raise AssertionError("record_spend serialized the whole record")

    monkeypatch.setattr(Record, "to_dict", serialized)
    assert record_spend(record) == from_dict == (160, 0.75)  # the answer's and the judge's tokens and cost
    assert record_spend(record.replace(cost_usd=None)) == (160, None)  # an unpriced answer: cost unknown
