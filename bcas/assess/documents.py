"""The documents one MADARA query assesses (MADARA §5.5) and how many No-Filter reads (§5.3).

``gather_documents(item, retriever, config)``:

- ``AssessConfig.doc_source = "retrieval"``: the top ``n_docs`` (10) hits of the retriever
  for the question, from the dataset's whole collection (§5.5: "reranking top-k=5 from 10
  retrieved documents").  Plain BM25 returns only chunks that share a term with the query,
  so over a small collection (the FEVER sample's 345 evidence pages) a query may retrieve
  fewer than ``n_docs``; with ``AssessConfig.pad_docs`` the list is filled up to ``n_docs``
  with other documents of the same collection, drawn in an order seeded by the run seed
  and the item id, and each padded document is marked (``AssessDocument.padded``), so every item chooses among ``n_docs`` documents and the record says how
  many were retrieved (``extra["retrieved_docs"]``) and how many padded.
- ``"item"``: the item's own documents, at most ``n_docs``.

``nf_count(config, m)``: how many of the ``m`` gathered documents the No-Filter generator
reads: all of them by default (§5.3 (1): "NF: all documents to generator (standard
RAG)"), or ``AssessConfig.nf_docs``.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from bcas.assess.agents import AssessDocument
from bcas.config import AssessConfig
from bcas.timing import timed_search


class AssessError(RuntimeError):
    """A MADARA run cannot proceed (missing retriever, missing routing decision, ...)."""


def nf_count(config: AssessConfig, gathered: int) -> int:
    """Documents No-Filter gives the generator: every gathered one, or the first ``nf_docs``."""
    return gathered if config.nf_docs is None else min(config.nf_docs, gathered)


async def gather_documents(
    item: Any, retriever: Any, config: AssessConfig, seed: int | str = 0
) -> list[AssessDocument]:
    """The documents to assess for ``item``, from the retriever or the item (MADARA §5.5)."""
    if config.doc_source == "item":
        return [AssessDocument(d.id, d.title, d.text) for d in list(item.documents)[: config.n_docs]]
    if retriever is None:
        raise AssessError(
            "AssessConfig.doc_source='retrieval' needs a retriever (bcas.retrieval.build_retriever); "
            "pass one, or set doc_source='item' to use the item's own documents"
        )
    with timed_search():
        if hasattr(retriever, "asearch"):
            hits = await retriever.asearch(item.question, k=config.n_docs)
        else:
            hits = await asyncio.to_thread(retriever.search, item.question, config.n_docs)
    docs = [AssessDocument.from_any(h) for h in list(hits)[: config.n_docs]]
    if config.pad_docs and len(docs) < config.n_docs:
        docs.extend(padding(retriever, docs, config.n_docs - len(docs), f"{seed}:{item.id}"))
    return docs


def padding(retriever: Any, docs: list[AssessDocument], needed: int, seed: str) -> list[AssessDocument]:
    """Up to ``needed`` documents of the retriever's collection not among ``docs``, in a seeded order.

    One chunk per document (the first drawn); a collection with fewer distinct documents
    gives what it has.  The order depends only on ``seed`` and the collection's size.
    """
    chunks = getattr(retriever, "chunks", None)
    if chunks is None:
        raise AssessError(
            f"AssessConfig.pad_docs needs a retriever with a chunk collection (.chunks); "
            f"{type(retriever).__name__} has none: set pad_docs=False"
        )
    rng = random.Random(seed)
    n = len(chunks)
    # A sample a few times larger than needed is enough unless most of it is taken.
    order = rng.sample(range(n), min(n, 8 * (needed + len(docs))))
    if len(order) < n and len({chunks[p].doc_id for p in order} - {d.doc_id for d in docs}) < needed:
        order = rng.sample(range(n), n)
    taken = {d.doc_id for d in docs}
    out: list[AssessDocument] = []
    for pos in order:
        if len(out) >= needed:
            break
        chunk = chunks[pos]
        if chunk.doc_id in taken:
            continue
        taken.add(chunk.doc_id)
        out.append(AssessDocument(chunk.doc_id, chunk.title, chunk.text, chunk.id, None, padded=True))
    return out
