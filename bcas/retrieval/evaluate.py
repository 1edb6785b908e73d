"""Retrieval evaluation: recall@k and MRR of the supporting documents (BCAS §3.5, §4).

The queries are the items' questions; the collection is the *whole* dataset's
document collection (every item's documents, de-duplicated: ``Dataset.documents``),
so each question competes against all other items' paragraphs, as an agent's
searches do.  An item's supporting documents are mapped to their ids in that
collection (de-duplication keeps the first id of equal (title, text) documents).

- recall@k: the fraction of an item's supporting documents among the documents of
  its top ``k`` hits, averaged over items with at least one supporting document.
- MRR@k: the reciprocal rank of the first hit whose document is supporting (0 when
  none is in the top ``k``), averaged over the same items.

Modes: ``bm25-plain`` (BM25 without phrase boosts), ``bm25`` (phrase-boosted),
``dense``, ``hybrid`` and ``hybrid_rerank``.  Re-ranking is the slow one on CPU, so
it may run on a seeded subset of the items (``--rerank-limit``) with a smaller
candidate pool (``--rerank-candidates``); the table says how many items each row used.

    bcas index evaluate --dataset hotpotqa --k 5 --rerank-limit 40
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bcas.config import RetrievalConfig
from bcas.data import Dataset, Item, load_dataset
from bcas.llm.base import ChatModel
from bcas.retrieval.progress import bars_off
from bcas.retrieval.retriever import Hit, Retriever, build_retriever

MODES = ("bm25-plain", "bm25", "dense", "hybrid", "hybrid_rerank")


@dataclass(frozen=True)
class ModeScores:
    mode: str
    items: int
    k: int
    recall: float
    mrr: float
    seconds_per_query: float
    candidates: int | None = None


def mode_config(mode: str, base: RetrievalConfig) -> RetrievalConfig:
    """The ``RetrievalConfig`` of an evaluation mode, other fields from ``base``."""
    if mode == "bm25-plain":
        return dataclasses.replace(base, mode="bm25", phrase_boost=False)
    if mode == "bm25":
        return dataclasses.replace(base, mode="bm25", phrase_boost=True)
    if mode in ("dense", "hybrid", "hybrid_rerank"):
        return dataclasses.replace(base, mode=mode)
    raise ValueError(f"unknown evaluation mode {mode!r}; choose from {MODES}")


def canonical_ids(dataset: Dataset) -> dict[tuple[str, str], str]:
    """(title, text) -> the id that document has in the de-duplicated collection."""
    canonical: dict[tuple[str, str], str] = {}
    for doc in dataset.documents:
        canonical.setdefault((doc.title, doc.text), doc.id)
    return canonical


def supporting_in_collection(canonical: dict[tuple[str, str], str], item: Item) -> set[str]:
    """The item's supporting document ids as ids of the de-duplicated collection."""
    by_id = {d.id: d for d in item.documents}
    return {canonical[(by_id[s].title, by_id[s].text)] for s in item.supporting}


def recall_and_rr(hits: Sequence[Hit], supporting: set[str], k: int) -> tuple[float, float]:
    """recall@k and reciprocal rank of the first supporting hit within the top ``k``."""
    top = hits[:k]
    found = {h.doc_id for h in top} & supporting
    rr = next((1.0 / rank for rank, h in enumerate(top, start=1) if h.doc_id in supporting), 0.0)
    return len(found) / len(supporting), rr


async def _score_mode(
    retriever: Retriever, items: Sequence[Item], gold: dict[str, set[str]], k: int, progress: bool
) -> tuple[float, float, float]:
    from tqdm.auto import tqdm

    recall = rr = 0.0
    started = time.perf_counter()
    for item in tqdm(items, desc=f"evaluate {retriever.config.mode}", disable=bars_off(progress), leave=False):
        hits = await retriever.asearch(item.question, k=k)
        r, m = recall_and_rr(hits, gold[item.id], k)
        recall += r
        rr += m
    n = max(len(items), 1)
    return recall / n, rr / n, (time.perf_counter() - started) / n


def evaluate_retrieval(
    dataset: str | Dataset,
    *,
    modes: Sequence[str] = MODES,
    k: int = 5,
    limit: int | None = None,
    rerank_limit: int | None = 40,
    rerank_candidates: int | None = None,
    config: RetrievalConfig | None = None,
    model: ChatModel | None = None,
    cache_dir: str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> list[ModeScores]:
    """recall@k and MRR@k per mode over the whole collection of ``dataset``.

    ``limit`` takes a seeded subset of the items as queries (the collection stays
    whole); ``rerank_limit`` / ``rerank_candidates`` shrink the ``hybrid_rerank`` run.
    """
    full = load_dataset(dataset) if isinstance(dataset, str) else dataset
    documents = full.documents
    base = config or RetrievalConfig()
    queries = full.subset(limit, seed)
    items = [it for it in queries.items if it.supporting]
    canonical = canonical_ids(full)
    gold = {it.id: supporting_in_collection(canonical, it) for it in items}
    results: list[ModeScores] = []
    for mode in modes:
        cfg = dataclasses.replace(mode_config(mode, base), k=k)
        mode_items = items
        if mode == "hybrid_rerank":
            if rerank_candidates is not None:
                cfg = dataclasses.replace(cfg, candidates=rerank_candidates)
            if rerank_limit is not None:
                keep = {it.id for it in queries.subset(rerank_limit, seed).items}
                mode_items = [it for it in items if it.id in keep]
        if mode == "hybrid_rerank" and len(mode_items) < len(items):
            # the first stage alone on the same items, for a like-for-like comparison
            first = build_retriever(
                documents, dataclasses.replace(cfg, mode="hybrid"), cache_dir=cache_dir, progress=progress
            )
            recall, mrr, spq = asyncio.run(_score_mode(first, mode_items, gold, k, progress))
            results.append(ModeScores("hybrid (same items)", len(mode_items), k, recall, mrr, spq, cfg.candidates))
        retriever = build_retriever(documents, cfg, model=model, cache_dir=cache_dir, progress=progress)
        try:
            recall, mrr, spq = asyncio.run(_score_mode(retriever, mode_items, gold, k, progress))
        finally:
            asyncio.run(retriever.aclose())
        candidates = cfg.candidates if mode in ("hybrid", "hybrid_rerank") else None
        results.append(ModeScores(mode, len(mode_items), k, recall, mrr, spq, candidates))
    return results


def format_table(results: Sequence[ModeScores]) -> str:
    k = results[0].k if results else 5
    lines = [
        f"| mode | items | recall@{k} | MRR@{k} | candidates | ms/query |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        cand = "" if r.candidates is None else str(r.candidates)
        lines.append(
            f"| {r.mode} | {r.items} | {r.recall:.3f} | {r.mrr:.3f} | {cand} | {1000 * r.seconds_per_query:.1f} |"
        )
    return "\n".join(lines)
