"""Retriever pipelines, exclude_ids, and the on-disk index cache (hits, damage, rebuild)."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Sequence

import pytest

from bcas.config import RetrievalConfig
from bcas.data import Document, load_dataset
from bcas.retrieval import IndexCacheWarning, Reranker, RetrievalError, build_retriever, streamed
from bcas.retrieval.bm25 import BM25Index
from bcas.retrieval.index import MANIFEST

QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


@pytest.fixture(scope="module")
def hotpot_docs():
    # the first 300 paragraphs of the collection keep the cache tests quick on 2 cores
    return load_dataset("hotpotqa").documents[:300]


def _only_folder(root, component):
    (folder,) = [p for p in root.iterdir() if p.name.startswith(component + "-")]
    return folder


def test_cache_hit_returns_identical_results_without_rebuilding(tmp_path, hotpot_docs, monkeypatch):
    cfg = RetrievalConfig(mode="bm25")
    first = build_retriever(hotpot_docs, cfg, cache_dir=tmp_path, progress=False)
    expected = first.search(QUESTION)
    folder = _only_folder(tmp_path, "bm25")
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["files"] and manifest["collection"] == first.collection

    def no_build(*args, **kwargs):
        raise AssertionError("cache hit expected, but the index was rebuilt")

    monkeypatch.setattr(BM25Index, "build", no_build)
    monkeypatch.setattr(streamed, "write_bm25_index", no_build)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IndexCacheWarning)
        second = build_retriever(hotpot_docs, cfg, cache_dir=tmp_path, progress=False)
    assert second.search(QUESTION) == expected
    # phrase boosts are query-time settings: same index, different ranking code path
    plain = build_retriever(hotpot_docs, RetrievalConfig(mode="bm25", phrase_boost=False), cache_dir=tmp_path)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("bm25-")]) == 1
    assert expected[0].score > plain.search(QUESTION)[0].score  # the question's phrases add boosts


@pytest.mark.parametrize("damage", ["flip", "truncate", "manifest"])
def test_damaged_cache_is_detected_and_rebuilt(tmp_path, hotpot_docs, damage):
    cfg = RetrievalConfig(mode="bm25")
    expected = build_retriever(hotpot_docs, cfg, cache_dir=tmp_path, progress=False).search(QUESTION)
    folder = _only_folder(tmp_path, "bm25")
    target = folder / "phrase_keys.npy"
    if damage == "flip":
        data = bytearray(target.read_bytes())
        data[-5] ^= 0xFF  # same size, different content
        target.write_bytes(bytes(data))
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:100])
    else:
        (folder / MANIFEST).unlink()  # a partial write: files without a manifest
    with pytest.warns(IndexCacheWarning, match="damaged or partial"):
        rebuilt = build_retriever(hotpot_docs, cfg, cache_dir=tmp_path, progress=False)
    assert rebuilt.search(QUESTION) == expected
    # the rebuilt cache is whole again
    with warnings.catch_warnings():
        warnings.simplefilter("error", IndexCacheWarning)
        assert build_retriever(hotpot_docs, cfg, cache_dir=tmp_path, progress=False).search(QUESTION) == expected


def test_damaged_dense_cache_is_rebuilt(tmp_path, minilm_embedder):
    docs = [Document(f"d{i}", f"T{i}", text) for i, text in enumerate(["red apples", "blue sky", "green grass"])]
    cfg = RetrievalConfig(mode="dense")
    expected = build_retriever(docs, cfg, embedder=minilm_embedder, cache_dir=tmp_path, progress=False).search("sky")
    index_file = _only_folder(tmp_path, "dense") / "faiss.index"
    index_file.write_bytes(index_file.read_bytes()[:-16])
    with pytest.warns(IndexCacheWarning):
        again = build_retriever(docs, cfg, embedder=minilm_embedder, cache_dir=tmp_path, progress=False)
    assert again.search("sky") == expected


def test_cache_lives_under_bcas_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("BCAS_INDEX_DIR", raising=False)
    build_retriever([Document("a", "A", "alpha beta")], RetrievalConfig(mode="bm25"), progress=False)
    assert _only_folder(tmp_path / "c" / "indexes", "bm25").is_dir()


def test_runs_with_their_own_caches_share_the_index_folder_they_are_given(tmp_path, monkeypatch):
    """``BCAS_INDEX_DIR``: two runs, two generation caches, one index built once."""
    docs = [Document("a", "A", "alpha beta"), Document("b", "B", "gamma delta")]
    monkeypatch.setenv("BCAS_INDEX_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "run1"))
    first = build_retriever(docs, RetrievalConfig(mode="bm25"), progress=False)
    built = _only_folder(tmp_path / "shared", "bm25")
    stamp = built.stat().st_mtime_ns
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "run2"))
    second = build_retriever(docs, RetrievalConfig(mode="bm25"), progress=False)
    assert _only_folder(tmp_path / "shared", "bm25") == built and built.stat().st_mtime_ns == stamp  # loaded
    assert second.search("gamma") == first.search("gamma")
    assert not (tmp_path / "run1" / "indexes").exists() and not (tmp_path / "run2" / "indexes").exists()


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_exclude_ids_skips_chunks_and_whole_documents(tmp_path, minilm_embedder, mode):
    docs = [
        Document("a", "Kiss and Tell", "Kiss and Tell is a 1945 film starring Shirley Temple as Corliss Archer."),
        Document(
            "b",
            "Shirley Temple",
            "Shirley Temple was an actress who later served as a diplomat.\n\nShe held the "
            "government position of United States Ambassador to Ghana.",
        ),
        Document("c", "Meet Corliss Archer", "Meet Corliss Archer is a radio and television comedy series."),
        Document("d", "Bread", "Bread is a staple food prepared from a dough of flour and water."),
    ]
    r = build_retriever(docs, RetrievalConfig(mode=mode), embedder=minilm_embedder, cache_dir=tmp_path, progress=False)
    full = r.search(QUESTION, k=5)
    assert {h.chunk_id for h in full} >= {"a#0", "b#0", "b#1", "c#0"}
    skip_chunk = r.search(QUESTION, k=5, exclude_ids=["a#0"])
    assert "a#0" not in {h.chunk_id for h in skip_chunk}
    assert {h.chunk_id for h in skip_chunk} >= {"b#0", "b#1", "c#0"}
    skip_doc = r.search(QUESTION, k=5, exclude_ids=["b", "unknown-id"])
    assert not {h.doc_id for h in skip_doc} & {"b"}
    assert {h.chunk_id for h in skip_doc} >= {"a#0", "c#0"}
    assert all(h.text and h.title for h in full)


def test_hybrid_fuses_both_rankings(tmp_path, minilm_embedder):
    docs = [
        Document("lex", "Zorblat", "The zorblat protocol was ratified in 1987."),  # only lexical match
        Document("sem", "Feline", "A small kitten slept on the sofa."),  # only semantic match
        Document("x", "Rocks", "Granite is an igneous rock."),
    ]
    common = {"embedder": minilm_embedder, "cache_dir": tmp_path, "progress": False}
    query = "zorblat cat nap"
    hybrid = build_retriever(docs, RetrievalConfig(mode="hybrid"), **common).search(query, k=2)
    assert {h.doc_id for h in hybrid} == {"lex", "sem"}
    convex = build_retriever(docs, RetrievalConfig(mode="hybrid", fusion="convex"), **common).search(query, k=3)
    assert len({h.chunk_id for h in convex}) == 3


class ScriptedReranker(Reranker):
    """Test double: scores passages by a fixed keyword (control flow only)."""

    name = "scripted"
    model_id = "scripted"

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append(len(passages))
        return [1.0 if "diplomat" in p else 0.0 for p in passages]


def test_rerank_pipeline_reorders_the_candidate_pool(tmp_path, hotpot_docs, minilm_embedder):
    reranker = ScriptedReranker()
    cfg = RetrievalConfig(mode="hybrid_rerank", candidates=20, k=3)
    docs = hotpot_docs[:40]
    r = build_retriever(docs, cfg, reranker=reranker, embedder=minilm_embedder, cache_dir=tmp_path, progress=False)
    hits = r.search("Shirley Temple diplomat Corliss Archer")
    assert reranker.calls == [20]
    assert len(hits) == 3
    assert "diplomat" in hits[0].text or "diplomat" in hits[0].title
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    async def inside_loop():
        with pytest.raises(RetrievalError, match="asearch"):
            r.search("anything")
        return await r.asearch("Shirley Temple diplomat", k=2)

    assert len(asyncio.run(inside_loop())) == 2


def test_unknown_reranker_fails_before_building(tmp_path):
    with pytest.raises(RetrievalError, match="unknown reranker 'nope'.*llm"):
        build_retriever(
            [Document("a", "", "x y")], RetrievalConfig(mode="hybrid_rerank", reranker="nope"), cache_dir=tmp_path
        )
    assert not any(tmp_path.iterdir())


def test_bad_queries_are_rejected(tmp_path):
    r = build_retriever([Document("a", "", "alpha beta")], RetrievalConfig(mode="bm25"), cache_dir=False)
    assert r.search("zzz unknown words") == []
    with pytest.raises(ValueError, match="k must be"):
        r.search("alpha", k=0)
