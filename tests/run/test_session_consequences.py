"""What a user loses when the session's last steps on a record, or its Ctrl-C, break.

An answer the judge never graded reads as "not graded" in a judge grid; an errored or
empty answer sent to the judge spends judge tokens on nothing (and may be graded right);
a record left unpriced shows no cost; and a Ctrl-C that leaves items running keeps
spending model calls after the user asked it to stop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bcas.records import Record
from bcas.run.session import BcasSession
from bcas.run.settings import build_settings


def _session(tmp_path: Path, **given) -> BcasSession:
    return BcasSession(build_settings({"model": "mock:gold", "grid": "smoke", **given}, tmp_path))


def _record(**fields) -> Record:
    base = {
        "run_id": "r", "config_id": "c", "dataset": "hotpotqa", "dataset_hash": "h", "item_id": "q1",
        "question": "Which city is the capital of France?", "answers": ["Paris"], "prediction": "Paris",
        "model": "gpt-4o-mini", "model_fingerprint": "fp", "prompt_hash": "p", "tokens_in": 2_000_000,
        "tokens_out": 1_000_000, "searches_used": 1, "correct_em": True, "f1": 1.0,
    }  # fmt: skip
    return Record(**{**base, **fields})


def test_an_answered_item_is_graded_and_priced_and_an_errored_or_empty_one_only_priced(tmp_path):
    session = _session(tmp_path, judge="mock:gold")
    try:
        gid = session.grade_id()
        assert gid
        graded = session.loop.run_until_complete(session.grade_and_price(_record()))
        assert gid in (graded.grades or {}) and graded.judge is not None
        # the packaged list sheet: gpt-4o-mini at $0.15 in and $0.60 out per million tokens
        assert graded.cost_usd == pytest.approx(2 * 0.15 + 0.60) and graded.price_sheet == "list"
        for bad in (_record(error="engine died", prediction=""), _record(prediction="")):
            done = session.loop.run_until_complete(session.grade_and_price(bad))
            assert not done.grades and done.judge is None and done.judge_verdict is None
            assert done.cost_usd == pytest.approx(0.90)  # tokens spent are paid for, answer or not
    finally:
        session.close()


def test_without_a_judge_or_a_price_sheet_a_record_is_left_as_it_was(tmp_path):
    session = _session(tmp_path, prices="none")
    try:
        assert session.grade_id() is None
        rec = _record()
        assert session.loop.run_until_complete(session.grade_and_price(rec)) == rec
    finally:
        session.close()


def test_ctrl_c_cancels_every_item_in_flight(tmp_path, monkeypatch):
    session = _session(tmp_path)
    tasks: dict[str, asyncio.Task[None]] = {}

    async def cleanup() -> None:
        await asyncio.sleep(3600)

    async def item() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            # an item whose cancellation starts more work: that work is cancelled too
            tasks["cleanup"] = asyncio.ensure_future(cleanup())
            raise

    async def item_failing_on_cancel() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("could not close its connection") from None

    async def item_interrupted_again() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None  # the interrupt surfacing once more, in an item

    async def interrupted(case: object) -> None:
        tasks["item"] = asyncio.ensure_future(item())
        tasks["failing"] = asyncio.ensure_future(item_failing_on_cancel())
        tasks["again"] = asyncio.ensure_future(item_interrupted_again())
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "_run_case", interrupted)
    with pytest.raises(KeyboardInterrupt):
        session.run_case(object())  # type: ignore[arg-type]
    assert tasks["item"].cancelled() and tasks["cleanup"].cancelled()
    assert isinstance(tasks["failing"].exception(), RuntimeError)
    assert tasks["again"].done() and not tasks["again"].cancelled()  # the interrupt surfacing again ends it too
    assert not [t for t in asyncio.all_tasks(session.loop) if not t.done()]
    session.close()
