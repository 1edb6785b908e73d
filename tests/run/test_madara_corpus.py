"""MADARA cases on a questions-only dataset read their documents from ``--bcas-corpus``.

A FlashRAG file has questions and answers only; its passages are in the corpus.  MADARA's
pipeline retrieves the top 10 for each question (§5.5) and its router calibrates on a
held-out split (Algorithm 2).  A user's own 100-item file must run the madara grid with
``calibration_n=10`` and give No-Filter 10 corpus documents per item; the smoke grid's
MADARA cases, which read each item's own documents, must retrieve from the corpus too;
and a case whose items have too few documents for its treatment must fail, saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.data import load_calibration
from bcas.run.pipelines import run_kind
from tests.support import official


@pytest.fixture(scope="module")
def flashrag(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    dataset, corpus, _ = official.flashrag_pair(tmp_path_factory.mktemp("flashrag"), n=100)
    return dataset, corpus


@pytest.fixture(scope="module")
def small_flashrag(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """12 items and a corpus of their documents only: the smoke grid's hybrid case embeds a few
    hundred chunks, not the whole sample's thousands (minutes on a cold index folder)."""
    dataset, corpus, _ = official.flashrag_pair(tmp_path_factory.mktemp("small"), n=12, whole_collection=False)
    return dataset, corpus


def _madara(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if (r.get("extra") or {}).get("treatment") is not None]


def test_the_madara_grid_runs_a_100_item_file_with_a_corpus(flashrag: tuple[Path, Path], tmp_path: Path) -> None:
    dataset, corpus = flashrag
    results = bcas.evaluate(
        grids="madara",
        models="mock:gold",
        datasets=f"flashrag:{dataset}",
        limit=2,
        out=tmp_path / "run",
        corpus=str(corpus),
        calibration_n=10,
        no_cache=True,
    )
    assert results.passed, results.failures
    nf = [r for r in results.records if r["config"]["assess"]["method"] == "nf"]
    assert len(nf) == 2
    assert all(len(r["extra"]["doc_ids"]) == 10 for r in nf)
    # the router calibrated on 10 items, and the evaluated items are outside them
    routed = [r for r in results.records if r["config"]["assess"]["method"] == "madara"]
    assert routed and all(r["config"]["assess"]["calibration_n"] == 10 for r in routed)
    calibration = {it.id for it in load_calibration(f"flashrag:{dataset}", 10).items}
    assert not calibration & {r["item_id"] for r in results.records}


@pytest.mark.proof_stage  # the MADARA cases over a corpus index, 14 s: CI's required proof stage runs it
def test_the_smoke_grids_madara_cases_retrieve_from_the_corpus(
    small_flashrag: tuple[Path, Path], tmp_path: Path
) -> None:
    dataset, corpus = small_flashrag
    results = bcas.evaluate(
        grids="smoke",
        models="mock:gold",
        datasets=f"flashrag:{dataset}",
        limit=2,
        out=tmp_path / "run",
        corpus=str(corpus),
        no_cache=True,
    )
    madara = _madara(results.records)
    assert madara, "the smoke grid has MADARA cases"
    assert all(r["config"]["assess"]["doc_source"] == "retrieval" for r in madara)
    assert all(len(r["extra"]["doc_ids"]) == 10 for r in madara)
    assert results.passed, results.failures


def test_a_case_whose_items_have_too_few_documents_fails_with_the_reason() -> None:
    from bcas.config import AssessConfig, RunConfig

    kind = run_kind("madara")
    records = [{"item_id": "a", "extra": {"doc_ids": []}}, {"item_id": "b", "extra": {"doc_ids": ["d1"]}}]
    (problem,) = kind.check(RunConfig(assess=AssessConfig(method="pde", k=5)), records)
    assert problem.startswith("items averaged 0.5 documents, fewer than the 5 that pde needs (k=5)")
    # No-Filter needs one document: items with none still fail, items with one pass
    assert kind.check(RunConfig(assess=AssessConfig(method="nf")), records[:1])
    assert kind.check(RunConfig(assess=AssessConfig(method="nf")), records[1:]) == []
    enough = [{"item_id": "c", "extra": {"doc_ids": [f"d{j}" for j in range(10)]}}]
    assert kind.check(RunConfig(assess=AssessConfig(method="pde", k=5)), enough) == []
