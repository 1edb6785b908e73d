"""Retrieval over per-dataset collections: phrase-boosted BM25, dense, hybrid, re-ranked.

Implements BCAS §3.5 (BM25 with phrase boosting, hybrid search, re-ranking) with the
generative reranker of MADARA §6.4 as the CPU default.  Public API::

    from bcas.retrieval import build_retriever
    retriever = build_retriever(dataset.documents, RetrievalConfig(mode="hybrid"))
    hits = retriever.search("who wrote ...", k=5, exclude_ids=seen_chunk_ids)

Modules: ``chunking`` (chunks and ids), ``bm25`` (phrase-boosted BM25), ``dense``
(embedder registry, faiss), ``hybrid`` (RRF and convex fusion), ``rerank`` (reranker
registry; ``NAME:PATH`` names a local folder, e.g. ``cross-encoder:PATH``), ``index``
(disk cache), ``retriever`` (the pipelines), ``evaluate`` (recall@k and MRR:
``bcas index evaluate --dataset hotpotqa``).
"""

from bcas.retrieval.chunking import Chunk, chunk_documents
from bcas.retrieval.dense import (
    EMBEDDERS,
    Embedder,
    EmbedderError,
    embedder_known,
    embedder_names,
    load_embedder,
    register_embedder,
)
from bcas.retrieval.index import IndexCacheWarning
from bcas.retrieval.rerank import (
    RERANKERS,
    Reranker,
    RerankerError,
    load_reranker,
    register_reranker,
    reranker_known,
    reranker_names,
)
from bcas.retrieval.retriever import Hit, RetrievalError, Retriever, build_retriever

__all__ = [
    "EMBEDDERS",
    "RERANKERS",
    "Chunk",
    "Embedder",
    "EmbedderError",
    "Hit",
    "IndexCacheWarning",
    "Reranker",
    "RerankerError",
    "RetrievalError",
    "Retriever",
    "build_retriever",
    "chunk_documents",
    "embedder_known",
    "embedder_names",
    "load_embedder",
    "load_reranker",
    "register_embedder",
    "register_reranker",
    "reranker_known",
    "reranker_names",
]
