"""Retrieval evaluation: metric definitions and a real BM25 run on HotpotQA."""

from __future__ import annotations

import pytest

from bcas.cli import main as bcas_main
from bcas.data import Dataset, Document, Item, content_hash
from bcas.retrieval import Hit
from bcas.retrieval.evaluate import (
    canonical_ids,
    evaluate_retrieval,
    format_table,
    mode_config,
    recall_and_rr,
    supporting_in_collection,
)


def _hit(doc_id: str) -> Hit:
    return Hit(doc_id, f"{doc_id}#0", "", "", 0.0)


def test_recall_and_reciprocal_rank():
    hits = [_hit("x"), _hit("a"), _hit("y"), _hit("b"), _hit("z"), _hit("c")]
    assert recall_and_rr(hits, {"a", "b"}, 5) == (1.0, 0.5)
    assert recall_and_rr(hits, {"a", "c"}, 5) == (0.5, 0.5)
    assert recall_and_rr(hits, {"c"}, 5) == (0.0, 0.0)  # rank 6 is outside the top 5
    assert recall_and_rr([_hit("a"), _hit("a")], {"a", "b"}, 5) == (0.5, 1.0)


def test_supporting_ids_follow_collection_deduplication():
    shared = ("Paris", "Paris is in France.")
    item1 = Item("1", "q1", ("a",), (Document("i1::0", *shared), Document("i1::1", "X", "x")), ("i1::0",))
    item2 = Item("2", "q2", ("a",), (Document("i2::0", *shared), Document("i2::1", "Y", "y")), ("i2::0",))
    ds = Dataset("t", "t.jsonl", "factoid", "qa", (item1, item2), content_hash((item1, item2)))
    assert [d.id for d in ds.documents] == ["i1::0", "i1::1", "i2::1"]
    assert supporting_in_collection(canonical_ids(ds), item2) == {"i1::0"}


def test_mode_configs():
    from bcas.config import RetrievalConfig

    base = RetrievalConfig()
    assert mode_config("bm25-plain", base).phrase_boost is False
    assert mode_config("bm25", base).phrase_boost is True
    assert mode_config("hybrid_rerank", base).mode == "hybrid_rerank"
    with pytest.raises(ValueError, match="unknown evaluation mode"):
        mode_config("colbert", base)


def test_bm25_evaluation_on_hotpotqa_subset(tmp_path):
    results = evaluate_retrieval(
        "hotpotqa", modes=["bm25-plain", "bm25"], k=5, limit=30, cache_dir=str(tmp_path), progress=False
    )
    assert [r.mode for r in results] == ["bm25-plain", "bm25"]
    for r in results:
        assert r.items == 30
        assert 0.3 < r.recall <= 1.0 and 0.3 < r.mrr <= 1.0
    table = format_table(results)
    assert "| bm25-plain | 30 |" in table and "recall@5" in table


def test_cli_prints_a_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path))
    assert (
        bcas_main(
            [
                "index",
                "evaluate",
                "--dataset",
                "hotpotqa",
                "--modes",
                "bm25",
                "--limit",
                "5",
                "--k",
                "3",
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| mode | items | recall@3 | MRR@3 |" in out and "| bm25 | 5 |" in out
