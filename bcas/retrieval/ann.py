"""faiss indexes for dense retrieval: exact and approximate inner-product search (BCAS §3.5).

BCAS ranks chunks by the cosine similarity of BGE-M3 vectors; over unit vectors the
inner product is the cosine.  The index kind (``RetrievalConfig.dense_index``) trades
exactness for memory and speed on large corpora:

- ``flat``: ``IndexFlatIP``, exact; 4·d bytes per vector, every query scans all of them.
- ``hnsw``: ``IndexHNSWFlat`` graph, ``hnsw_m`` links per node, built with
  ``hnsw_ef_construction`` and searched with ``hnsw_ef_search`` candidates.
- ``ivf``: ``IndexIVFFlat``, ``ivf_nlist`` k-means lists (0: √N, at least 39 training
  points per list), a query scans its ``ivf_nprobe`` nearest lists.
- ``ivf-pq``: ``IndexIVFPQ``, the same lists with vectors compressed to ``pq_m``
  sub-vectors of ``pq_nbits`` bits (0: d/8 sub-vectors, so 48 bytes for MiniLM's 384
  dimensions instead of 1,536).

IVF lists and PQ codebooks are trained on a seeded sample of at most
``IVF_TRAIN_PER_CENTROID`` points per centroid; vectors are added in blocks, so the
index is built from vectors on disk without holding them twice.  What shaped the
index (``DenseIndexSpec.build_params``) is its cache key; the realised structure
(``DenseIndex.info``: list count, code size, training points) goes in the manifest;
``nprobe`` / ``efSearch`` are set when the index is loaded.  When faiss reports GPUs,
flat and IVF-Flat indexes are searched on GPU 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from bcas.config import RetrievalConfig
from bcas.retrieval.progress import bars_off

DENSE_INDEX_KINDS = ("flat", "hnsw", "ivf", "ivf-pq")
IVF_MIN_POINTS_PER_LIST = 39  # faiss warns below this many training points per centroid
IVF_TRAIN_PER_CENTROID = 64
TRAIN_SEED = 0
_CONFIG_DEFAULTS = RetrievalConfig()


class DenseIndexError(ValueError):
    """A dense index cannot be built as configured; the message names the parameter."""


@dataclass(frozen=True)
class DenseIndexSpec:
    """The faiss index kind and its parameters (the ``RetrievalConfig`` fields of the same names).

    The defaults are the configuration's, so the two cannot drift apart.
    """

    kind: str = _CONFIG_DEFAULTS.dense_index
    ivf_nlist: int = _CONFIG_DEFAULTS.ivf_nlist
    ivf_nprobe: int = _CONFIG_DEFAULTS.ivf_nprobe
    pq_m: int = _CONFIG_DEFAULTS.pq_m
    pq_nbits: int = _CONFIG_DEFAULTS.pq_nbits
    hnsw_m: int = _CONFIG_DEFAULTS.hnsw_m
    hnsw_ef_construction: int = _CONFIG_DEFAULTS.hnsw_ef_construction
    hnsw_ef_search: int = _CONFIG_DEFAULTS.hnsw_ef_search

    @classmethod
    def from_config(cls, config: Any) -> DenseIndexSpec:
        return cls(**{name: getattr(config, "dense_index" if name == "kind" else name) for name in cls.__annotations__})

    def __post_init__(self) -> None:
        if self.kind not in DENSE_INDEX_KINDS:
            raise DenseIndexError(f"dense_index must be one of {DENSE_INDEX_KINDS}, got {self.kind!r}")
        for name in ("ivf_nlist", "pq_m"):
            if getattr(self, name) < 0:
                raise DenseIndexError(f"{name} must be >= 0 (0: chosen from the data), got {getattr(self, name)}")
        for name in ("ivf_nprobe", "hnsw_m", "hnsw_ef_construction", "hnsw_ef_search"):
            if getattr(self, name) <= 0:
                raise DenseIndexError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 1 <= self.pq_nbits <= 16:
            raise DenseIndexError(f"pq_nbits must be in 1..16, got {self.pq_nbits}")

    def build_params(self) -> dict[str, Any]:
        """The parameters that shape the index (and only those): part of its cache key."""
        params: dict[str, Any] = {"index": self.kind}
        if self.kind == "hnsw":
            params.update(hnsw_m=self.hnsw_m, hnsw_ef_construction=self.hnsw_ef_construction)
        if self.kind in ("ivf", "ivf-pq"):
            params.update(ivf_nlist=self.ivf_nlist, train_seed=TRAIN_SEED, train_per_centroid=IVF_TRAIN_PER_CENTROID)
        if self.kind == "ivf-pq":
            params.update(pq_m=self.pq_m, pq_nbits=self.pq_nbits)
        return params

    def nlist_for(self, n: int) -> int:
        if self.ivf_nlist:
            return self.ivf_nlist
        return max(1, min(int(math.sqrt(n)), n // IVF_MIN_POINTS_PER_LIST))

    def pq_m_for(self, dim: int) -> int:
        m = self.pq_m or dim // 8
        if m <= 0 or dim % m:
            raise DenseIndexError(f"pq_m = {m} must divide the vector dimension {dim}; set pq_m to a divisor of {dim}")
        return m

    def check_size(self, n: int) -> None:
        """Refuse, before any vector is computed, an index that ``n`` vectors cannot train."""
        if n <= 0:
            raise DenseIndexError("a dense index needs at least one vector")
        if self.kind not in ("ivf", "ivf-pq"):
            return
        nlist = self.nlist_for(n)
        if nlist > n:
            raise DenseIndexError(f"ivf_nlist = {nlist} lists need at least as many vectors; the collection has {n}")
        if self.kind == "ivf-pq" and n < 2**self.pq_nbits:
            raise DenseIndexError(
                f"ivf-pq with pq_nbits = {self.pq_nbits} trains {2**self.pq_nbits} centroids per sub-vector and needs "
                f"at least that many vectors; the collection has {n} (lower pq_nbits or use dense_index='flat')"
            )

    def train_size(self, n: int, dim: int) -> int:
        """Training points drawn for an IVF index of ``n`` vectors (0 for flat and HNSW)."""
        if self.kind not in ("ivf", "ivf-pq"):
            return 0
        centroids = self.nlist_for(n)
        if self.kind == "ivf-pq":
            centroids = max(centroids, 2**self.pq_nbits)
        return min(n, centroids * IVF_TRAIN_PER_CENTROID)


def _new_index(spec: DenseIndexSpec, n: int, dim: int) -> Any:
    import faiss

    if spec.kind == "flat":
        return faiss.IndexFlatIP(dim)
    if spec.kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = spec.hnsw_ef_construction
        return index
    spec.check_size(n)
    nlist = spec.nlist_for(n)
    quantizer = faiss.IndexFlatIP(dim)
    if spec.kind == "ivf":
        return faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    m = spec.pq_m_for(dim)
    return faiss.IndexIVFPQ(quantizer, dim, nlist, m, spec.pq_nbits, faiss.METRIC_INNER_PRODUCT)


class DenseIndex:
    """A faiss inner-product index over unit vectors; row ``i`` is chunk ``i``."""

    def __init__(self, cpu_index: Any, kind: str, spec: DenseIndexSpec | None = None) -> None:
        import faiss

        self.spec = spec if spec is not None else DenseIndexSpec(kind=kind)
        self.kind = kind
        self.cpu_index = cpu_index
        self.index = cpu_index
        self.on_gpu = False
        self.train_points = 0
        self.embed_speed: dict[str, Any] | None = None  # set by a build that embedded chunks (chunks/s)
        if kind == "hnsw":
            cpu_index.hnsw.efSearch = self.spec.hnsw_ef_search
        if kind in ("ivf", "ivf-pq"):
            cpu_index.nprobe = min(self.spec.ivf_nprobe, cpu_index.nlist)
        if kind in ("flat", "ivf") and faiss.get_num_gpus() > 0 and hasattr(faiss, "StandardGpuResources"):
            self._gpu_resources = faiss.StandardGpuResources()
            self.index = faiss.index_cpu_to_gpu(self._gpu_resources, 0, cpu_index)
            self.on_gpu = True

    @property
    def size(self) -> int:
        return int(self.cpu_index.ntotal)

    @property
    def info(self) -> dict[str, Any]:
        """The realised index: kind, size, dimension and the parameters in force."""
        import faiss

        idx = self.cpu_index
        out: dict[str, Any] = {"index": self.kind, "ntotal": self.size, "dim": int(idx.d)}
        if self.kind == "hnsw":
            out.update(
                hnsw_m=self.spec.hnsw_m,
                hnsw_ef_construction=int(idx.hnsw.efConstruction),
                hnsw_ef_search=int(idx.hnsw.efSearch),
            )
        if self.kind in ("ivf", "ivf-pq"):
            out.update(ivf_nlist=int(idx.nlist), ivf_nprobe=int(idx.nprobe))
            if self.train_points:  # known after a build; the manifest keeps it
                out["train_points"] = self.train_points
        if self.kind == "ivf-pq":
            pq = cast(faiss.IndexIVFPQ, faiss.downcast_index(idx)).pq  # the kind built (see _new_index)
            out.update(pq_m=int(pq.M), pq_nbits=int(pq.nbits), code_bytes=int(pq.code_size))
        return out

    @classmethod
    def build(cls, vectors: np.ndarray, kind: str = "flat", spec: DenseIndexSpec | None = None) -> DenseIndex:
        """An index over ``vectors`` (rows: unit float32 vectors) held in memory."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        spec = spec if spec is not None else DenseIndexSpec(kind=kind)
        n, dim = vectors.shape
        return cls.build_blocks(lambda: iter([vectors]), n, dim, spec, vectors.take)

    @classmethod
    def build_blocks(
        cls,
        blocks: Callable[[], Iterable[np.ndarray]],
        n: int,
        dim: int,
        spec: DenseIndexSpec,
        rows: Callable[..., np.ndarray],
        *,
        progress: bool = False,
    ) -> DenseIndex:
        """An index over ``n`` vectors read block by block (``blocks()`` yields them in order).

        ``rows(sorted_positions, axis=0)`` returns the training rows of an IVF index.
        """
        from tqdm.auto import tqdm

        spec.check_size(n)
        index = _new_index(spec, n, dim)
        train = spec.train_size(n, dim)
        if train:
            pick = np.sort(np.random.default_rng(TRAIN_SEED).choice(n, size=train, replace=False))
            index.train(np.ascontiguousarray(rows(pick, axis=0), dtype=np.float32))
        added = 0
        with tqdm(
            total=n, desc=f"dense: index ({spec.kind})", unit="vec", disable=bars_off(progress), leave=False
        ) as bar:
            for block in blocks():
                block = np.ascontiguousarray(block, dtype=np.float32)
                if block.ndim != 2 or block.shape[1] != dim:
                    raise DenseIndexError(f"a vector block has shape {block.shape}, expected (rows, {dim})")
                index.add(block)
                added += len(block)
                bar.update(len(block))
        if added != n:
            raise DenseIndexError(f"{added} vectors were added, {n} expected")
        out = cls(index, spec.kind, spec)
        out.train_points = train
        return out

    def save(self, path: Path) -> None:
        import faiss

        faiss.write_index(self.cpu_index, str(path))

    @classmethod
    def load(cls, path: Path, kind: str, spec: DenseIndexSpec | None = None, *, mmap: bool = False) -> DenseIndex:
        """Read an index; ``mmap`` maps flat vectors from the file instead of reading them (flat, HNSW)."""
        import faiss

        flags = faiss.IO_FLAG_MMAP_IFC if mmap and kind in ("flat", "hnsw") else 0
        return cls(faiss.read_index(str(path), flags), kind, spec)

    def search(
        self, query_vector: np.ndarray, k: int, exclude: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows by cosine similarity, skipping ``exclude``: (indices, scores), best first."""
        n_excluded = 0 if exclude is None else len(exclude)
        want = min(self.size, k + n_excluded)
        if want <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores, idx = self.index.search(np.ascontiguousarray(query_vector.reshape(1, -1), dtype=np.float32), want)
        scores, idx = scores[0], idx[0]
        keep = idx >= 0
        if exclude is not None and n_excluded:
            keep &= ~np.isin(idx, exclude)
        return idx[keep][:k], scores[keep][:k]
