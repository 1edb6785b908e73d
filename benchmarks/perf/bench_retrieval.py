"""Retrieval speed (prints numbers, asserts nothing).

On one dataset collection (default: all HotpotQA documents):

- BM25 index build: chunks/s (analysis, bm25s scoring matrix, phrase index);
- BM25 queries/s, one query at a time, all on the same index and the same analysed
  query tokens: phrase-boosted (ours), boosts off (ours), plain bm25s ``retrieve``
  per query and batched, and rank_bm25's ``BM25Okapi`` when installed.  Every
  competitor is timed the same way: the best of ``--repeats`` passes over all the
  queries (N printed).  The target is phrase-boosted >= 0.5x plain bm25s (per-query
  ``retrieve``);
- index cache: build versus cached load;
- dense encode: chunks/s of the embedder (default MiniLM on CPU);
- reranker: passages/s of the generative ``llm`` reranker on the embedded model.

    python benchmarks/perf/bench_retrieval.py [--dataset hotpotqa] [--queries 400]
        [--dense-chunks 256] [--rerank-passages 16] [--skip-dense] [--skip-rerank]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import tempfile
import time

from bcas.config import RetrievalConfig
from bcas.data import load_dataset
from bcas.retrieval import build_retriever
from bcas.retrieval.bm25 import BM25Index, phrase_boosted_bm25, top_k
from bcas.retrieval.chunking import chunk_documents

TARGET_RATIO = 0.5


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def bench_bm25(dataset: str, n_queries: int, repeats: int) -> None:
    ds = load_dataset(dataset)
    chunks = chunk_documents(ds.documents)
    texts = [c.indexed_text for c in chunks]
    started = time.perf_counter()
    index = BM25Index.build(texts, progress=False)
    build_s = time.perf_counter() - started
    print(f"collection: {dataset}, {len(ds.documents)} documents, {len(chunks)} chunks")
    print(f"bm25 index build: {build_s:.2f} s = {_rate(len(chunks), build_s):,.0f} chunks/s")

    questions = [it.question for it in ds.items][:n_queries]
    tokens = [index.analyzer(q) for q in questions]
    ids = [index.query_ids(q) for q in questions]
    n = len(questions)

    def ours(b2: float, b3: float):
        def run():
            for q in ids:
                top_k(phrase_boosted_bm25(index, q, b2, b3), 5, positive_only=True)

        return run

    def bm25s_single():
        for toks in tokens:
            index.bm25.retrieve([toks], k=5, show_progress=False, n_threads=0)

    def bm25s_batch():
        index.bm25.retrieve(tokens, k=5, show_progress=False, n_threads=0)

    rows = [
        ("phrase-boosted (ours, 20/60)", _best_of(ours(20.0, 60.0), repeats)),
        ("boosts off (ours)", _best_of(ours(0.0, 0.0), repeats)),
        ("plain bm25s retrieve, per query", _best_of(bm25s_single, repeats)),
        ("plain bm25s retrieve, one batch", _best_of(bm25s_batch, repeats)),
    ]
    if importlib.util.find_spec("rank_bm25") is not None:
        import numpy as np
        from rank_bm25 import BM25Okapi

        okapi = BM25Okapi([index.analyzer(t) for t in texts])

        def rank_bm25_run():
            for toks in tokens:
                np.argsort(-okapi.get_scores(toks))[:5]

        rows.append(("rank_bm25 BM25Okapi", _best_of(rank_bm25_run, repeats)))
    else:
        print("rank_bm25 not installed: skipped")
    print(f"\nBM25 queries/s ({n} queries, analysis excluded, best of N={repeats} passes for every row):")
    for name, seconds in rows:
        print(f"  {name:<34} {_rate(n, seconds):>10,.0f} q/s   {1e6 * seconds / n:8.1f} us/q")
    phrase = _rate(n, rows[0][1])
    plain_single = _rate(n, rows[2][1])
    plain_batch = _rate(n, rows[3][1])
    ratio = phrase / plain_single
    print(
        f"  phrase-boosted / plain bm25s: {ratio:.2f}x per query, {phrase / plain_batch:.2f}x vs batch "
        f"(target >= {TARGET_RATIO}x: {'met' if ratio >= TARGET_RATIO else 'NOT met'})"
    )
    started = time.perf_counter()
    for q in questions:
        index.analyzer(q)
    print(f"  query analysis alone: {1e6 * (time.perf_counter() - started) / n:.1f} us/q")


def bench_cache(dataset: str) -> None:
    docs = load_dataset(dataset).documents
    with tempfile.TemporaryDirectory() as tmp:
        cfg = RetrievalConfig(mode="bm25")
        started = time.perf_counter()
        build_retriever(docs, cfg, cache_dir=tmp, progress=False)
        build_s = time.perf_counter() - started
        loads = []
        for _ in range(3):
            started = time.perf_counter()
            build_retriever(docs, cfg, cache_dir=tmp, progress=False)
            loads.append(time.perf_counter() - started)
    load_s = statistics.median(loads)
    print(
        f"\nbm25 retriever: build + store {build_s:.2f} s, cached load {load_s:.2f} s "
        f"(incl. chunking and checksums; {build_s / load_s:.1f}x faster)"
    )


def bench_dense(dataset: str, n_chunks: int, embedder: str) -> None:
    from bcas.retrieval.dense import load_embedder

    texts = [c.indexed_text for c in chunk_documents(load_dataset(dataset).documents)][:n_chunks]
    started = time.perf_counter()
    model = load_embedder(embedder)
    load_s = time.perf_counter() - started
    model.encode(texts[:8])  # warm-up
    started = time.perf_counter()
    model.encode(texts, batch_size=64)
    encode_s = time.perf_counter() - started
    started = time.perf_counter()
    for t in texts[:32]:
        model.encode([t], is_query=True)
    query_s = (time.perf_counter() - started) / min(32, len(texts))
    print(
        f"\ndense encode ({model.model_id}): {_rate(len(texts), encode_s):,.1f} chunks/s over {len(texts)} chunks; "
        f"one query {1000 * query_s:.1f} ms; model load {load_s:.1f} s"
    )


def bench_rerank(dataset: str, n_passages: int) -> None:
    from bcas.llm import load_model
    from bcas.retrieval.rerank import LLMReranker

    ds = load_dataset(dataset)
    item = ds.items[0]
    passages = [f"{d.title}\n{d.text}" for it in ds.items[:5] for d in it.documents][:n_passages]

    async def run() -> tuple[float, str]:
        model = load_model("embedded", cache=False)
        reranker = LLMReranker(model)
        await reranker.score(item.question, passages[:1])  # warm-up
        started = time.perf_counter()
        await reranker.score(item.question, passages)
        elapsed = time.perf_counter() - started
        await model.aclose()
        return elapsed, model.model_id

    elapsed, model_id = asyncio.run(run())
    print(f"\nreranker llm ({model_id}): {_rate(len(passages), elapsed):.2f} passages/s over {len(passages)} passages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dense-chunks", type=int, default=256)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--rerank-passages", type=int, default=16)
    parser.add_argument("--skip-dense", action="store_true")
    parser.add_argument("--skip-rerank", action="store_true")
    args = parser.parse_args()
    bench_bm25(args.dataset, args.queries, args.repeats)
    bench_cache(args.dataset)
    if not args.skip_dense:
        bench_dense(args.dataset, args.dense_chunks, args.embedder)
    if not args.skip_rerank:
        bench_rerank(args.dataset, args.rerank_passages)


if __name__ == "__main__":
    main()
