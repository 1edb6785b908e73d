"""The summary's note on how many documents MADARA items chose among (MADARA Appendix K)."""

from __future__ import annotations

from dataclasses import replace

from bcas.report.summary import SummaryRow, grid_notes, summarize
from tests.support.reports import make_record


def _row(label: str, docs: float, retrieved: float, n: int, model: str = "m") -> SummaryRow:
    (row,) = summarize([make_record(label, "i0", True, grid="cross_encoder", dataset="fever", model=model)])
    return replace(row, docs_per_item=docs, retrieved_per_item=retrieved, n=n)


def _documents_note(rows: list[SummaryRow]) -> str:
    (note,) = [n for n in grid_notes(rows, []) if "chose among" in n]
    return note


def test_cases_with_different_documents_are_named_not_averaged() -> None:
    # Appendix K: NF and 3-Agent read BM25's 10, the reranked case its top 5.  A mean
    # over cases (8.3) is a number of documents no item ever chose among.
    rows = [_row("nf", 10, 10, 20), _row("3-agent", 10, 10, 20), _row("ce/nf", 5, 5, 20)]
    note = _documents_note(rows)
    assert "8.3" not in note
    assert note == (
        "cross_encoder: fever: items chose among 10.0 documents on average (3-agent, nf); "
        "5.0 documents on average (ce/nf)"
    )


def test_one_case_over_two_models_is_a_mean_over_items() -> None:
    # Two models' rows of one case: 10 items with 4 documents, 30 with 8 -> 7.0 per item,
    # where a mean over rows would say 6.0.
    rows = [_row("nf", 4, 4, 10, model="a"), _row("nf", 8, 8, 30, model="b")]
    assert _documents_note(rows) == "cross_encoder: fever: items chose among 7.0 documents on average"


def test_padding_is_reported_per_case() -> None:
    rows = [_row("nf", 10, 6, 5), _row("pde", 10, 10, 5)]
    note = _documents_note(rows)
    assert "10.0 documents on average, 6.0 of them retrieved, the rest padded from the collection (nf)" in note
    assert "10.0 documents on average (pde)" in note
