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


# -- the judge's identity ---------------------------------------------------------------------


def test_without_a_judge_a_session_has_no_judge_identity(tmp_path):
    session = _session(tmp_path, judge="none")
    try:
        assert session.judge_fingerprint() is None and session.grade_id() is None
    finally:
        session.close()


def test_a_served_judge_is_identified_by_the_server_it_is_loaded_from(tmp_path):
    """Grades must carry the identity of the judge that gave them.

    The judge at ``--bcas-judge-base-url`` is asked what it serves (not the evaluated
    model's server, not an unverified name), an Ollama-style name with a colon is split at
    the backend's colon only, and the judge is asked once: every record of a run needs its
    identity, and asking again per record would query the judge server each time.
    """
    from bcas.llm.preflight import preflight
    from bcas.testing.servers import FaultServer

    with FaultServer(model="qwen2.5:7b") as judge, FaultServer(model="evaluated") as evaluated:
        session = _session(
            tmp_path,
            model="openai:evaluated",
            **{"base-url": evaluated.base_url, "judge-base-url": judge.base_url},
            judge="openai:qwen2.5:7b",
        )
        try:
            fingerprint = session.judge_fingerprint()
            asked, other = judge.requests, evaluated.requests
            assert asked >= 1 and other == 0  # the judge's own server, not the evaluated model's
            assert session.judge_fingerprint() == fingerprint and judge.requests == asked  # asked once
            assert fingerprint is not None and "?unverified" not in fingerprint
            assert fingerprint == preflight(judge.base_url, "qwen2.5:7b").fingerprint
            assert fingerprint in (session.grade_id() or "")
        finally:
            session.close()


# -- MADARA's calibration items -------------------------------------------------------------


def test_calibration_items_follow_the_seed_and_never_overlap_the_evaluated_items(tmp_path):
    """Algorithm 2 calibrates on C and evaluates outside it: under ``--bcas-seed 7`` too."""
    seeded, plain = _session(tmp_path / "s7", seed=7), _session(tmp_path / "s0")
    try:
        calibration = {it.id for it in seeded.calibration("hotpotqa", 5).items}
        evaluated = {it.id for it in seeded.dataset("hotpotqa", None, holdout=5).items}
        assert len(calibration) == 5 and evaluated and not calibration & evaluated
        assert calibration != {it.id for it in plain.calibration("hotpotqa", 5).items}
        # each (dataset, size) is its own set, not the first one asked for
        assert len(seeded.calibration("hotpotqa", 3).items) == 3
        assert {it.id for it in seeded.calibration("fever", 5).items} != calibration
    finally:
        seeded.close()
        plain.close()


def test_calibration_items_are_known_to_a_model_loaded_before_them(tmp_path):
    """``mock:gold`` answers only items it was taught; the RSC probe runs it on C."""
    from bcas.agent import run_bcas
    from bcas.config import RunConfig
    from bcas.testing.scripted import FakeRetriever

    session = _session(tmp_path)
    try:
        model = session.model(session.settings.models[0])
        for item in session.calibration("hotpotqa", 3).items:
            passages = [(d.id, d.title, d.text) for d in item.documents]
            traj = session.loop.run_until_complete(run_bcas(item, model, FakeRetriever(passages, k=2), RunConfig()))
            assert traj.stop_reason != "error", traj.error
            assert traj.prediction in item.answers
    finally:
        session.close()


def test_calibration_items_under_a_corpus_carry_its_identity(tmp_path):
    """Calibrated on a corpus, the RSC profile must not be reused for the items' own documents."""
    from tests.support import official

    dataset, corpus, _ = official.flashrag_pair(tmp_path / "flashrag", n=30)
    name = f"flashrag:{dataset}"
    with_corpus = _session(tmp_path / "c", corpus=str(corpus))
    without = _session(tmp_path / "n")
    try:
        cal = with_corpus.calibration(name, 5)
        assert cal.corpus == with_corpus.corpus().hash
        assert cal.hash != without.calibration(name, 5).hash
    finally:
        with_corpus.close()
        without.close()


def test_without_the_preflight_the_judge_server_is_not_asked_and_its_name_is_marked_unverified(tmp_path):
    """``--bcas-no-preflight`` promises no request before the run: the judge's identity is then
    its requested name, marked as not checked against what the server serves."""
    from bcas.testing.servers import FaultServer

    with FaultServer(model="judge") as judge:
        session = _session(
            tmp_path,
            judge="openai:judge",
            **{"judge-base-url": judge.base_url, "no-preflight": True},
        )
        try:
            fingerprint = session.judge_fingerprint()
            assert judge.requests == 0 and fingerprint is not None and fingerprint.endswith("?unverified")
        finally:
            session.close()


def test_a_judge_on_the_evaluated_models_server_is_asked_with_that_servers_key(tmp_path, monkeypatch):
    """A judge served where the evaluated model is (no ``--bcas-judge-base-url``) is fingerprinted
    with the key that server wants; without it the server refuses and the run cannot start."""
    from bcas.testing.servers import FaultServer

    monkeypatch.setenv("EVAL_KEY", "sekrit")
    with FaultServer(model="both", api_key="sekrit") as server:
        session = _session(
            tmp_path,
            model="openai:both",
            judge="openai:both",
            **{"base-url": server.base_url, "api-key-env": "EVAL_KEY"},
        )
        try:
            fingerprint = session.judge_fingerprint()
            assert fingerprint is not None and "?unverified" not in fingerprint and server.requests >= 1
        finally:
            session.close()
