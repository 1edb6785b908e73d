"""Dense retrieval: the real MiniLM embedder, faiss index kinds, registry errors."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from bcas.config import RetrievalConfig
from bcas.data import Document
from bcas.retrieval import EmbedderError, RetrievalError, build_retriever, load_embedder
from bcas.retrieval.dense import DenseIndex, normalise_rows

DOCS = [
    Document("astro", "Galaxies", "Astronomers measured the redshift of distant galaxies with a large telescope."),
    Document("cook", "Baking", "Knead the dough for ten minutes, then let the bread rise in a warm place."),
    Document("cat", "Pets", "The kitten dozed on the warm windowsill all afternoon."),
    Document("stock", "Markets", "Share prices fell sharply after the central bank raised interest rates."),
]


def test_minilm_vectors_are_unit_length_and_semantic(minilm_embedder):
    vecs = minilm_embedder.encode(["A young cat slept in the sun.", *(d.text for d in DOCS)])
    assert vecs.shape == (5, minilm_embedder.dim) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    sims = vecs[1:] @ vecs[0]
    assert int(np.argmax(sims)) == 2  # the kitten paragraph


def test_dense_retriever_ranks_paraphrase_above_unrelated(tmp_path, minilm_embedder):
    retriever = build_retriever(
        DOCS, RetrievalConfig(mode="dense"), embedder=minilm_embedder, cache_dir=tmp_path, progress=False
    )
    # shares no content word with the answer paragraph: only meaning connects them
    hits = retriever.search("How did the stock market react when borrowing costs went up?", k=4)
    assert hits[0].doc_id == "stock"
    assert hits[0].score > hits[1].score
    assert [h.doc_id for h in hits].index("stock") < [h.doc_id for h in hits].index("cook")


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_index_kinds_find_the_nearest_vector_and_skip_excluded(kind):
    rng = np.random.default_rng(0)
    vectors = normalise_rows(rng.normal(size=(400, 16)).astype(np.float32))
    index = DenseIndex.build(vectors, kind)
    target = 123
    query = normalise_rows(vectors[target : target + 1] + 0.01 * rng.normal(size=(1, 16)).astype(np.float32))[0]
    idx, scores = index.search(query, 5)
    assert idx[0] == target and len(idx) == 5
    assert np.all(np.diff(scores) <= 1e-6)
    idx2, _ = index.search(query, 5, exclude=np.array([target]))
    assert target not in idx2.tolist() and len(idx2) == 5


def test_dense_index_round_trips_through_disk(tmp_path):
    vectors = normalise_rows(np.random.default_rng(1).normal(size=(50, 8)).astype(np.float32))
    index = DenseIndex.build(vectors, "flat")
    index.save(tmp_path / "f.index")
    again = DenseIndex.load(tmp_path / "f.index", "flat")
    q = vectors[7]
    np.testing.assert_array_equal(index.search(q, 5)[0], again.search(q, 5)[0])


def test_unknown_embedder_and_index_kind_fail_clearly(tmp_path):
    with pytest.raises(EmbedderError, match="unknown embedder 'nope'.*minilm"):
        load_embedder("nope")
    with pytest.raises(RetrievalError, match="unknown embedder 'nope'"):
        build_retriever(DOCS, RetrievalConfig(mode="dense", embedder="nope"), cache_dir=tmp_path)
    with pytest.raises(RetrievalError, match="dense_index"):
        build_retriever(DOCS, RetrievalConfig(mode="dense", dense_index="lsh"), cache_dir=tmp_path)


@pytest.mark.skipif(importlib.util.find_spec("FlagEmbedding") is not None, reason="FlagEmbedding is installed")
def test_bge_m3_without_flagembedding_names_the_gpu_extra():
    with pytest.raises(EmbedderError, match=r"FlagEmbedding.*bcas\[gpu\]"):
        load_embedder("bge-m3")
