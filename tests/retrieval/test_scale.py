"""Indexes that scale on one machine: streamed builds, memory-mapped loads, faiss kinds, resumable embeddings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from bcas.config import RetrievalConfig, RunConfig
from bcas.data import Document, load_dataset
from bcas.retrieval import RetrievalError, build_retriever
from bcas.retrieval.bm25 import BM25Index
from bcas.retrieval.bm25_stream import write_bm25_index
from bcas.retrieval.chunking import chunk_documents
from bcas.retrieval.embed_shards import EmbeddingShards, shard_files
from bcas.retrieval.index import MANIFEST, IndexCache
from bcas.retrieval.store import ChunkStore
from bcas.retrieval.streamed import chunk_store, embeddings_component

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hotpot():
    return load_dataset("hotpotqa")


def _only(root: Path, component: str) -> Path:
    (folder,) = [p for p in root.iterdir() if p.name.startswith(component + "-")]
    return folder


@pytest.mark.parametrize("phrase_boost", [True, False])
def test_streamed_build_equals_in_memory_build_on_hotpotqa(tmp_path, hotpot, phrase_boost):
    cfg = RetrievalConfig(mode="bm25", phrase_boost=phrase_boost, k=10)
    streamed = build_retriever(hotpot.documents, cfg, cache_dir=tmp_path, progress=False)
    memory = build_retriever(hotpot.documents, cfg, cache_dir=False, progress=False)
    assert isinstance(streamed.chunks, ChunkStore) and not isinstance(memory.chunks, ChunkStore)
    assert streamed.collection == memory.collection and len(streamed) == len(memory) == 3992
    for item in hotpot.items[:60]:
        assert streamed.search(item.question) == memory.search(item.question)  # ids, texts and scores
    seen = [h.chunk_id for h in memory.search(hotpot.items[0].question)[:3]] + [hotpot.items[1].documents[0].id]
    for item in hotpot.items[:5]:
        assert streamed.search(item.question, exclude_ids=seen) == memory.search(item.question, exclude_ids=seen)


@pytest.mark.parametrize("hashed", [False, True])
def test_streamed_bm25_files_equal_bm25s_build_with_small_blocks(tmp_path, hotpot, hashed, monkeypatch):
    from bcas.retrieval import bm25

    if hashed:  # trigram keys hashed, as for a Wikipedia-sized vocabulary
        monkeypatch.setattr(bm25, "_MAX_VOCAB_FOR_PHRASE_KEYS", 100)
    texts = [c.indexed_text for c in chunk_documents(hotpot.documents[:800])]
    memory = BM25Index.build(texts, progress=False)
    # tiny blocks and merge ranges: many blocks, many phrase runs, a multi-range merge
    info = write_bm25_index(iter(texts), tmp_path / "b", progress=False, block_tokens=3000, merge_pairs=40000)
    assert info["phrase_pairs"] > 5 * 40000  # the external merge really ran in several ranges
    disk = BM25Index.load(tmp_path / "b")
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(memory.bm25.scores[name], disk.bm25.scores[name])
    np.testing.assert_array_equal(memory.phrases.keys, disk.phrases.keys)
    np.testing.assert_array_equal(memory.phrases.chunks, disk.phrases.chunks)
    assert memory.vocab == disk.vocab and memory.n_chunks == disk.n_chunks
    assert disk.phrases.hashed == memory.phrases.hashed == hashed


def test_bm25_memory_mapped_load_gives_identical_scores(tmp_path, hotpot):
    build_retriever(hotpot.documents, RetrievalConfig(mode="bm25"), cache_dir=tmp_path, progress=False)
    folder = _only(tmp_path, "bm25")
    mapped, loaded = BM25Index.load(folder, mmap=True), BM25Index.load(folder, mmap=False)
    assert isinstance(mapped.bm25.scores["data"], np.memmap) and isinstance(mapped.phrases.keys, np.memmap)
    assert not isinstance(loaded.bm25.scores["data"], np.memmap)
    for item in hotpot.items[:40]:
        for boosts in ((20.0, 60.0), (0.0, 0.0)):
            np.testing.assert_array_equal(mapped.scores(item.question, *boosts), loaded.scores(item.question, *boosts))


def test_chunk_store_reads_back_every_chunk_and_refuses_duplicate_ids(tmp_path, hotpot):
    cache = IndexCache(tmp_path)
    docs = hotpot.documents[:300]
    store = chunk_store(docs, cache, chunk_tokens=40, chunk_overlap=8, progress=False)  # windows: several per doc
    expected = chunk_documents(docs, 40, 8)
    assert list(store) == expected and store[len(expected) - 1] == expected[-1] and store[-2] == expected[-2]
    assert list(store.iter_texts(5)) == [c.indexed_text for c in expected[5:]]
    multi = next(c.doc_id for c in expected if c.id.endswith("#2"))
    positions = store.positions([multi, f"{multi}#1", expected[0].id, "no-such-id", f"{multi}#999"])
    want = [i for i, c in enumerate(expected) if c.doc_id == multi or c.id == expected[0].id]
    assert positions.tolist() == want
    # a source named by its hash is read once: the second call finds its store without reading anything
    first = chunk_store(iter(docs), cache, chunk_tokens=40, chunk_overlap=8, source_hash="corpus-1", progress=False)
    again = chunk_store(iter(()), cache, chunk_tokens=40, chunk_overlap=8, source_hash="corpus-1", progress=False)
    assert len(first) == len(again) == len(expected) and again.collection == store.collection
    dup = [Document("a", "A", "alpha beta"), Document("b", "B", "gamma"), Document("a", "A", "delta")]
    with pytest.raises(ValueError, match="document id 'a' occurs twice"):
        chunk_store(dup, cache, chunk_tokens=40, chunk_overlap=8, progress=False)


DENSE_KINDS = {
    "flat": {},
    "hnsw": {"hnsw_m": 16, "hnsw_ef_construction": 64, "hnsw_ef_search": 200},
    "ivf": {"ivf_nlist": 8, "ivf_nprobe": 8},
    "ivf-pq": {"ivf_nlist": 4, "ivf_nprobe": 4, "pq_m": 16, "pq_nbits": 6},
}
BUILD_PARAMS = {
    "flat": {},
    "hnsw": {"hnsw_m": 16, "hnsw_ef_construction": 64},
    "ivf": {"ivf_nlist": 8},
    "ivf-pq": {"ivf_nlist": 4, "pq_m": 16, "pq_nbits": 6},
}


@pytest.fixture(scope="module")
def dense_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("dense-cache")


def _short_docs(hotpot, n):
    # first sentences keep MiniLM quick on 2 cores; the index is what is tested here
    return [Document(d.id, d.title, d.text.split(". ")[0][:100]) for d in hotpot.documents[:n]]


@pytest.mark.parametrize("kind", list(DENSE_KINDS))
def test_each_faiss_index_kind_builds_searches_and_records_its_parameters(dense_cache, hotpot, minilm_embedder, kind):
    docs = _short_docs(hotpot, 200)
    cfg = RetrievalConfig(mode="dense", dense_index=kind, k=5, **DENSE_KINDS[kind])
    r = build_retriever(docs, cfg, embedder=minilm_embedder, cache_dir=dense_cache, progress=False)
    exact = build_retriever(
        docs, RetrievalConfig(mode="dense", k=5), embedder=minilm_embedder, cache_dir=dense_cache, progress=False
    )
    assert r.dense.kind == kind and r.dense.size == len(r)
    hits = r.search(docs[37].text)
    assert len(hits) == 5 and hits[0].doc_id == docs[37].id  # a passage finds itself
    if kind in ("hnsw", "ivf"):  # every list probed / a wide beam on 320 vectors: exact results
        assert [h.chunk_id for h in hits] == [h.chunk_id for h in exact.search(docs[37].text)]
    # the parameters that shaped the index are its cache key and manifest; the search ones are in force
    manifests = [json.loads((p / MANIFEST).read_text()) for p in dense_cache.iterdir() if p.name.startswith("dense-")]
    (manifest,) = [m for m in manifests if m["params"]["index"] == kind]
    assert {k: manifest["params"][k] for k in BUILD_PARAMS[kind]} == BUILD_PARAMS[kind]
    assert manifest["info"]["ntotal"] == len(r) and manifest["info"]["index"] == kind
    for name, value in DENSE_KINDS[kind].items():
        assert r.dense.info[name] == value
        assert manifest["info"][name] == value
    if kind == "ivf-pq":
        assert manifest["info"]["code_bytes"] == 16 * 6 // 8
    # one embedding of the collection serves every index kind
    assert len([p for p in dense_cache.iterdir() if p.name.startswith("embeddings-")]) == 1


def test_index_parameters_are_part_of_the_configuration_id(tmp_path):
    base = RunConfig()
    ids = {base.config_id}
    for change in ({"dense_index": "ivf-pq"}, {"ivf_nprobe": 32}, {"hnsw_ef_search": 64}, {"pq_nbits": 4}):
        ids.add(RunConfig(retrieval=RetrievalConfig(**change)).config_id)
    assert len(ids) == 5
    with pytest.raises(RetrievalError, match="ivf_nprobe must be > 0"):
        build_retriever(
            [Document("a", "A", "x y")], RetrievalConfig(dense_index="ivf", ivf_nprobe=0), cache_dir=tmp_path
        )


def test_ivf_pq_refuses_too_few_vectors_to_train(tmp_path, hotpot, minilm_embedder):
    cfg = RetrievalConfig(mode="dense", dense_index="ivf-pq")  # 2**8 centroids per sub-vector
    with pytest.raises(RetrievalError, match="needs at least that many vectors; the collection has 40"):
        build_retriever(_short_docs(hotpot, 40), cfg, embedder=minilm_embedder, cache_dir=tmp_path, progress=False)


EMBED_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from bcas.data import Document, load_dataset
    from bcas.retrieval.dense import load_embedder
    from bcas.retrieval.index import IndexCache
    from bcas.retrieval.streamed import chunk_store, embeddings_component

    docs = [Document(d.id, d.title, d.text[:40]) for d in load_dataset("hotpotqa").documents[:N]]
    cache = IndexCache(Path(sys.argv[1]))
    store = chunk_store(docs, cache, chunk_tokens=256, chunk_overlap=32, progress=False)
    print("embedding", flush=True)
    embeddings_component(store, cache, load_embedder("minilm"), shard_size=SHARD, progress=True)
    """
)
N_DOCS, SHARD = 128, 16


@pytest.mark.proof_stage  # two embedding builds, one killed, most of a minute: CI's required proof stage
def test_embeddings_resume_after_sigkill_and_equal_an_uninterrupted_build(tmp_path, hotpot, minilm_embedder):
    killed = tmp_path / "killed"
    script = EMBED_SCRIPT.replace("N]", f"{N_DOCS}]").replace("SHARD,", f"{SHARD},")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(killed)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    work = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(killed.glob(".work-embeddings-*")) if killed.is_dir() else []
        if found and len(shard_files(found[0])) >= 2:
            work = found[0]
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the build ended before it could be killed: {proc.communicate()[1].decode()[-2000:]}"
    assert work is not None, "no embedding shards appeared within 120 s"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not list(killed.glob("embeddings-*"))  # nothing stored as finished
    done = len(shard_files(work))
    assert 2 <= done < -(-N_DOCS // SHARD)

    docs = [Document(d.id, d.title, d.text[:40]) for d in hotpot.documents[:N_DOCS]]  # short: quick to embed
    cache = IndexCache(killed)
    store = chunk_store(docs, cache, chunk_tokens=256, chunk_overlap=32, progress=False)
    resumed = embeddings_component(store, cache, minilm_embedder, shard_size=SHARD, progress=False)
    manifest = json.loads((_only(killed, "embeddings") / MANIFEST).read_text())
    assert manifest["info"]["resumed_from"] >= done * SHARD > 0
    assert not work.exists()  # the work folder is gone once the embeddings are stored

    fresh = IndexCache(tmp_path / "fresh")
    store2 = chunk_store(docs, fresh, chunk_tokens=256, chunk_overlap=32, progress=False)
    whole = embeddings_component(store2, fresh, minilm_embedder, shard_size=SHARD, progress=False)
    assert json.loads((_only(tmp_path / "fresh", "embeddings") / MANIFEST).read_text())["info"]["resumed_from"] == 0
    assert isinstance(resumed, EmbeddingShards) and len(resumed) == len(whole) == N_DOCS
    np.testing.assert_array_equal(resumed.array(), whole.array())


class _Paced:
    """The real embedder, a little slower per shard so two builds overlap for certain."""

    def __init__(self, inner, pause: float) -> None:
        self.inner, self.pause = inner, pause
        self.name, self.model_id, self.dim = inner.name, inner.model_id, inner.dim

    def encode(self, texts, batch_size=64):
        time.sleep(self.pause)
        return self.inner.encode(texts, batch_size=batch_size)


def test_two_runs_building_the_same_embeddings_at_once_both_finish_and_store_one_copy(
    tmp_path, hotpot, minilm_embedder
):
    # two pytest workers or two terminals on one cache: the second used to resume in the
    # first one's work folder and crash when the first stored its result and removed it
    import threading

    docs = [Document(d.id, d.title, d.text[:40]) for d in hotpot.documents[:N_DOCS]]
    cache = IndexCache(tmp_path)
    store = chunk_store(docs, cache, chunk_tokens=256, chunk_overlap=32, progress=False)
    results: dict[str, object] = {}

    def build(name: str) -> None:
        try:
            results[name] = embeddings_component(
                store, IndexCache(tmp_path), _Paced(minilm_embedder, 0.05), shard_size=SHARD, progress=False
            )
        except BaseException as exc:  # the assertion below names it
            results[name] = exc

    first = threading.Thread(target=build, args=("first",))
    first.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        len(shard_files(w)) >= 2 for w in tmp_path.glob(".work-embeddings-*")
    ):
        time.sleep(0.005)
    second = threading.Thread(target=build, args=("second",))
    second.start()
    first.join(120)
    second.join(120)
    for name in ("first", "second"):
        assert isinstance(results[name], EmbeddingShards), f"{name} build: {results[name]!r}"
    a, b = results["first"], results["second"]
    assert len(a) == len(b) == N_DOCS
    np.testing.assert_array_equal(a.array(), b.array())
    assert a.speed is not None and b.speed is None  # the second found the first one's result
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("embeddings-")]) == 1
    assert not list(tmp_path.glob(".work-embeddings-*")) and not list(tmp_path.glob(".tmp-*"))


@pytest.mark.proof_stage  # the scale benchmark end to end, 21 s: CI's required proof stage runs it
def test_scale_benchmark_runs_at_a_tiny_scale(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/perf/bench_scale.py",
            "--passages",
            "2000",
            "--dense-scales",
            "1000",
            "--encode-sample",
            "16",
            "--queries",
            "10",
            "--workdir",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for needle in (
        "BM25 (phrase-boosted)",
        "BM25 (plain)",
        "encode throughput",
        "synthetic vectors for index timing",
        "flat",
        "ivf-pq",
        "hnsw",
        "21M passages",
    ):
        assert needle in text, f"{needle!r} missing from the benchmark output:\n{text}"


def test_vocabularies_too_large_for_packed_trigram_keys_hash_them_with_the_same_scores(hotpot, monkeypatch):
    from bcas.retrieval import bm25

    texts = [c.indexed_text for c in chunk_documents(hotpot.documents[:600])]
    packed = BM25Index.build(texts, progress=False)
    monkeypatch.setattr(bm25, "_MAX_VOCAB_FOR_PHRASE_KEYS", 100)  # as if the vocabulary were Wikipedia-sized
    hashed = BM25Index.build(texts, progress=False)
    assert hashed.phrases.hashed and not packed.phrases.hashed
    assert hashed.phrases.keys.max() >= np.uint64(1 << 63) > packed.phrases.keys.max()  # the hashed keys are used
    assert len(hashed.phrases.keys) == len(packed.phrases.keys)  # no two trigrams of the collection collide
    for item in hotpot.items[:40]:
        # the same phrases match; their boosts are summed in another order (key order), so equal to rounding
        np.testing.assert_allclose(
            hashed.scores(item.question, 20, 60), packed.scores(item.question, 20, 60), rtol=1e-12
        )
        assert (
            hashed.search(item.question, 10, bigram_boost=20, trigram_boost=60)[0].tolist()
            == packed.search(item.question, 10, bigram_boost=20, trigram_boost=60)[0].tolist()
        )
