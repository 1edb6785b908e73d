"""The retriever an agent searches: BM25, dense, hybrid or hybrid + re-ranking (BCAS §3.5).

``build_retriever(documents, config)`` chunks one document collection, loads or
builds the indexes the mode needs (``bcas.retrieval.index``) and returns a
``Retriever``.  Retrieval never crosses collections (BCAS §3.7): one retriever per
dataset collection.

Pipelines per ``RetrievalConfig.mode`` (``k`` = hits returned, ``candidates`` = pool):

- ``bm25``: phrase-boosted BM25 (``phrase_boost=False``: plain BM25), top ``k`` chunks
  sharing at least one term with the query.
- ``dense``: top ``k`` by cosine similarity of the configured embedder.
- ``hybrid``: the top ``max(candidates, k)`` of BM25 and of dense are fused
  (``fusion``: ``rrf`` by default, or ``convex``); the top ``k`` fused are returned.
- ``hybrid_rerank``: the top ``max(candidates, k)`` fused chunks are re-scored by the
  configured reranker and the top ``k`` by reranker score are returned.

``Hit.score`` is the score of the stage that ordered the hits (BM25, cosine, fused,
or reranker score).  Equal BM25 scores are ordered by a hash of the chunk's title and
text (:meth:`Retriever.untied`), never by its place in the collection, so which tied
chunks make the top ``k`` and their order depend on the text alone.  ``exclude_ids`` skips chunks before the top ``k`` are taken: an
entry that is a chunk id (``<doc_id>#<n>``) excludes that chunk, an entry that is a
document id excludes every chunk of the document; unknown ids are ignored.

``asearch`` is the coroutine (re-ranking awaits the reranker's model).  ``search``
is its synchronous form: modes without re-ranking run directly; ``hybrid_rerank``
runs the coroutine on the retriever's own event loop, so ``search`` may be called
from synchronous code only; inside a running event loop use ``await asearch``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bcas.config import RetrievalConfig
from bcas.data import Document
from bcas.llm.base import ChatModel
from bcas.registry import RETRIEVAL_MODES, mode_uses
from bcas.retrieval.ann import DenseIndex, DenseIndexError, DenseIndexSpec
from bcas.retrieval.bm25 import BM25_B, BM25_K1, DEFAULT_STEMMER, BM25Index
from bcas.retrieval.chunking import Chunk, chunk_documents, collection_hash
from bcas.retrieval.dense import (
    Embedder,
    embed_chunks,
    embedder_known,
    embedder_names,
    load_embedder,
)
from bcas.retrieval.embed_shards import build_speed
from bcas.retrieval.index import IndexCache
from bcas.retrieval.rerank import Reranker, load_reranker, reranker_known, reranker_names
from bcas.retrieval.store import ChunkList, ChunkStore
from bcas.retrieval.streamed import bm25_component, chunk_store, dense_component

log = logging.getLogger(__name__)


class RetrievalError(RuntimeError):
    """A retriever cannot be built or used as asked; the message says what to change."""


@dataclass(frozen=True)
class Hit:
    doc_id: str
    chunk_id: str
    title: str
    text: str
    score: float


def content_key(title: str, text: str, seed: str | None = None) -> str:
    """A tie-break key of a passage that depends on its title and text only (never its id or place);
    with ``seed``, a shuffle of them seeded by it (MADARA's document order, bcas.assess.documents)."""
    blob = f"{title}\x00{text}" if seed is None else f"{seed}\x00{title}\x00{text}"
    return hashlib.sha256(blob.encode()).hexdigest()


class Retriever:
    """Search over one chunked collection; see the module docstring for the pipelines."""

    def __init__(
        self,
        chunks: Sequence[Chunk],
        config: RetrievalConfig,
        *,
        bm25: BM25Index | None = None,
        dense: DenseIndex | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        owns_reranker: bool = False,
        collection: str | None = None,
    ) -> None:
        if mode_uses(config.mode, "lexical") and bm25 is None:
            raise RetrievalError(f"mode {config.mode!r} needs a BM25 index")
        if mode_uses(config.mode, "dense") and (dense is None or embedder is None):
            raise RetrievalError(f"mode {config.mode!r} needs a dense index and its embedder")
        if mode_uses(config.mode, "rerank") and reranker is None:
            raise RetrievalError(f"mode {config.mode!r} needs a reranker")
        # On disk (a ChunkStore, read by position) or in memory; either answers ``positions``.
        self.chunks: ChunkStore | ChunkList = chunks if isinstance(chunks, ChunkStore) else ChunkList(chunks)
        self.config = config
        self.bm25 = bm25
        self.dense = dense
        self.embedder = embedder
        self.reranker = reranker
        if collection is None:
            collection = self.chunks.collection if isinstance(self.chunks, ChunkStore) else collection_hash(self.chunks)
        self.collection = collection
        self._owns_reranker = owns_reranker
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def embed_speed(self) -> dict[str, Any] | None:
        """``embedded_chunks``, ``embed_seconds`` and ``chunks_per_s`` when building this retriever
        embedded chunks (``None``: no dense index, or its vectors came from the cache)."""
        return self.dense.embed_speed if self.dense is not None else None

    def __repr__(self) -> str:
        return f"Retriever(mode={self.config.mode!r}, chunks={len(self.chunks)}, collection={self.collection[:12]})"

    # -- stages -------------------------------------------------------------------------

    def _excluded(self, exclude_ids: Iterable[str]) -> np.ndarray | None:
        return self.chunks.positions(exclude_ids)

    def lexical(self, query: str, n: int, exclude: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top ``n`` (chunk position, BM25 score) pairs, phrase-boosted unless ``phrase_boost=False``."""
        assert self.bm25 is not None
        cfg = self.config
        boost2, boost3 = (cfg.bigram_boost, cfg.trigram_boost) if cfg.phrase_boost else (0.0, 0.0)
        idx, scores = self.bm25.search(query, n, bigram_boost=boost2, trigram_boost=boost3, exclude=exclude, ties=True)
        return self.untied([(int(i), float(s)) for i, s in zip(idx, scores, strict=True)], n)

    def untied(self, ranked: Sequence[tuple[int, float]], n: int) -> list[tuple[int, float]]:
        """``ranked`` (best first, every chunk tied with the ``n``-th included) cut to ``n``, each run
        of equal scores ordered by a hash of its chunks' title and text.

        Equal BM25 scores are common over short passages; broken by position they would follow
        the file's layout (ConflictQA lists its memory side first), so the order, and which of
        the tied chunks make the cut, depend on the text alone.
        """
        out: list[tuple[int, float]] = []
        i = 0
        while i < len(ranked) and len(out) < n:
            j = i
            while j < len(ranked) and ranked[j][1] == ranked[i][1]:
                j += 1
            run = list(ranked[i:j])
            if len(run) > 1:
                run.sort(key=lambda ps: content_key(self.chunks[ps[0]].title, self.chunks[ps[0]].text))
            out.extend(run[: n - len(out)])
            i = j
        return out

    def semantic(self, query: str, n: int, exclude: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top ``n`` (chunk position, cosine similarity) pairs."""
        assert self.dense is not None and self.embedder is not None
        vector = self.embedder.encode([query], is_query=True)[0]
        idx, scores = self.dense.search(vector, n, exclude)
        return [(int(i), float(s)) for i, s in zip(idx, scores, strict=True)]

    def first_stage(self, query: str, n: int, exclude: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Ranked (chunk position, score) pairs of the mode before any re-ranking, at most ``n``."""
        ranked: list[tuple[int, float]] = RETRIEVAL_MODES.get(self.config.mode)(self, query, n, exclude)
        return ranked

    def _hits(self, ranked: Sequence[tuple[int, float]]) -> list[Hit]:
        out = []
        for pos, score in ranked:
            c = self.chunks[pos]
            out.append(Hit(c.doc_id, c.id, c.title, c.text, float(score)))
        return out

    # -- public search ------------------------------------------------------------------

    def _check_query(self, query: str, k: int | None) -> int:
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        k = self.config.k if k is None else k
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        return k

    async def asearch(self, query: str, k: int | None = None, exclude_ids: Iterable[str] = ()) -> list[Hit]:
        """The top ``k`` (default ``config.k``) hits for ``query``, best first."""
        k = self._check_query(query, k)
        exclude = self._excluded(exclude_ids)
        if not mode_uses(self.config.mode, "rerank"):
            return self._hits(self.first_stage(query, k, exclude))
        assert self.reranker is not None
        pool = self.first_stage(query, max(self.config.candidates, k), exclude)
        if not pool:
            return []
        scores = await self.reranker.score(query, [self.chunks[pos].indexed_text for pos, _ in pool])
        if len(scores) != len(pool):
            raise RetrievalError(f"reranker {self.reranker.name!r} returned {len(scores)} scores for {len(pool)}")
        # stable sort: equal reranker scores keep the fused order
        order = sorted(range(len(pool)), key=lambda j: -scores[j])[:k]
        return self._hits([(pool[j][0], scores[j]) for j in order])

    def search(self, query: str, k: int | None = None, exclude_ids: Iterable[str] = ()) -> list[Hit]:
        """Synchronous ``asearch`` (see the module docstring for event-loop rules)."""
        if not mode_uses(self.config.mode, "rerank"):
            k = self._check_query(query, k)
            return self._hits(self.first_stage(query, k, self._excluded(exclude_ids)))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RetrievalError(
                "Retriever.search with re-ranking cannot run inside a running event loop; use await retriever.asearch()"
            )
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(self.asearch(query, k, exclude_ids))

    async def aclose(self) -> None:
        """Release the reranker's model if this retriever created it."""
        if self.reranker is not None and self._owns_reranker:
            await self.reranker.aclose()
            self._owns_reranker = False

    def close(self) -> None:
        if self._owns_reranker and self.reranker is not None:
            loop = self._loop if self._loop is not None and not self._loop.is_closed() else asyncio.new_event_loop()
            loop.run_until_complete(self.aclose())
            if loop is not self._loop:
                loop.close()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.close()


def check_model_choice(role: str, name: str) -> str:
    """Validate a retrieval model name chosen for a run (``--bcas-embedder`` / ``--bcas-reranker``).

    ``role`` is ``embedder`` or ``reranker``.  Returns the name; ``ValueError`` names the
    known choices, or the folder that ``cross-encoder:PATH`` / ``sentence-transformers:PATH``
    lacks.  Nothing is loaded.
    """
    known, names = (embedder_known, embedder_names) if role == "embedder" else (reranker_known, reranker_names)
    if not known(name):
        raise ValueError(f"unknown {role} {name!r}; known: {', '.join(names())}")
    head, sep, path = name.partition(":")
    if sep and head in ("cross-encoder", "sentence-transformers") and not Path(path).expanduser().is_dir():
        raise ValueError(f"{role} {name!r}: {path} is not a folder (a {head} saved with its save() method)")
    return name


_EMBEDDERS_LOADED: dict[str, Embedder] = {}


def shared_embedder(name: str) -> Embedder:
    """The named embedder, loaded once per process (retrievers of one run share its weights)."""
    if name not in _EMBEDDERS_LOADED:
        _EMBEDDERS_LOADED[name] = load_embedder(name)
    return _EMBEDDERS_LOADED[name]


def _bm25_params(config: RetrievalConfig) -> dict[str, Any]:
    import bm25s

    return {
        "stemmer": DEFAULT_STEMMER,
        "phrase_slop": config.phrase_slop,
        "k1": BM25_K1,
        "b": BM25_B,
        "bm25s": bm25s.__version__.rsplit(".", 1)[0],
    }


def build_retriever(
    documents: Iterable[Document],
    config: RetrievalConfig | None = None,
    *,
    model: ChatModel | None = None,
    embedder: str | Embedder | None = None,
    reranker: str | Reranker | None = None,
    cache_dir: str | Path | bool | None = None,
    progress: bool = True,
    source_hash: str | None = None,
) -> Retriever:
    """Chunk ``documents`` (one collection) and load or build the indexes ``config.mode`` needs.

    ``model``: the ``ChatModel`` the ``llm`` reranker runs on (default: the embedded
    model).  ``embedder`` / ``reranker``: a registered name or an instance, overriding
    ``config.embedder`` / ``config.reranker``.  ``cache_dir``: the folder of index
    caches (default ``bcas.paths.index_dir()``), built as streams and
    loaded memory-mapped (``bcas.retrieval.streamed``); ``False`` builds in memory
    without caching.  ``progress``: show progress bars while building.
    ``source_hash``: the identity of ``documents`` (e.g. ``Corpus.hash``); with it a
    cached collection is found without reading the documents again.
    """
    config = config or RetrievalConfig()
    embedder_choice = embedder if embedder is not None else config.embedder
    reranker_choice = reranker if reranker is not None else config.reranker
    spec = _checked_choices(config, embedder_choice, reranker_choice)

    # The configured reranker loads first: if it cannot run, fail before minutes of indexing.
    reranker_obj: Reranker | None = None
    owns = False
    if mode_uses(config.mode, "rerank"):
        if isinstance(reranker_choice, str):
            reranker_obj = load_reranker(reranker_choice, model=model)
            owns = True
        else:
            reranker_obj = reranker_choice

    cache = (
        None if cache_dir is False else IndexCache(None if cache_dir is None or cache_dir is True else Path(cache_dir))
    )
    embedder_obj: Embedder | None = None
    if mode_uses(config.mode, "dense"):
        embedder_obj = shared_embedder(embedder_choice) if isinstance(embedder_choice, str) else embedder_choice
    chunks: Sequence[Chunk]
    if cache is None:
        chunks, bm25_index, dense_index = _build_in_memory(documents, config, spec, embedder_obj, progress)
        collection = collection_hash(chunks)
    else:
        store, bm25_index, dense_index = _build_cached(
            documents, config, spec, embedder_obj, cache, source_hash=source_hash, progress=progress
        )
        chunks, collection = store, store.collection
    if dense_index is not None and dense_index.size != len(chunks):
        raise RetrievalError(f"dense index holds {dense_index.size} vectors for {len(chunks)} chunks")

    return Retriever(
        chunks,
        config,
        bm25=bm25_index,
        dense=dense_index,
        embedder=embedder_obj,
        reranker=reranker_obj,
        owns_reranker=owns,
        collection=collection,
    )


def _checked_choices(config: RetrievalConfig, embedder: str | Embedder, reranker: str | Reranker) -> DenseIndexSpec:
    """The dense index's parameters, after refusing unknown model names before any expensive build."""
    try:
        spec = DenseIndexSpec.from_config(config)
    except DenseIndexError as exc:
        raise RetrievalError(str(exc)) from None
    if mode_uses(config.mode, "dense") and isinstance(embedder, str) and not embedder_known(embedder):
        raise RetrievalError(f"unknown embedder {embedder!r}; known embedders: {', '.join(embedder_names())}")
    if mode_uses(config.mode, "rerank") and isinstance(reranker, str) and not reranker_known(reranker):
        raise RetrievalError(f"unknown reranker {reranker!r}; known rerankers: {', '.join(reranker_names())}")
    return spec


def _build_cached(
    documents: Iterable[Document],
    config: RetrievalConfig,
    spec: DenseIndexSpec,
    embedder: Embedder | None,
    cache: IndexCache,
    *,
    source_hash: str | None,
    progress: bool,
) -> tuple[ChunkStore, BM25Index | None, DenseIndex | None]:
    """Chunks and indexes built as streams into ``cache`` (or found there) and loaded memory-mapped."""
    store = chunk_store(
        documents,
        cache,
        chunk_tokens=config.chunk_tokens,
        chunk_overlap=config.chunk_overlap,
        source_hash=source_hash,
        progress=progress,
    )
    if not len(store):
        raise RetrievalError("the collection has no text to index (no documents, or only empty ones)")
    bm25_index = None
    if mode_uses(config.mode, "lexical"):
        bm25_index = bm25_component(
            store,
            cache,
            _bm25_params(config),
            phrase_slop=config.phrase_slop,
            stemmer=DEFAULT_STEMMER,
            progress=progress,
        )
    dense_index = None
    if embedder is not None:
        try:
            dense_index = dense_component(store, cache, embedder, spec, progress=progress)
        except DenseIndexError as exc:
            raise RetrievalError(str(exc)) from None
    return store, bm25_index, dense_index


def _build_in_memory(
    documents: Iterable[Document],
    config: RetrievalConfig,
    spec: DenseIndexSpec,
    embedder: Embedder | None,
    progress: bool,
) -> tuple[list[Chunk], BM25Index | None, DenseIndex | None]:
    """Chunks and indexes held in memory, nothing written (``cache_dir=False``)."""
    chunks = chunk_documents(documents, config.chunk_tokens, config.chunk_overlap)
    if not chunks:
        raise RetrievalError("the collection has no text to index (no documents, or only empty ones)")
    texts = [c.indexed_text for c in chunks]
    bm25_index = None
    if mode_uses(config.mode, "lexical"):
        bm25_index = BM25Index.build(texts, phrase_slop=config.phrase_slop, progress=progress)
    dense_index = None
    if embedder is not None:
        try:
            started = time.perf_counter()
            vectors = embed_chunks(embedder, texts, progress=progress)
            speed = build_speed(len(texts), time.perf_counter() - started)
            dense_index = DenseIndex.build(vectors, spec.kind, spec)
            dense_index.embed_speed = speed
        except DenseIndexError as exc:
            raise RetrievalError(str(exc)) from None
    return chunks, bm25_index, dense_index
