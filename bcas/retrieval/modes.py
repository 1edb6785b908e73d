"""The first stage of each built-in retrieval mode (BCAS §3.5), as registered in
:data:`bcas.registry.RETRIEVAL_MODES`.

A mode's target takes ``(retriever, query, n, exclude)`` and returns at most ``n``
ranked ``(chunk position, score)`` pairs.  Its metadata says which indexes it needs
(``lexical``: BM25; ``dense``: an embedder and a dense index), whether a reranker
re-orders its candidates (``rerank``) and its short ``label`` in case ids.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bcas.retrieval.hybrid import convex_fuse, rrf_fuse

Ranked = list[tuple[int, float]]


def bm25(retriever: Any, query: str, n: int, exclude: np.ndarray | None = None) -> Ranked:
    """Phrase-boosted BM25 (plain bm25s with ``phrase_boost=False``)."""
    ranked: Ranked = retriever.lexical(query, n, exclude)
    return ranked


def dense(retriever: Any, query: str, n: int, exclude: np.ndarray | None = None) -> Ranked:
    """Cosine similarity of the query embedding."""
    ranked: Ranked = retriever.semantic(query, n, exclude)
    return ranked


def hybrid(retriever: Any, query: str, n: int, exclude: np.ndarray | None = None) -> Ranked:
    """BM25 and dense, each to ``candidates`` deep, fused by RRF or a convex combination."""
    cfg = retriever.config
    depth = max(cfg.candidates, n)
    lexical = retriever.lexical(query, depth, exclude)
    semantic = retriever.semantic(query, depth, exclude)
    if cfg.fusion == "rrf":
        fused = rrf_fuse([[i for i, _ in lexical], [i for i, _ in semantic]], cfg.rrf_k)
    else:
        fused = convex_fuse(lexical, semantic, cfg.fusion_alpha)
    return list(fused[:n])
