"""What a user sees when an index is found in the cache under the wrong key.

Every retrieval parameter that shapes a BM25 or dense index is part of the index's cache key
(``bcas.retrieval.index.cache_key``): a run with another setting must build its own index,
never silently reuse one built with the old setting (its results would be the old setting's).
Parameters read only at query time must reuse the index.  Each parameter is varied in turn
from one configuration, against one cache folder: a shaping one adds a folder of its
component and searches as an index built fresh (uncached) with that setting does; a
query-time one adds none.  The embedder is a small deterministic test double (the
parameters, not the vectors' quality, are under test; MiniLM's cached index is exercised in
``test_retriever.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bcas.config import RetrievalConfig
from bcas.data import Document
from bcas.retrieval import build_retriever
from bcas.retrieval.dense import Embedder

WORDS = "corliss archer film radio temple shirley protocol chief government comedy program voice".split()
FILLER = "the young old tall famous quiet".split()


def corpus() -> list[Document]:
    """Documents where the gap between two query words varies (so phrase slop changes scores),
    long enough to be cut into several chunks, and numerous enough to train a small IVF index."""
    rng = np.random.default_rng(7)
    docs = []
    for i in range(80):
        words = [str(w) for w in rng.choice(WORDS + FILLER, size=int(rng.integers(6, 40)))]
        gap = ["young"] * (i % 3)
        words[2:2] = ["corliss", *gap, "archer"]
        docs.append(Document(f"d{i}", f"Title {i}", " ".join(words)))
    return docs


DOCS = corpus()
QUERY = "corliss archer film"


class HashEmbedder(Embedder):
    """Deterministic vectors from a hash of each word, salted by ``model_id``."""

    dim = 16

    def __init__(self, model_id: str) -> None:
        self.name = self.model_id = model_id

    def _encode(self, texts: list[str], batch_size: int, progress: bool, is_query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                seed = int.from_bytes(hashlib.sha256(f"{self.model_id}/{word}".encode()).digest()[:4], "little")
                out[row] += np.random.default_rng(seed).standard_normal(self.dim)
        return out + 1e-3


EMBEDDERS = {"a": HashEmbedder("hash-a"), "b": HashEmbedder("hash-b")}


def folders(root: Path, component: str = "") -> set[str]:
    """The index folders of ``component`` (``bm25``, ``dense``) under ``root``; of every component when ''."""
    prefixes = (component + "-",) if component else ("bm25-", "dense-")
    return {p.name for p in root.iterdir() if p.name.startswith(prefixes)} if root.is_dir() else set()


def results(config: RetrievalConfig, root: Path | bool, embedder: str = "a") -> dict[str, Any]:
    """What served the query: its hits, the chunks searched and the indexes' realised parameters."""
    retriever = build_retriever(DOCS, config, embedder=EMBEDDERS[embedder], cache_dir=root, progress=False)
    dense = retriever.dense.info if retriever.dense is not None else {}
    return {
        "hits": [(hit.chunk_id, round(float(hit.score), 5)) for hit in retriever.search(QUERY)],
        "chunks": len(retriever),
        "phrase_slop": retriever.bm25.phrases.slop if retriever.bm25 is not None else None,
        "dense": {k: v for k, v in dense.items() if k != "train_points"},  # known after a build only
    }


# (component, base configuration, the parameter varied, its other value)
SHAPING = [
    ("bm25", RetrievalConfig(mode="bm25", k=5), "phrase_slop", 0),
    ("bm25", RetrievalConfig(mode="bm25", k=5, chunk_tokens=24, chunk_overlap=4), "chunk_tokens", 16),
    ("bm25", RetrievalConfig(mode="bm25", k=5, chunk_tokens=24, chunk_overlap=4), "chunk_overlap", 0),
    ("dense", RetrievalConfig(mode="dense", k=5), "embedder", "b"),
    ("dense", RetrievalConfig(mode="dense", k=5, chunk_tokens=24, chunk_overlap=4), "chunk_tokens", 16),
    ("dense", RetrievalConfig(mode="dense", k=5, chunk_tokens=24, chunk_overlap=4), "chunk_overlap", 0),
    ("dense", RetrievalConfig(mode="dense", k=5), "dense_index", "hnsw"),
    ("dense", RetrievalConfig(mode="dense", k=5, dense_index="hnsw"), "hnsw_m", 4),
    ("dense", RetrievalConfig(mode="dense", k=5, dense_index="hnsw", hnsw_ef_search=4), "hnsw_ef_construction", 8),
    ("dense", RetrievalConfig(mode="dense", k=5, dense_index="ivf", ivf_nlist=2, ivf_nprobe=1), "ivf_nlist", 4),
    ("dense", RetrievalConfig(mode="dense", k=5, dense_index="ivf-pq", ivf_nlist=2, pq_nbits=4), "pq_m", 4),
    ("dense", RetrievalConfig(mode="dense", k=5, dense_index="ivf-pq", ivf_nlist=2, pq_nbits=4), "pq_nbits", 5),
    ("bm25", RetrievalConfig(mode="hybrid", k=5), "phrase_slop", 0),
    ("dense", RetrievalConfig(mode="hybrid", k=5), "embedder", "b"),
]

# Read at query time only: the same index serves every value.
QUERY_TIME = [
    ("bm25", RetrievalConfig(mode="bm25", k=5), {"k": 3, "phrase_boost": False, "bigram_boost": 5.0,
                                                  "trigram_boost": 7.0, "candidates": 50}),
    ("dense", RetrievalConfig(mode="dense", k=5, dense_index="hnsw"), {"k": 3, "hnsw_ef_search": 8}),
    ("dense", RetrievalConfig(mode="dense", k=5, dense_index="ivf", ivf_nlist=2), {"ivf_nprobe": 1}),
    ("bm25", RetrievalConfig(mode="hybrid", k=5), {"fusion_alpha": 0.2, "rrf_k": 10}),
]  # fmt: skip


def vary(config: RetrievalConfig, name: str, value: object) -> tuple[RetrievalConfig, str]:
    """The configuration with ``name`` changed, and which embedder it runs with."""
    if name == "embedder":
        return config, str(value)
    return dataclasses.replace(config, **{name: value}), "a"


@pytest.mark.parametrize(
    ("component", "base", "name", "value"), SHAPING, ids=[f"{b.mode}-{c}-{n}" for c, b, n, _ in SHAPING]
)
def test_each_parameter_that_shapes_an_index_builds_its_own(
    tmp_path: Path, component: str, base: RetrievalConfig, name: str, value: object
) -> None:
    root = tmp_path / "indexes"
    before = results(base, root)
    built = folders(root, component)
    assert len(built) == 1, built
    changed, embedder = vary(base, name, value)
    fresh = results(changed, False, embedder)  # the index this setting builds, nothing cached
    assert fresh != before, f"{name}={value!r} changes nothing on this corpus; the test could not fail"
    assert results(changed, root, embedder) == fresh, f"{name}={value!r} reused the index built without it"
    assert len(folders(root, component)) == 2, f"{name}={value!r} found the other setting's {component} index"
    # A hybrid's other index is not shaped by the parameter: the one built for the first setting serves it.
    others = folders(root) - folders(root, component)
    assert len(others) == (1 if base.mode == "hybrid" else 0), others
    assert results(base, root) == before  # and the first setting still finds its own


@pytest.mark.parametrize(
    ("component", "base", "changes"), QUERY_TIME, ids=[f"{b.mode}-{b.dense_index}-{c}" for c, b, _ in QUERY_TIME]
)
def test_query_time_parameters_reuse_the_index(
    tmp_path: Path, component: str, base: RetrievalConfig, changes: dict[str, object]
) -> None:
    root = tmp_path / "indexes"
    results(base, root)
    built = folders(root)  # every index of the configuration: a hybrid's BM25 and dense ones
    assert len(built) == (2 if base.mode == "hybrid" else 1) and folders(root, component), built
    for name, value in changes.items():
        changed, embedder = vary(base, name, value)
        assert results(changed, root, embedder) == results(changed, False, embedder), name
        assert folders(root) == built, f"{name}={value!r} built another index"
