"""Indexes at scale: a large passage corpus built and queried on one machine (prints figures, asserts nothing).

The corpus is real text recombined: the sentences of every shipped collection
(``bcas/resources/data``) drawn with a fixed seed into passages of about 100 words
(wiki-18's passage length) under a drawn title, written as a FlashRAG corpus JSONL,
the format ``--bcas-corpus`` reads.  Queries are the shipped datasets' questions.

Measured, each step in its own process (so its peak RSS is its own):

- corpus scan (the content hash ``--bcas-corpus`` computes at session start);
- chunk store + BM25 build, streamed into the index cache (build time, peak RSS,
  size on disk), then a fresh process loading it memory-mapped and answering the
  queries one at a time, phrase-boosted (BCAS's mode) and plain;
- MiniLM encode throughput on a real sample of the passages, extrapolated;
- faiss flat, IVF-Flat, IVF-PQ and HNSW (the default parameters of
  ``RetrievalConfig``) built block by block from vectors on disk and queried one
  query at a time, at each ``--dense-scales`` size.  Embedding 1M passages with
  MiniLM on a CPU takes hours, so these vectors are synthetic: each is a normalised
  random mixture of two real MiniLM vectors of the sample plus a little noise, and
  the queries are real questions encoded by MiniLM.  They time the indexes; no
  recall figure is claimed from them (the ANN/flat agreement printed is agreement
  between indexes on synthetic vectors, nothing more).

    python benchmarks/perf/bench_scale.py [--passages 1000000] [--dense-scales 100000,1000000]
        [--encode-sample 2000] [--queries 200] [--workdir DIR] [--keep] [--quiet]

``--encode-sample 0`` skips MiniLM and the dense indexes.  Peak RSS is the process's
``ru_maxrss``; "anon" is its peak anonymous memory (sampled from /proc every 50 ms),
the rest being pages of memory-mapped index files, which the kernel can drop and re-read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20240611
WORDS_PER_PASSAGE = 100
WIKI18_PASSAGES = 21_000_000
DENSE_KINDS = ("flat", "ivf", "ivf-pq", "hnsw")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


# -- corpus -------------------------------------------------------------------------------


def shipped_text() -> tuple[list[str], list[str], list[str]]:
    """(sentences, titles, questions) of every shipped dataset."""
    from bcas.data import DATASETS, load_dataset

    sentences: list[str] = []
    titles: set[str] = set()
    questions: list[str] = []
    for name in sorted(DATASETS):
        ds = load_dataset(name)
        questions.extend(item.question for item in ds.items)
        for doc in ds.documents:
            titles.add(doc.title)
            sentences.extend(s.strip() for s in _SENTENCE.split(doc.text) if len(s.split()) >= 4)
    return sorted(set(sentences)), sorted(t for t in titles if t), questions


def write_corpus(path: Path, n: int) -> dict[str, Any]:
    """``n`` passages of recombined shipped sentences as FlashRAG JSONL (``contents`` = quoted title, text)."""
    sentences, titles, _ = shipped_text()
    words = np.array([len(s.split()) for s in sentences])
    rng = np.random.default_rng(SEED)
    draws = 16
    block = 50_000
    total_words = 0
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, n, block):
            m = min(block, n - start)
            picks = rng.integers(0, len(sentences), size=(m, draws))
            title = rng.integers(0, len(titles), size=m)
            cum = np.cumsum(words[picks], axis=1)
            take = np.minimum(np.argmax(cum >= WORDS_PER_PASSAGE, axis=1) + 1, draws)
            take[cum[:, -1] < WORDS_PER_PASSAGE] = draws
            for i in range(m):
                text = " ".join(sentences[j] for j in picks[i, : take[i]])
                total_words += int(cum[i, take[i] - 1])
                contents = f'"{titles[title[i]]}"\n{text}'
                out.write(json.dumps({"id": str(start + i), "contents": contents}, ensure_ascii=False) + "\n")
    return {"sentences": len(sentences), "titles": len(titles), "words_per_passage": total_words / n}


def queries(n: int) -> list[str]:
    _, _, questions = shipped_text()
    rng = np.random.default_rng(SEED)
    return [questions[i] for i in rng.permutation(len(questions))[:n]]


# -- steps (each runs in its own process) --------------------------------------------------


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


_PEAKS = {"RssAnon": 0, "RssFile": 0}


def _sample_rss() -> None:
    """Peak anonymous and file-backed (mapped files) resident memory, sampled every 50 ms (Linux /proc)."""
    while True:
        try:
            with open("/proc/self/status") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    if key in _PEAKS:
                        _PEAKS[key] = max(_PEAKS[key], int(value.split()[0]) // 1024)
        except OSError:
            return
        time.sleep(0.05)


def step_scan(a: dict[str, Any]) -> dict[str, Any]:
    from bcas.corpus import open_corpus

    t0 = time.perf_counter()
    stats = open_corpus(a["corpus"]).scan()
    return {"seconds": time.perf_counter() - t0, "hash": stats.hash, "documents": stats.documents}


def step_bm25_build(a: dict[str, Any]) -> dict[str, Any]:
    from bcas.config import RetrievalConfig
    from bcas.corpus import open_corpus
    from bcas.retrieval.bm25 import DEFAULT_STEMMER
    from bcas.retrieval.index import IndexCache
    from bcas.retrieval.retriever import _bm25_params
    from bcas.retrieval.streamed import bm25_component, chunk_store

    cfg = RetrievalConfig(mode="bm25")
    cache = IndexCache(a["cache"])
    t0 = time.perf_counter()
    store = chunk_store(
        iter(open_corpus(a["corpus"])),
        cache,
        chunk_tokens=cfg.chunk_tokens,
        chunk_overlap=cfg.chunk_overlap,
        source_hash=a["hash"],
        progress=a["progress"],
    )
    t1 = time.perf_counter()
    bm25_component(
        store, cache, _bm25_params(cfg), phrase_slop=cfg.phrase_slop, stemmer=DEFAULT_STEMMER, progress=a["progress"]
    )
    t2 = time.perf_counter()
    bm25_manifest = json.loads(next(Path(a["cache"]).glob("bm25-*/manifest.json")).read_text())
    return {"chunks": len(store), "chunk_seconds": t1 - t0, "bm25_seconds": t2 - t1, "info": bm25_manifest["info"]}


def step_bm25_query(a: dict[str, Any]) -> dict[str, Any]:
    from bcas.config import RetrievalConfig
    from bcas.retrieval import build_retriever

    qs = json.loads(Path(a["queries"]).read_text())
    out: dict[str, Any] = {}
    for label, boost in (("phrase", True), ("plain", False)):
        t0 = time.perf_counter()
        r = build_retriever(
            iter(()),
            RetrievalConfig(mode="bm25", phrase_boost=boost),
            cache_dir=a["cache"],
            source_hash=a["hash"],
            progress=False,
        )
        load_s = time.perf_counter() - t0
        r.search(qs[0])  # first touch of the mapped pages
        t0 = time.perf_counter()
        for q in qs:
            r.search(q, k=5)
        out[label] = {"load_seconds": load_s, "qps": len(qs) / (time.perf_counter() - t0)}
    return out


def step_encode(a: dict[str, Any]) -> dict[str, Any]:
    from bcas.retrieval.dense import load_embedder
    from bcas.retrieval.store import ChunkStore

    store = ChunkStore(next(Path(a["cache"]).glob("chunks-*")))
    texts = [t for _, t in zip(range(a["sample"]), store.iter_texts(), strict=False)]
    embedder = load_embedder("minilm")
    embedder.encode(texts[:8])  # warm-up
    t0 = time.perf_counter()
    vectors = embedder.encode(texts, batch_size=64)
    seconds = time.perf_counter() - t0
    qv = embedder.encode(json.loads(Path(a["queries"]).read_text()), is_query=True)
    np.save(a["sample_out"], vectors)
    np.save(a["queries_out"], qv)
    words = sum(len(t.split()) for t in texts) / len(texts)
    return {
        "passages": len(texts),
        "seconds": seconds,
        "per_second": len(texts) / seconds,
        "words": words,
        "dim": int(vectors.shape[1]),
        "threads": _torch_threads(),
    }


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def write_synthetic(sample: np.ndarray, n: int, folder: Path) -> None:
    """``n`` normalised mixtures of two sample vectors plus noise, as embedding shards."""
    from bcas.retrieval.embed_shards import META, shard_name

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + n)
    shard = 65_536
    dim = sample.shape[1]
    for first in range(0, n, shard):
        m = min(shard, n - first)
        a, b = rng.integers(0, len(sample), size=(2, m))
        v = sample[a] + rng.random((m, 1), dtype=np.float32) * sample[b]
        v += rng.normal(0.0, 0.02, size=(m, dim)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        np.save(folder / shard_name(first), v.astype(np.float32))
    meta = {"model_id": "synthetic", "dim": dim, "rows": n, "shard_size": shard}
    (folder / META).write_text(json.dumps(meta))


def step_dense(a: dict[str, Any]) -> dict[str, Any]:
    from bcas.retrieval.ann import DenseIndex, DenseIndexSpec
    from bcas.retrieval.embed_shards import EmbeddingShards

    shards = EmbeddingShards(Path(a["vectors"]))
    spec = DenseIndexSpec(kind=a["kind"])
    t0 = time.perf_counter()
    index = DenseIndex.build_blocks(shards.blocks, len(shards), shards.dim, spec, shards.take, progress=a["progress"])
    build_s = time.perf_counter() - t0
    info = index.info
    index.save(Path(a["index"]))
    size = Path(a["index"]).stat().st_size
    del index
    t0 = time.perf_counter()
    index = DenseIndex.load(Path(a["index"]), a["kind"], spec, mmap=True)
    load_s = time.perf_counter() - t0
    qv = np.load(a["queries"])
    index.search(qv[0], 10)
    ids = np.zeros((len(qv), 10), dtype=np.int64)
    t0 = time.perf_counter()
    for i, q in enumerate(qv):
        got, _ = index.search(q, 10)
        ids[i, : len(got)] = got
    qps = len(qv) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    index.index.search(np.ascontiguousarray(qv), 10)
    batch_qps = len(qv) / (time.perf_counter() - t0)
    np.save(a["ids_out"], ids)
    return {
        "build_seconds": build_s,
        "load_seconds": load_s,
        "bytes": size,
        "qps": qps,
        "batch_qps": batch_qps,
        "info": info,
    }


STEPS = {
    "scan": step_scan,
    "bm25-build": step_bm25_build,
    "bm25-query": step_bm25_query,
    "encode": step_encode,
    "dense": step_dense,
}


def run_step(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run one step in a child process; its result and its own peak RSS."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, __file__, "--step", name, "--step-args", json.dumps(args)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"step {name} failed (exit {proc.returncode})")
    return json.loads(lines[-1][len("RESULT ") :])


# -- report ---------------------------------------------------------------------------------


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def duration(s: float) -> str:
    if s >= 7200:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.1f} s"


def say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"[bench_scale] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--passages", type=int, default=1_000_000)
    p.add_argument("--dense-scales", default="100000,1000000", help="comma list of vector counts")
    p.add_argument("--encode-sample", type=int, default=2000, help="real passages MiniLM encodes (0: no dense part)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--workdir", default=None, help="folder for the corpus, caches and indexes (default: a temp folder)")
    p.add_argument("--keep", action="store_true", help="keep the workdir")
    p.add_argument("--quiet", action="store_true", help="no progress bars or step messages on stderr")
    p.add_argument("--step", help=argparse.SUPPRESS)
    p.add_argument("--step-args", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.step:
        threading.Thread(target=_sample_rss, daemon=True).start()
        result = STEPS[args.step](json.loads(args.step_args))
        peaks = {"peak_rss_mb": _peak_mb(), "peak_anon_mb": _PEAKS["RssAnon"]}
        print("RESULT " + json.dumps({**result, **peaks}), flush=True)
        return 0

    scales = [int(x) for x in args.dense_scales.split(",") if x] if args.encode_sample else []
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    quiet, prog = args.quiet, not args.quiet
    try:
        corpus, cache = work / f"corpus-{args.passages}.jsonl", work / "cache"
        say(f"writing {args.passages:,} passages to {corpus}", quiet)
        t0 = time.perf_counter()
        gen = write_corpus(corpus, args.passages)
        gen_s = time.perf_counter() - t0
        qfile = work / "queries.json"
        qfile.write_text(json.dumps(queries(args.queries)))
        say("scanning the corpus", quiet)
        scan = run_step("scan", {"corpus": str(corpus)})
        say("chunk store + BM25 build", quiet)
        common = {"corpus": str(corpus), "cache": str(cache), "hash": scan["hash"], "progress": prog}
        build = run_step("bm25-build", common)
        build["chunks_bytes"] = sum(folder_bytes(f) for f in cache.glob("chunks-*"))
        build["bm25_bytes"] = sum(folder_bytes(f) for f in cache.glob("bm25-*"))
        say("BM25 load + queries", quiet)
        query = run_step("bm25-query", {**common, "queries": str(qfile)})
        enc: dict[str, Any] | None = None
        dense: dict[int, dict[str, Any]] = {}
        if args.encode_sample:
            say(f"MiniLM encode of {args.encode_sample} passages", quiet)
            sample_f, qv_f = work / "sample.npy", work / "queries.npy"
            enc = run_step(
                "encode",
                {
                    "cache": str(cache),
                    "sample": args.encode_sample,
                    "queries": str(qfile),
                    "sample_out": str(sample_f),
                    "queries_out": str(qv_f),
                },
            )
            for n in scales:
                dense[n] = dense_at_scale(work, n, np.load(sample_f), qv_f, prog, quiet)
        report(args, gen, gen_s, scan, build, query, enc, dense)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def dense_at_scale(work: Path, n: int, sample: np.ndarray, qv_f: Path, prog: bool, quiet: bool) -> dict[str, Any]:
    """Every faiss kind built and queried on ``n`` synthetic vectors; agreement with flat's top 10."""
    vec = work / f"vectors-{n}"
    write_synthetic(sample, n, vec)
    out: dict[str, Any] = {}
    for kind in DENSE_KINDS:
        say(f"faiss {kind} on {n:,} vectors", quiet)
        idx, ids = work / f"{kind}-{n}.index", work / f"ids-{kind}-{n}.npy"
        step_args = {"vectors": str(vec), "kind": kind, "index": str(idx), "queries": str(qv_f), "ids_out": str(ids)}
        out[kind] = run_step("dense", {**step_args, "progress": prog})
        idx.unlink()
    flat = np.load(work / f"ids-flat-{n}.npy")
    for kind in DENSE_KINDS:
        got = np.load(work / f"ids-{kind}-{n}.npy")
        out[kind]["agree"] = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, flat, strict=True)]))
    shutil.rmtree(vec)
    return out


def rss(r: dict[str, Any]) -> str:
    return f"{r['peak_rss_mb']:,.0f} MB ({r['peak_anon_mb']:,.0f} anon)"


def report(
    args: Any,
    gen: dict[str, Any],
    gen_s: float,
    scan: dict[str, Any],
    build: dict[str, Any],
    query: dict[str, Any],
    enc: dict[str, Any] | None,
    dense: dict[int, dict[str, Any]],
) -> None:
    n = args.passages
    info = build["info"]
    print(
        f"corpus: {n:,} passages of recombined shipped sentences ({gen['sentences']:,} distinct sentences, "
        f"{gen['titles']:,} titles, {gen['words_per_passage']:.0f} words/passage, seed {SEED}); "
        f"written in {duration(gen_s)}; {build['chunks']:,} chunks; vocabulary {info['vocabulary']:,} terms; "
        f"{info['phrase_pairs']:,} phrase pairs"
    )
    print(f"queries: {args.queries} questions of the shipped datasets, one at a time, k = 5")
    print(f"corpus scan (content hash): {duration(scan['seconds'])}, peak RSS {rss(scan)}")
    print(f"chunk store: {duration(build['chunk_seconds'])}, {gb(build['chunks_bytes'])} on disk")
    print(
        f"BM25 build: {duration(build['bm25_seconds'])}, peak RSS {rss(build)} (chunk store and BM25 in one "
        f"process), {gb(build['bm25_bytes'])} on disk; first load after the build (every checksum verified) "
        f"{query['phrase']['load_seconds']:.2f} s, later loads {query['plain']['load_seconds']:.2f} s; "
        f"peak RSS while querying {rss(query)}"
    )
    print("| BM25 mode | queries/s |")
    print("|---|---:|")
    for label, key in (("BM25 (phrase-boosted)", "phrase"), ("BM25 (plain)", "plain")):
        print(f"| {label} | {query[key]['qps']:,.1f} |")
    if enc is not None:
        report_dense(n, enc, dense)
    extrapolate(n, build, query, enc, dense)


def report_dense(n: int, enc: dict[str, Any], dense: dict[int, dict[str, Any]]) -> None:
    rate = enc["per_second"]
    print(
        f"MiniLM encode throughput: {rate:,.1f} passages/s ({enc['passages']} real passages of "
        f"{enc['words']:.0f} words, batch 64, {enc['threads']} torch threads) -> {n:,} passages: "
        f"{duration(n / rate)}; {WIKI18_PASSAGES / 1e6:.0f}M passages: {duration(WIKI18_PASSAGES / rate)}"
    )
    print(
        "dense indexes: synthetic vectors for index timing (normalised mixtures of two real MiniLM vectors of the "
        "sample + noise; queries: real questions encoded by MiniLM); recall figures not claimed; 'agree' = "
        "overlap of the top 10 with flat's on these vectors"
    )
    print("| vectors | index | parameters | build | peak RSS | on disk | queries/s (one / batch) | agree |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for m, kinds in dense.items():
        for kind, r in kinds.items():
            params = ", ".join(f"{k}={v}" for k, v in r["info"].items() if k not in ("index", "ntotal", "dim"))
            print(
                f"| {m:,} | {kind} | {params or '-'} | {duration(r['build_seconds'])} | {rss(r)} | "
                f"{gb(r['bytes'])} | {r['qps']:,.1f} / {r['batch_qps']:,.0f} | {r['agree']:.2f} |"
            )


def extrapolate(
    n: int, build: dict[str, Any], query: dict[str, Any], enc: dict[str, Any] | None, dense: dict[int, dict[str, Any]]
) -> None:
    f = WIKI18_PASSAGES / n
    build_s = build["chunk_seconds"] + build["bm25_seconds"]
    print(
        f"extrapolation to {WIKI18_PASSAGES / 1e6:.0f}M passages (wiki-18), linear in passages from {n:,} "
        f"(x{f:,.0f}); assumes passages of the same length, the same machine, and disk instead of RAM for mmap:"
    )
    print(
        f"- chunk store + BM25 build: {duration(build_s * f)}; on disk {gb((build['bm25_bytes'] + build['chunks_bytes']) * f)}"
    )
    print(
        f"- BM25 queries/s: phrase-boosted {query['phrase']['qps'] / f:,.2f}, plain {query['plain']['qps'] / f:,.2f} "
        "(per-query cost grows with posting lengths, ~linear in passages)"
    )
    if enc is not None:
        print(f"- MiniLM embedding on this CPU: {duration(WIKI18_PASSAGES / enc['per_second'])}")
    if dense:
        m = max(dense)
        g = WIKI18_PASSAGES / m
        # per-query work: flat scans all N; IVF with nlist = sqrt(N) scans nprobe lists of sqrt(N); HNSW ~ log N
        cost = {
            "flat": (g, "scans all N"),
            "ivf": (g**0.5, "nprobe lists of ~sqrt(N)"),
            "ivf-pq": (g**0.5, "nprobe lists of ~sqrt(N)"),
            "hnsw": (1.0, "~log N, taken as constant"),
        }
        for kind, r in dense[m].items():
            factor, why = cost[kind]
            print(
                f"- {kind}: index {gb(r['bytes'] * g)}, build {duration(r['build_seconds'] * g)} "
                f"(linear from {m:,}; HNSW and IVF training grow somewhat faster), "
                f"{r['qps'] / factor:,.1f} queries/s ({why})"
            )


if __name__ == "__main__":
    raise SystemExit(main())
