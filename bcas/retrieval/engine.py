"""BM25 served by a search engine (Milvus) for corpora shared by many workers (BCAS §3.5).

``--bcas-retriever http://HOST:19530`` sends the BM25 cases' searches to a Milvus server:
a cluster, or Milvus Lite (``milvus-lite server``) on one machine.  The client code is
the same for both (``pymilvus.MilvusClient``); :class:`EngineRetriever` answers
``asearch``/``search`` like :class:`bcas.retrieval.retriever.Retriever` in mode ``bm25``.

Indexing.  Documents are chunked as the local BM25 mode chunks them
(:mod:`bcas.retrieval.chunking`), and each chunk is analysed on the client with the
local mode's analyzer (lower-case, two-letter words, English stop words, Snowball
stemmer: :class:`bcas.retrieval.bm25.Analyzer`).  The engine indexes that analysed
stream (field ``terms``) with its own ``standard`` analyzer, which splits it back into
exactly those tokens, and a ``BM25`` function (k1 = 1.5, b = 0.75, as bm25s).  So the
engine's BM25 is our BM25 whatever analyzers the engine offers (Milvus Lite has only
``standard``).  Per chunk it also stores ``doc_id``, ``title`` and ``text`` for hits.
A side collection ``<name>_df`` holds every term's document frequency and the number
of chunks (row ``" n"``), written at index time, for the phrase boosts below.

Sharing.  The collection is named from the chunks' content hash and the analysis
parameters (``bcas_<hash>``), so every worker and machine that indexes the same
collection under the same chunking finds it.  A worker that finds no such collection
indexes into a private one (``..._building_<token>``), flushes once, and renames it to
the shared name; a worker that loses that race drops its copy and uses the winner's.

Search.  The engine returns the top ``candidates`` chunks by BM25 for the analysed
query (its score divided by ``k1 + 1``: bm25s's Lucene variant leaves that factor out);
with ``phrase_boost`` the client adds BCAS's phrase boosts to those candidates
(:func:`bcas.retrieval.bm25.phrase_boosted_bm25`'s bigram and trigram terms, the same
code: :class:`bcas.retrieval.bm25.PhraseIndex` over the candidates' streams, idf from
the ``_df`` collection) and returns the top ``k``, as an engine's rescore phase does.
A chunk outside the BM25 candidates cannot be lifted in by its phrases (the local mode
scores every chunk): with ``candidates`` >= 100 the difference is small (docs/retrieval.md).
``exclude_ids`` (chunk ids or document ids) becomes a filter of the engine's search.

Milvus Lite (the local instance tests start) is a pure-Python engine: about 100 times
slower than bm25s, BM25 statistics per segment (we insert everything, then flush
once), BM25 distances negative (we take their magnitude).  A cluster has none of these
limits; its speed is its own (docs/retrieval.md: "A search engine for shared corpora").
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from bcas.config import RetrievalConfig
from bcas.data import Document
from bcas.retrieval.bm25 import BM25_B, BM25_K1, DEFAULT_STEMMER, Analyzer, PhraseIndex, lucene_idf
from bcas.retrieval.chunking import Chunk, chunk_document, collection_hash
from bcas.retrieval.retriever import Hit, RetrievalError, content_key

ENGINE_FORMAT = 1  # bump when the collection layout changes: older collections are not reused
TOKEN_ENV = "BCAS_RETRIEVER_TOKEN"  # a cluster's "user:password" or API key, read from the environment only
BATCH = 1000
N_ROW = " n"  # the _df row holding the number of chunks (no analysed term holds a space)
MAX_TEXT = 65535  # Milvus VARCHAR limit (bytes)


def shown_url(url: str) -> str:
    """The engine URL without credentials or query (what records and the manifest carry)."""
    parts = urlsplit(url)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) if parts.scheme else url


def _clip(text: str) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= MAX_TEXT else data[:MAX_TEXT].decode("utf-8", "ignore")


class EngineRetriever:
    """BM25 (phrase-boosted unless ``config.phrase_boost`` is false) over a Milvus collection."""

    def __init__(self, client: Any, name: str, config: RetrievalConfig, url: str, analyzer: Analyzer) -> None:
        if config.mode != "bm25":
            raise RetrievalError(f"the search engine serves mode 'bm25', not {config.mode!r}")
        self.client = client
        self.name = name
        self.config = config
        self.engine_url = shown_url(url)
        self.analyzer = analyzer
        self._df: dict[str, int] = {}
        self._n: int | None = None

    def __repr__(self) -> str:
        return f"EngineRetriever({self.engine_url!r}, collection={self.name!r})"

    # -- opening and indexing -------------------------------------------------------------

    @classmethod
    def open(
        cls, url: str, documents: Iterable[Document], config: RetrievalConfig, *, client: Any = None
    ) -> EngineRetriever:
        """Connect to ``url`` and use (or build) the collection of ``documents`` under ``config``'s chunking.

        ``documents`` is iterated twice (hash, then indexing when the collection is new):
        pass a list or a re-iterable corpus.
        """
        if config.mode != "bm25":
            raise RetrievalError(
                f"--bcas-retriever serves BM25 cases only; mode {config.mode!r} searches the local indexes"
            )
        if client is None:
            client = connect(url)
        analyzer = Analyzer(DEFAULT_STEMMER)
        chunks_hash = collection_hash(_chunks(documents, config))
        params = f"{ENGINE_FORMAT}:{DEFAULT_STEMMER}:{BM25_K1}:{BM25_B}:{chunks_hash}"
        name = "bcas_" + hashlib.sha256(params.encode()).hexdigest()[:32]
        if not client.has_collection(name):
            _build(client, name, _chunks(documents, config), analyzer)
        client.load_collection(name)
        client.load_collection(name + "_df")
        return cls(client, name, config, url, analyzer)

    # -- searching --------------------------------------------------------------------------

    def _idf(self, terms: Sequence[str]) -> dict[str, float]:
        """Lucene idf of each term (0 for a term no chunk holds), from the ``_df`` collection."""
        wanted = [t for t in dict.fromkeys(terms) if t not in self._df]
        if self._n is None:
            wanted.append(N_ROW)
        if wanted:
            rows = self.client.get(self.name + "_df", ids=wanted, output_fields=["df"])
            found = {str(r["term"]): int(r["df"]) for r in rows}
            if self._n is None:
                if N_ROW not in found:
                    raise RetrievalError(f"collection {self.name}_df lacks its chunk count; re-index it")
                self._n = found.pop(N_ROW)
            for term in wanted:
                if term != N_ROW:
                    self._df[term] = found.get(term, 0)
        n = int(self._n or 0)
        return {t: float(lucene_idf(np.array([self._df[t]]), n)[0]) if self._df[t] else 0.0 for t in terms}

    def _filter(self, exclude_ids: Iterable[str]) -> str:
        """A boolean expression leaving out chunks (by chunk id) and documents (by document id)."""
        excluded = sorted({str(e) for e in exclude_ids})
        if not excluded:
            return ""
        # JSON string literals (escaped quotes and backslashes) are the expression language's;
        # Milvus Lite has no filter templates, so the list is written into the expression.
        listed = "[" + ",".join(json.dumps(e, ensure_ascii=False) for e in excluded) + "]"
        return f"id not in {listed} and doc_id not in {listed}"

    def search(self, query: str, k: int | None = None, exclude_ids: Iterable[str] = ()) -> list[Hit]:
        """The top ``k`` (default ``config.k``) hits for ``query``, best first."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        k = self.config.k if k is None else k
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        terms = self.analyzer(query)
        if not terms:
            return []
        boost = self.config.phrase_boost and (self.config.bigram_boost or self.config.trigram_boost)
        depth = max(self.config.candidates, k) if boost else k
        expr = self._filter(exclude_ids)
        fields = ["doc_id", "title", "text"] + (["terms"] if boost else [])
        found = self.client.search(
            self.name,
            data=[" ".join(terms)],
            anns_field="sparse",
            limit=depth,
            output_fields=fields,
            filter=expr,
            search_params={"metric_type": "BM25"},
        )
        hits = [h for h in (found[0] if found else []) if abs(float(h["distance"])) > 0]
        scores = np.array([abs(float(h["distance"])) / (BM25_K1 + 1.0) for h in hits], dtype=np.float64)
        if boost and hits:
            scores = scores + self._phrase_boost(terms, [str(h["entity"]["terms"]).split() for h in hits])
        # equal scores by the passage's text (as Retriever.untied), never by the order the engine returned them
        tie = [content_key(str(h["entity"]["title"]), str(h["entity"]["text"])) for h in hits]
        order = sorted(range(len(hits)), key=lambda i: (-scores[i], tie[i]))[:k]
        return [
            Hit(
                str(hits[i]["entity"]["doc_id"]),
                str(hits[i]["id"]),
                str(hits[i]["entity"]["title"]),
                str(hits[i]["entity"]["text"]),
                float(scores[i]),
            )
            for i in order
        ]

    def _phrase_boost(self, query_terms: list[str], streams: list[list[str]]) -> np.ndarray:
        """BCAS's phrase terms for each candidate (bcas.retrieval.bm25), over a vocabulary of the candidates."""
        idf = self._idf(query_terms)
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in stream] for stream in streams]
        # A query term no chunk holds keeps its place (-1) and never matches, as in the local index.
        query_ids = np.array(
            [vocab.setdefault(t, len(vocab)) if idf[t] > 0 else -1 for t in query_terms], dtype=np.int64
        )
        weights = np.zeros(len(vocab))
        for term, i in vocab.items():
            weights[i] = idf.get(term, 0.0)
        phrases = PhraseIndex.build(ids, len(vocab), self.config.phrase_slop)
        boost = phrases.boost(query_ids, weights, len(streams), self.config.bigram_boost, self.config.trigram_boost)
        return np.zeros(len(streams)) if boost is None else boost

    async def asearch(self, query: str, k: int | None = None, exclude_ids: Iterable[str] = ()) -> list[Hit]:
        """``search`` off the event loop (the client blocks on its gRPC call)."""
        return await asyncio.to_thread(self.search, query, k, tuple(exclude_ids))

    async def aclose(self) -> None:
        return None

    def close(self) -> None:
        self.client.close()


def connect(url: str) -> Any:
    """A ``pymilvus.MilvusClient`` for ``url`` (token from ``$BCAS_RETRIEVER_TOKEN`` when set)."""
    try:
        from pymilvus import MilvusClient
    except ImportError:
        raise RetrievalError("--bcas-retriever needs pymilvus: pip install 'bcas[search]' (or pymilvus)") from None
    if not url.startswith(("http://", "https://")):
        raise RetrievalError(
            f"--bcas-retriever: expected the engine's http:// or https:// URL "
            f"(e.g. http://127.0.0.1:19530), got {url!r}"
        )
    token = os.environ.get(TOKEN_ENV) or ""
    try:
        return MilvusClient(uri=url, token=token, timeout=30)
    except Exception as exc:  # noqa: BLE001 - pymilvus raises its own types; say where and why
        raise RetrievalError(
            f"--bcas-retriever {shown_url(url)}: cannot connect ({type(exc).__name__}: "
            f"{str(exc).replace(token, '***') if token else exc})"
        ) from None


def _chunks(documents: Iterable[Document], config: RetrievalConfig) -> Iterator[Chunk]:
    seen: set[str] = set()
    for doc in documents:
        if doc.id in seen:
            raise RetrievalError(f"document id {doc.id!r} occurs twice in the collection")
        seen.add(doc.id)
        yield from chunk_document(doc, config.chunk_tokens, config.chunk_overlap)


def _build(client: Any, name: str, chunks: Iterable[Chunk], analyzer: Analyzer) -> None:
    """Index ``chunks`` into a private collection and rename it to ``name`` (see the module docstring)."""
    from pymilvus import DataType, Function, FunctionType

    building = f"{name}_building_{uuid.uuid4().hex[:8]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=1024)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=1024)
    schema.add_field("title", DataType.VARCHAR, max_length=MAX_TEXT)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT)
    schema.add_field(
        "terms", DataType.VARCHAR, max_length=MAX_TEXT, enable_analyzer=True, analyzer_params={"tokenizer": "standard"}
    )
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="bm25", function_type=FunctionType.BM25, input_field_names=["terms"], output_field_names=["sparse"]
        )
    )
    index = client.prepare_index_params()
    index.add_index(
        field_name="sparse",
        index_type="SPARSE_INVERTED_INDEX",
        metric_type="BM25",
        params={"bm25_k1": BM25_K1, "bm25_b": BM25_B},
    )
    client.create_collection(building, schema=schema, index_params=index)
    df: Counter[str] = Counter()
    n = 0
    batch: list[dict[str, Any]] = []
    for chunk in chunks:
        terms = analyzer(chunk.indexed_text)
        df.update(set(terms))
        n += 1
        batch.append(
            {
                "id": chunk.id,
                "doc_id": chunk.doc_id,
                "title": _clip(chunk.title),
                "text": _clip(chunk.text),
                "terms": _clip(" ".join(terms)),
            }
        )
        if len(batch) >= BATCH:
            client.insert(building, batch)
            batch = []
    if batch:
        client.insert(building, batch)
    if n == 0:
        client.drop_collection(building)
        raise RetrievalError("the collection has no text to index (no documents, or only empty ones)")
    client.flush(building)  # once, after every insert: one segment, one set of BM25 statistics
    _write_df(client, building + "_df", df, n)
    try:
        client.rename_collection(building + "_df", name + "_df")
        client.rename_collection(building, name)
    except Exception:  # noqa: BLE001 - another worker indexed the same collection first: use it
        for leftover in (building, building + "_df"):
            if client.has_collection(leftover):
                client.drop_collection(leftover)
        if not client.has_collection(name):
            raise


def _write_df(client: Any, name: str, df: Counter[str], n: int) -> None:
    """Document frequencies (and the chunk count) as rows; Milvus wants a vector field, so a 2-d zero."""
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False)
    schema.add_field("term", DataType.VARCHAR, is_primary=True, max_length=1024)
    schema.add_field("df", DataType.INT64)
    schema.add_field("unused", DataType.FLOAT_VECTOR, dim=2)
    index = client.prepare_index_params()
    index.add_index(field_name="unused", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index)
    rows = [{"term": N_ROW, "df": n, "unused": [0.0, 0.0]}]
    rows += [{"term": term[:1024], "df": count, "unused": [0.0, 0.0]} for term, count in df.items()]
    for start in range(0, len(rows), 5 * BATCH):
        client.insert(name, rows[start : start + 5 * BATCH])
    client.flush(name)


__all__ = ["TOKEN_ENV", "EngineRetriever", "connect", "shown_url"]
