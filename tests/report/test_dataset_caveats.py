"""Summaries say when a shipped dataset's collection is not the paper's (BCAS §4.1: over 500K documents)."""

from __future__ import annotations

import pytest

from bcas.data import DATASETS, load_dataset
from bcas.report.summary import grid_notes, summarize
from tests.support.reports import make_record


@pytest.mark.parametrize("dataset", ["2wikimultihopqa", "triviaqa", "conflictqa"])
def test_a_bcas_summary_on_a_small_collection_carries_its_caveat(dataset: str) -> None:
    rows = summarize([make_record("s1", "i0", True, grid="search_scaling", dataset=dataset)])
    notes = grid_notes(rows, [])
    assert f"search_scaling: {dataset}: {DATASETS[dataset].caveat}" in notes


def test_a_dataset_searched_as_the_paper_did_has_no_caveat() -> None:
    rows = summarize([make_record("s1", "i0", True, grid="search_scaling", dataset="hotpotqa")])
    assert not [n for n in grid_notes(rows, []) if n.startswith("search_scaling: hotpotqa:")]


def test_the_caveats_figures_are_the_shipped_files() -> None:
    wiki = load_dataset("2wikimultihopqa").items
    paragraphs = {(d.title, d.text) for it in wiki for d in it.documents}
    per_item = sum(len(it.documents) for it in wiki) / len(wiki)
    assert f"({len(paragraphs)} in all, {per_item:.1f} per item" in DATASETS["2wikimultihopqa"].caveat
    trivia = load_dataset("triviaqa").items
    passages = {(d.title, d.text) for it in trivia for d in it.documents}
    without = sum(not it.supporting for it in trivia)
    caveat = DATASETS["triviaqa"].caveat
    assert f"{len(passages):,} passages" in caveat and f"{without} of {len(trivia)} items" in caveat
