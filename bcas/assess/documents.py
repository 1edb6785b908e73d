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

Order (:func:`order_documents`): by retrieval score, best first; documents of equal score
and documents without one (an item's own, padding) in a shuffle seeded by the run seed
and the item id and keyed on each document's text, never in the dataset's layout.  A
file's layout can carry its annotations (ConflictQA lists the memory side's two
documents first, and the memory side supports the gold answer on 698 of 1,000 items), and
treatments that keep the first of equal scores (PDE, SDA) would follow it.  The paper
(§5.5) says only that 10 documents are retrieved; the tie rule is ours
(``docs/fidelity.md``).  An item's documents are ordered before ``n_docs`` cuts them.

``nf_count(config, m)``: how many of the ``m`` gathered documents the No-Filter generator
reads: all of them by default (§5.3 (1): "NF: all documents to generator (standard
RAG)"), or ``AssessConfig.nf_docs``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from bcas.assess.agents import AssessDocument
from bcas.config import AssessConfig
from bcas.retrieval.retriever import content_key
from bcas.timing import timed_search


class AssessError(RuntimeError):
    """A MADARA run cannot proceed (missing retriever, missing routing decision, ...)."""


def nf_count(config: AssessConfig, gathered: int) -> int:
    """Documents No-Filter gives the generator: every gathered one, or the first ``nf_docs``."""
    return gathered if config.nf_docs is None else min(config.nf_docs, gathered)


DOC_ORDER = "retrieval score, then a seeded shuffle"  # what a record's extra["doc_order"] says


def order_documents(docs: Sequence[AssessDocument], key: str) -> list[AssessDocument]:
    """``docs`` by retrieval score (best first); equal scores and unscored documents in a shuffle
    seeded by ``key`` (``"<seed>:<item id>"``) over their title and text, so the order depends
    on neither the dataset's layout nor its ids.  Scored documents come before unscored ones."""

    def rank(doc: AssessDocument) -> tuple[int, float, str]:
        score = doc.retrieval_score
        unscored = score is None or score != score  # NaN counts as no score
        return (1 if unscored else 0, 0.0 if unscored else -float(score), content_key(doc.title, doc.text, key))  # type: ignore[arg-type]

    return sorted(docs, key=rank)


async def gather_documents(
    item: Any, retriever: Any, config: AssessConfig, seed: int | str = 0
) -> list[AssessDocument]:
    """The documents to assess for ``item``, from the retriever or the item (MADARA §5.5), in
    :func:`order_documents`'s order."""
    key = f"{seed}:{item.id}"
    if config.doc_source == "item":
        own = [AssessDocument(d.id, d.title, d.text) for d in item.documents]
        return order_documents(own, key)[: config.n_docs]
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
        docs.extend(padding(retriever, docs, config.n_docs - len(docs), key))
    return order_documents(docs, key)


def padding(retriever: Any, docs: list[AssessDocument], needed: int, seed: str) -> list[AssessDocument]:
    """Up to ``needed`` documents of the retriever's collection not among ``docs``, in a seeded order.

    One chunk per document (the first drawn); a collection with fewer distinct documents
    gives what it has.  The draw depends only on ``seed`` and the collection's content: it
    samples positions of the collection sorted by its chunks' text (:func:`_content_order`),
    not of the file's layout.
    """
    chunks = getattr(retriever, "chunks", None)
    if chunks is None:
        raise AssessError(
            f"AssessConfig.pad_docs needs a retriever with a chunk collection (.chunks); "
            f"{type(retriever).__name__} has none: set pad_docs=False"
        )
    rng = random.Random(seed)
    n = len(chunks)
    canonical = _content_order(chunks)
    # A sample a few times larger than needed is enough unless most of it is taken.
    order = [canonical[p] for p in rng.sample(range(n), min(n, 8 * (needed + len(docs))))]
    if len(order) < n and len({chunks[p].doc_id for p in order} - {d.doc_id for d in docs}) < needed:
        order = [canonical[p] for p in rng.sample(range(n), n)]
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


_CONTENT_ORDERS: dict[int, tuple[Any, list[int]]] = {}


def _content_order(chunks: Sequence[Any]) -> list[int]:
    """Positions of ``chunks`` sorted by their title and text (then id): the same list for the
    same collection whatever order its file lists it in.  Computed once per collection."""
    cached = _CONTENT_ORDERS.get(id(chunks))
    if cached is not None and cached[0] is chunks:
        return cached[1]
    order = sorted(range(len(chunks)), key=lambda p: (chunks[p].title, chunks[p].text, chunks[p].id))
    if len(_CONTENT_ORDERS) >= 8:  # a session searches a few collections; keep the last ones
        _CONTENT_ORDERS.pop(next(iter(_CONTENT_ORDERS)))
    _CONTENT_ORDERS[id(chunks)] = (chunks, order)
    return order
