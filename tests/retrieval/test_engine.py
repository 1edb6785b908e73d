"""BM25 served by a real search engine (bcas.retrieval.engine) against our own BM25 mode.

A real Milvus Lite server is started on loopback (no mocks), the HotpotQA sample is
indexed chunk by chunk as our BM25 mode chunks it, and recall@5 over the sample's 400
questions is compared with the local index on the same chunks.  Needs ``milvus-lite``
and ``pymilvus`` (``bash .ci/search_engine.sh``); CI installs them, so there a missing
package fails instead of skipping.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bcas.config import RetrievalConfig
from bcas.data import load_dataset
from bcas.retrieval import RetrievalError, build_retriever
from bcas.retrieval.evaluate import canonical_ids, recall_and_rr, supporting_in_collection
from bcas.retrieval.milvus_lite import MilvusLiteServer, milvus_lite_available
from bcas.testing.project import budget_grid, codename_items, grid_project, preload, read_records

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.search_engine  # required in CI (tests/conftest.py)


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    if not milvus_lite_available():
        message = "milvus-lite and pymilvus are not installed (bash .ci/search_engine.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with MilvusLiteServer() as server:
        yield server.url


@pytest.fixture(scope="module")
def hotpotqa():
    ds = load_dataset("hotpotqa")
    items = [it for it in ds.items if it.supporting]
    canonical = canonical_ids(ds)
    return ds, items, {it.id: supporting_in_collection(canonical, it) for it in items}


@pytest.mark.parametrize("phrase_boost", [False, True], ids=["plain", "phrase-boosted"])
def test_engine_recall_at_5_matches_our_bm25_on_the_same_chunks(engine_url: str, hotpotqa, phrase_boost: bool) -> None:
    from bcas.retrieval.engine import EngineRetriever

    ds, items, gold = hotpotqa
    config = RetrievalConfig(mode="bm25", phrase_boost=phrase_boost)
    engine = EngineRetriever.open(engine_url, ds.documents, config)
    local = build_retriever(ds.documents, config, cache_dir=False, progress=False)
    recall_engine = recall_local = 0.0
    same_lists = 0
    for item in items:
        theirs, ours = engine.search(item.question, k=5), local.search(item.question, k=5)
        recall_engine += recall_and_rr(theirs, gold[item.id], 5)[0]
        recall_local += recall_and_rr(ours, gold[item.id], 5)[0]
        same_lists += [h.chunk_id for h in theirs] == [h.chunk_id for h in ours]
    recall_engine, recall_local = recall_engine / len(items), recall_local / len(items)
    print(
        f"recall@5 over {len(items)} questions: engine {recall_engine:.4f}, local {recall_local:.4f}; "
        f"identical top-5 lists {same_lists}"
    )
    assert len(items) == 400
    assert abs(recall_engine - recall_local) <= 0.03
    # Plain BM25 is the same function on both sides: the same lists, the same scores.
    assert same_lists >= (0.97 if not phrase_boost else 0.85) * len(items)
    first = items[0].question
    assert engine.search(first, k=1)[0].score == pytest.approx(local.search(first, k=1)[0].score, rel=1e-5)


def test_excluded_chunks_and_documents_are_not_returned_and_the_index_is_shared(engine_url: str, hotpotqa) -> None:
    from bcas.retrieval.engine import EngineRetriever

    ds, items, _ = hotpotqa
    config = RetrievalConfig(mode="bm25", phrase_boost=False)
    engine = EngineRetriever.open(engine_url, ds.documents, config)
    collections = sorted(engine.client.list_collections())
    again = EngineRetriever.open(engine_url, ds.documents, config)  # another worker: finds it, builds nothing
    assert again.name == engine.name and sorted(engine.client.list_collections()) == collections
    hits = engine.search(items[3].question, k=5)
    without_doc = engine.search(items[3].question, k=5, exclude_ids=[hits[0].doc_id])
    without_chunk = engine.search(items[3].question, k=5, exclude_ids=[hits[1].chunk_id, 'no "such" id'])
    assert hits[0].doc_id not in {h.doc_id for h in without_doc}
    assert hits[1].chunk_id not in {h.chunk_id for h in without_chunk} and hits[0].chunk_id == without_chunk[0].chunk_id
    assert engine.search("the of and", k=5) == []  # only stop words: nothing to match, as locally
    with pytest.raises(RetrievalError, match="serves BM25 cases only"):
        EngineRetriever.open(engine_url, ds.documents, RetrievalConfig(mode="dense"))


def test_the_plugin_sends_bm25_searches_to_the_engine(
    engine_url: str,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    preload("bcas.retrieval.engine")  # before pytester restores sys.modules
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    conftest = budget_grid("eng", [pytester.path / "tiny.jsonl"], (2,), limit=5)
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(5)})
    run_dir = pytester.path / "run"
    result = pytester.runpytest(
        "--bcas-model",
        "mock:gold",
        "--bcas-grid",
        "eng",
        "--bcas-retriever",
        engine_url,
        "--bcas-report",
        str(run_dir),
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    records = read_records(run_dir)
    assert len(records) == 5 and all(r["extra"]["retriever"] == engine_url for r in records)
    assert all(any(s.get("retrieved") for s in r["steps"]) for r in records)  # the engine's hits were shown
    assert json.loads((run_dir / "run.json").read_text())["sessions"][0]["settings"]["retriever"] == engine_url
    bad = pytester.runpytest("--bcas-model", "mock:gold", "--bcas-grid", "eng", "--bcas-retriever", "localhost:19530")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "--bcas-retriever: expected" in bad.stderr.str()
