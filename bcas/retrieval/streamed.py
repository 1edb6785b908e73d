"""A retriever's parts built as streams into the index cache, and loaded memory-mapped (BCAS §3.5).

``build_retriever`` with a cache folder (the default) comes here; with
``cache_dir=False`` it builds in memory instead.  Components, each one cache folder
(``bcas.retrieval.index``):

- ``chunks``: the chunk store (:mod:`bcas.retrieval.store`), written in one pass
  over the documents.  Keyed by the collection hash, or, when the caller names the
  source (``source_hash``, e.g. a corpus's content hash), by the source, so a cached
  corpus is not even read again;
- ``bm25``: phrase-boosted BM25 written by :mod:`bcas.retrieval.bm25_stream` from the
  store's texts and loaded with ``mmap=True`` (bm25s's memory-mapped arrays);
- ``embeddings``: the chunk vectors in shards (:mod:`bcas.retrieval.embed_shards`),
  computed in a work folder that survives a kill, so a rerun resumes;
- ``dense``: the faiss index (:mod:`bcas.retrieval.ann`) built block by block from the
  embeddings, keyed by the embedder and the index's build parameters, its realised
  parameters in the manifest's ``info``; flat and HNSW vectors load memory-mapped.

A component is built only when its cache folder is missing or damaged; every build
writes to a private folder renamed into place, so a killed build leaves no half index.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bcas.data import Document
from bcas.retrieval.ann import DenseIndex, DenseIndexSpec
from bcas.retrieval.bm25 import BM25Index
from bcas.retrieval.bm25_stream import write_bm25_index
from bcas.retrieval.embed_shards import SHARD_SIZE, EmbeddingShards, embed_resumable, shard_files
from bcas.retrieval.index import IndexCache
from bcas.retrieval.store import STORE_FORMAT_VERSION, ChunkStore, write_chunk_store


def chunk_params(chunk_tokens: int, chunk_overlap: int) -> dict[str, Any]:
    return {"chunk_tokens": chunk_tokens, "chunk_overlap": chunk_overlap, "store": STORE_FORMAT_VERSION}


def chunk_store(
    documents: Iterable[Document],
    cache: IndexCache,
    *,
    chunk_tokens: int,
    chunk_overlap: int,
    source_hash: str | None = None,
    progress: bool = True,
) -> ChunkStore:
    """The cached chunk store of ``documents`` (read only when it is not cached under ``source_hash``)."""
    params = chunk_params(chunk_tokens, chunk_overlap)
    if source_hash is not None:
        cached = cache.lookup("chunks", f"source:{source_hash}", params, ChunkStore)
        if cached is not None:
            return cached
    tmp = cache.new_folder("chunks")
    started = time.perf_counter()
    try:
        meta = write_chunk_store(
            documents, tmp, chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap, progress=progress
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    key = f"source:{source_hash}" if source_hash is not None else meta["collection"]
    if source_hash is None:
        cached = cache.lookup("chunks", key, params, ChunkStore)
        if cached is not None:  # the same chunks are stored already
            shutil.rmtree(tmp, ignore_errors=True)
            return cached
    final = cache.commit(tmp, "chunks", key, params, build_seconds=time.perf_counter() - started, info=meta)
    return ChunkStore(final)


def bm25_component(
    store: ChunkStore,
    cache: IndexCache,
    params: dict[str, Any],
    *,
    phrase_slop: int,
    stemmer: str | None,
    progress: bool = True,
) -> BM25Index:
    index, _ = cache.load_or_write(
        "bm25",
        store.collection,
        params,
        write=lambda folder: write_bm25_index(
            store.iter_texts(), folder, stemmer=stemmer, phrase_slop=phrase_slop, progress=progress
        ),
        load=lambda folder: BM25Index.load(folder, mmap=True),
    )
    return index


def embeddings_component(
    store: ChunkStore,
    cache: IndexCache,
    embedder: Any,
    *,
    shard_size: int = SHARD_SIZE,
    batch_size: int = 64,
    progress: bool = True,
) -> EmbeddingShards:
    """The chunk vectors, computed resumably (a killed build continues from its last shard)."""
    params = {"embedder": embedder.model_id, "dim": embedder.dim}

    realised: dict[str, Any] = {}

    def write(folder: Path) -> dict[str, Any]:
        work = cache.work_folder("embeddings", store.collection, params)
        meta = embed_resumable(
            embedder,
            store.iter_texts,
            len(store),
            work,
            shard_size=shard_size,
            batch_size=batch_size,
            progress=progress,
        )
        for f in [*shard_files(work), work / "embeddings.json"]:
            f.rename(folder / f.name)
        shutil.rmtree(work, ignore_errors=True)
        realised.update(meta)
        return meta

    shards, cached = cache.load_or_write("embeddings", store.collection, params, write=write, load=EmbeddingShards)
    if not cached:
        shards.speed = {k: realised[k] for k in ("embedded_chunks", "embed_seconds", "chunks_per_s")}
    if len(shards) != len(store):
        raise ValueError(f"embeddings hold {len(shards)} vectors for {len(store)} chunks")
    return shards


def dense_component(
    store: ChunkStore,
    cache: IndexCache,
    embedder: Any,
    spec: DenseIndexSpec,
    *,
    progress: bool = True,
    shard_size: int = SHARD_SIZE,
) -> DenseIndex:
    """The faiss index of the chunk vectors (embedding them first when they are not cached)."""
    params = {"embedder": embedder.model_id, "dim": embedder.dim, **spec.build_params()}

    def load(folder: Path) -> DenseIndex:
        return DenseIndex.load(folder / "faiss.index", spec.kind, spec, mmap=True)

    cached = cache.lookup("dense", store.collection, params, load)
    if cached is not None:
        return cached
    spec.check_size(len(store))  # before hours of embedding
    if spec.kind == "ivf-pq":
        spec.pq_m_for(embedder.dim)
    shards = embeddings_component(store, cache, embedder, shard_size=shard_size, progress=progress)

    def write(folder: Path) -> dict[str, Any]:
        index = DenseIndex.build_blocks(shards.blocks, len(shards), shards.dim, spec, shards.take, progress=progress)
        index.save(folder / "faiss.index")
        return index.info

    index, _ = cache.load_or_write("dense", store.collection, params, write=write, load=load)
    index.embed_speed = shards.speed
    return index
