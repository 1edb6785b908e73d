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

from bcas.grids import get_grid
from bcas.records import Record
from bcas.records.case_status import read_case_statuses
from bcas.run.session import BcasSession
from bcas.run.settings import Case, ModelSpec, build_settings


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
        main = asyncio.current_task()
        assert main is not None
        tasks["main"] = main  # the case's own task, ended by the interrupt
        tasks["item"] = asyncio.ensure_future(item())
        tasks["failing"] = asyncio.ensure_future(item_failing_on_cancel())
        tasks["again"] = asyncio.ensure_future(item_interrupted_again())
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "_run_case", interrupted)
    case = Case(ModelSpec("mock", "gold"), "hotpotqa", "smoke", get_grid("smoke").entries[0])
    with pytest.raises(KeyboardInterrupt):
        session.run_case(case)
    # the case is marked incomplete (rerun to resume), not left without a status
    [status] = read_case_statuses(session.settings.run_dir)
    assert (status.case_id, status.status) == (case.id, "incomplete")
    assert tasks["item"].cancelled() and tasks["cleanup"].cancelled()
    # every failure was collected: none prints "Task exception was never retrieved" at exit
    assert [name for name, t in tasks.items() if t._log_traceback] == []
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


@pytest.fixture
def built_indexes(monkeypatch: pytest.MonkeyPatch) -> list:
    """Stands in for the index build (its own tests build real ones): records what the session
    asked for, so which index each case searches can be read off."""
    from types import SimpleNamespace

    import bcas.retrieval

    built: list = []

    def build(docs, rconfig, model=None, source_hash=None, **options):
        index = SimpleNamespace(docs=[d.id for d in docs], rconfig=rconfig, model=model, source_hash=source_hash,
                                options=options)  # fmt: skip
        built.append(index)
        return index

    monkeypatch.setattr(bcas.retrieval, "build_retriever", build)
    return built


def test_each_dataset_searches_its_own_index_built_once_and_an_llm_reranker_its_own_model(tmp_path, built_indexes):
    """A session over two datasets must search each one's documents (one shared index would answer
    one dataset's questions from the other's passages), build each index once, and give an LLM
    reranker the model it was asked for: a reranker of one model is never another's."""
    from bcas.config import RetrievalConfig

    session = _session(tmp_path)
    try:
        bm25, smaller = RetrievalConfig(), RetrievalConfig(k=3)
        hotpot, wiki = session.retriever("hotpotqa", bm25, None), session.retriever("2wikimultihopqa", bm25, None)
        assert hotpot.docs == [d.id for d in session.collection("hotpotqa").documents]
        assert wiki.docs == [d.id for d in session.collection("2wikimultihopqa").documents] != hotpot.docs
        assert session.retriever("hotpotqa", bm25, None) is hotpot and len(built_indexes) == 2
        assert session.retriever("hotpotqa", smaller, None) is not hotpot  # another configuration
        m1, m2 = object(), object()
        assert session.retriever("hotpotqa", bm25, m1) is hotpot  # BM25 reads no model
        llm = RetrievalConfig(mode="bm25_rerank", reranker="llm")
        first, second = session.retriever("hotpotqa", llm, m1), session.retriever("hotpotqa", llm, m2)
        assert (first.model, second.model) == (m1, m2) and session.retriever("hotpotqa", llm, m1) is first
        bge = RetrievalConfig(mode="bm25_rerank", reranker="bge")
        shared = session.retriever("hotpotqa", bge, m1)
        assert shared.model is None and session.retriever("hotpotqa", bge, m2) is shared
        assert all(index.source_hash is None for index in built_indexes)  # no corpus: nothing to find on disk
        titles = session.titles("hotpotqa")  # the drill-down's titles: every document of the collection
        assert titles == {d.id: d.title for it in session.collection("hotpotqa").items for d in it.documents}
        assert titles and session.titles("hotpotqa") is titles and session.titles("2wikimultihopqa") != titles
        with pytest.raises(ValueError) as refused:
            session.retriever("hotpotqa", RetrievalConfig(scope="item"), None)
        assert str(refused.value) == (
            "bcas/run/session.py: retrieval scope 'item' on hotpotqa: each item has its own index "
            "(item_retriever); this kind searches one index for all its items"
        )
    finally:
        session.close()


def test_an_items_own_index_holds_its_documents_and_a_reranker_its_model(tmp_path, built_indexes):
    """Under ``scope="item"`` each item searches its own documents (MADARA's per-item passages):
    another item's index would hand it passages of another question."""
    from bcas.config import RetrievalConfig

    session = _session(tmp_path)
    try:
        first, second = session.dataset("hotpotqa", 2).items
        own = RetrievalConfig(scope="item")
        a, b = (
            session.item_retriever("hotpotqa", first, own, None),
            session.item_retriever("hotpotqa", second, own, None),
        )
        assert a.docs == [d.id for d in first.documents] and b.docs == [d.id for d in second.documents] != a.docs
        assert session.item_retriever("hotpotqa", first, own, None) is a
        m1, m2 = object(), object()
        llm = RetrievalConfig(scope="item", mode="bm25_rerank", reranker="llm")
        assert session.item_retriever("hotpotqa", first, own, m1) is a  # BM25 reads no model: one index
        r1, r2 = session.item_retriever("hotpotqa", first, llm, m1), session.item_retriever("hotpotqa", first, llm, m2)
        assert (r1.model, r2.model) == (m1, m2)
        bge = RetrievalConfig(scope="item", mode="bm25_rerank", reranker="bge")
        assert session.item_retriever("hotpotqa", first, bge, m1) is session.item_retriever("hotpotqa", first, bge, m2)
        assert session.item_retriever("hotpotqa", first, bge, m1).model is None
        # an item's few documents are indexed in memory: thousands of items leave no index on disk
        assert all(index.options == {"cache_dir": False, "progress": False} for index in built_indexes)
        # the collection scope's LLM reranker gets the model too
        collection_llm = RetrievalConfig(mode="bm25_rerank", reranker="llm")
        assert session.item_retriever("hotpotqa", first, collection_llm, m1).model is m1
        # the collection scope asks the collection's index
        assert session.item_retriever("hotpotqa", first, RetrievalConfig(), None).docs == [
            d.id for d in session.collection("hotpotqa").documents]  # fmt: skip
    finally:
        session.close()


def test_under_a_corpus_every_dataset_searches_the_one_corpus_index(tmp_path, built_indexes):
    """``--bcas-corpus``: one index over the corpus serves every dataset (built once, found again on
    disk by the corpus's content hash), also for cases that would search an item's own documents."""
    from bcas.config import RetrievalConfig
    from tests.support import official

    _dataset, corpus, _ = official.flashrag_pair(tmp_path / "flashrag", n=5)
    session = _session(tmp_path / "run", corpus=str(corpus))
    try:
        bm25 = RetrievalConfig()
        one = session.retriever("hotpotqa", bm25, None)
        assert session.retriever("2wikimultihopqa", bm25, None) is one and len(built_indexes) == 1
        the_corpus = session.corpus()
        assert the_corpus is not None and one.source_hash == the_corpus.hash
        assert one.docs == [d.id for d in the_corpus]
        (item,) = session.dataset("hotpotqa", 1).items
        assert session.item_retriever("hotpotqa", item, RetrievalConfig(scope="item"), None).docs == one.docs
        assert session.titles("hotpotqa") == {}  # a corpus is never read whole for titles: hits show their ids
    finally:
        session.close()


def test_a_search_engine_serves_the_bm25_cases_and_the_rest_search_the_local_index(
    tmp_path, built_indexes, monkeypatch
):
    """``--bcas-retriever URL``: BM25 cases search the engine's collection of their dataset's (or
    the corpus's) documents; a dense case says it searches the local index instead."""
    from types import SimpleNamespace

    from bcas.config import RetrievalConfig
    from bcas.retrieval.engine import EngineRetriever

    opened = []

    def open_engine(url, documents, config):
        opened.append(SimpleNamespace(url=url, docs=[d.id for d in documents], config=config))
        return opened[-1]

    monkeypatch.setattr(EngineRetriever, "open", staticmethod(open_engine))
    session = _session(tmp_path, retriever="http://127.0.0.1:19530")
    said: list[str] = []
    session.progress = said.append
    try:
        bm25 = RetrievalConfig()
        served = session.retriever("hotpotqa", bm25, None)
        assert served is opened[0] and served.url == "http://127.0.0.1:19530" and served.config == bm25
        assert served.docs == [d.id for d in session.collection("hotpotqa").documents] and not built_indexes
        assert session.retriever("hotpotqa", bm25, None) is served and len(opened) == 1
        dense = session.retriever("hotpotqa", RetrievalConfig(mode="dense"), None)
        assert dense is built_indexes[0] and len(opened) == 1
        assert said == ["[bcas] --bcas-retriever serves BM25 cases; mode dense searches the local index"]
    finally:
        session.close()
    from tests.support import official

    _dataset, corpus, _ = official.flashrag_pair(tmp_path / "flashrag", n=5)
    with_corpus = _session(tmp_path / "corpus-run", retriever="http://127.0.0.1:19530", corpus=str(corpus))
    try:
        served = with_corpus.retriever("hotpotqa", RetrievalConfig(), None)
        assert served.docs == [d.id for d in with_corpus.corpus()]  # the corpus's documents, not the dataset's
    finally:
        with_corpus.close()


def test_each_answer_gets_the_evidence_its_item_s_gold_documents_give_it(tmp_path):
    """Evidence recall is measured against the answered item's own gold documents: a BCAS answer
    by the documents its searches returned, a MADARA answer by the documents it kept; an errored
    answer, or an item without gold evidence, is left as it was."""
    from bcas.corpus import gold_evidence
    from bcas.records.build import Answer

    session = _session(tmp_path)
    try:
        first, second = session.dataset("hotpotqa", 2).items
        gold = gold_evidence(session.collection("hotpotqa").items)
        g1, g2 = (sorted(next(iter(g)) for g in gold[it.id].groups) for it in (first, second))
        assert g1 and g2 and set(g1).isdisjoint(g2)
        # one search that returned one of the first item's gold documents (and the second item's)
        steps = [{"kind": "search", "query": "q", "docs": [g1[0], *g2]}]
        bcas = session.with_evidence_recall("hotpotqa", first, Answer("x", "bcas", steps=steps))
        assert bcas.extra["gold_documents"] == len(g1) and bcas.extra["evidence_recall"] == 1 / len(g1)
        assert bcas.extra["recall_at_step"] == [1 / len(g1)]
        # the MADARA answer kept both of the first item's gold documents of the ten it read
        kept = {"doc_ids": [*g1, *g2], "selected_docs": g1}
        madara = session.with_evidence_recall("hotpotqa", first, Answer("x", "madara", extra=kept))
        assert madara.extra["evidence_recall"] == 1.0 and madara.extra["kept_recall"] == 1.0
        assert "recall_at_step" not in madara.extra
        as_bcas = session.with_evidence_recall("hotpotqa", first, Answer("x", "bcas", extra=kept))
        assert as_bcas.extra["evidence_recall"] == 0.0  # read as a BCAS trajectory: no search ran
        errored = Answer("", "bcas", steps=steps, error="engine died")
        assert session.with_evidence_recall("hotpotqa", first, errored) is errored
    finally:
        session.close()


def test_a_plan_names_what_each_models_server_served_and_an_empty_reading_changes_nothing(tmp_path):
    """What answered is part of an answer's identity: each case of a model whose server said what
    it serves carries that name; a case of another model, or a plan with no reading, is as it was."""
    from bcas.run.plan import make_plan
    from bcas.run.settings import build_settings

    settings = build_settings({"model": ["mock:gold", "mock:random"], "grid": "smoke"}, tmp_path)
    plan = make_plan(settings)
    assert plan.with_served({}) is plan
    first, second = sorted({c.model.label for c in plan.cases})
    served = plan.with_served({first: "SmolLM2-135M-Instruct.Q8_0.gguf"})
    assert len(served.cases) == len(plan.cases) and served.settings is settings
    assert [c.id for c in served.cases if c.model.label == second] == [
        c.id for c in plan.cases if c.model.label == second]  # fmt: skip
    assert all(c.id.startswith(f"{first}~smollm2-135m-instruct.q8_0-") for c in served.cases if c.model.label == first)
    assert {(c.model.label, c.served) for c in served.cases} == {
        (first, "SmolLM2-135M-Instruct.Q8_0.gguf"), (second, None)}  # fmt: skip


def test_a_dense_index_built_for_the_run_reports_its_embedding_speed(tmp_path, monkeypatch):
    """Embedding a collection is the slow part of a dense case: the session says how many chunks
    it embedded and how fast, once per index it built (an index found on disk reports nothing)."""
    from types import SimpleNamespace

    import bcas.retrieval
    from bcas.config import RetrievalConfig

    speeds = iter([{"embedded_chunks": 3992, "embed_seconds": 61.04, "chunks_per_s": 65.4}, None])
    monkeypatch.setattr(bcas.retrieval, "build_retriever", lambda *a, **k: SimpleNamespace(embed_speed=next(speeds)))
    session = _session(tmp_path)
    said: list[str] = []
    session.progress = said.append
    try:
        session.retriever("hotpotqa", RetrievalConfig(mode="dense"), None)
        session.retriever("2wikimultihopqa", RetrievalConfig(mode="dense"), None)  # found on disk
        assert said == ["[bcas] dense index of hotpotqa: 3992 chunks embedded in 61.0 s (65.4 chunks/s)"]
    finally:
        session.close()


def test_a_model_the_price_sheet_lacks_is_warned_about_once_per_model_and_sheet(tmp_path):
    """An unpriced run says so once per model and sheet (not once per answer, not never)."""
    from bcas.records import missing_price_note

    session = _session(tmp_path)
    said: list[str] = []
    session.progress = said.append
    try:

        def unpriced(model: str, sheet: str = "list") -> Record:
            return _record(extra={"price_missing": {"model": model, "sheet": sheet}})

        for rec in (unpriced("m1"), unpriced("m1"), unpriced("m2"), unpriced("m1", "mine.toml"), _record(),
                    _record(extra={"price_missing": "m3"})):  # fmt: skip
            session._note_price(rec)
        assert said == [f"[bcas] warning: {missing_price_note(m, s)}; its records get cost_usd null"
                        for m, s in (("m1", "list"), ("m2", "list"), ("m1", "mine.toml"))]  # fmt: skip
        assert session.unpriced == {("m1", "list"), ("m2", "list"), ("m1", "mine.toml")}
    finally:
        session.close()


@pytest.mark.parametrize("seed", [0, 3])
def test_a_probe_case_is_planned_whole_on_its_items_under_the_runs_seed(tmp_path, seed):
    """The RSC probe runs whole (no per-item answers to resume): its plan holds the items it
    probes and the configuration under the run's seed, and no items to answer one by one."""
    from bcas.grids import GRIDS
    from bcas.run.plan import case_config
    from bcas.run.settings import Case, ModelSpec

    session = _session(tmp_path, seed=seed)
    try:
        grid = GRIDS["rsc"]
        case = Case(ModelSpec("mock", "gold"), "fever", "rsc", grid.entries[0])
        plan = session.plan_case(case)
        config = case_config(case, seed, False)
        assert plan.dataset is session.dataset("fever", session.limit_for(case), grid.holdout_for(None))
        assert (plan.config, plan.identity.config_id, plan.identity.fingerprint, plan.identity.prompt_hash) == (
            config, config.config_id, "", "")  # fmt: skip
        assert (plan.wanted, plan.todo) == ([], []) and config.seed == seed
    finally:
        session.close()
