"""A case's status reaches its summary row however the row is named and whichever grid ran
the same answers (bcas.records.case_status.StatusIndex, as the summary applies it)."""

from __future__ import annotations

from typing import Any

from support.reports import DATASET, make_record

from bcas.records.case_status import CaseStatus
from bcas.report.status import row_fields
from bcas.report.summary import build_summaries

LABEL = "B1"
FP_A = "served:Qwen/Qwen3-8B#fp_aaaaaaaaaaaa"
FP_B = "served:Qwen/Qwen3-8B#fp_bbbbbbbbbbbb"


def _records(model: str, fingerprint: str, grid: str = "g1", n: int = 4) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        rec = make_record(LABEL, f"q{i}", True, grid=grid, model=model)
        rec["model_fingerprint"] = fingerprint
        out.append(rec)
    return out


def _status(grid: str, status: str, model: str = "qwen", fingerprint: str = "", reason: str = "") -> CaseStatus:
    return CaseStatus(
        case_id=f"{grid}-{model}-{status}", grid=grid, model=model, dataset=DATASET, label=LABEL, status=status,
        reason=reason, fingerprint=fingerprint, config_id=f"cfg-{LABEL}" if fingerprint else "",
    )  # fmt: skip


def test_a_label_shown_with_its_served_name_keeps_its_case_status() -> None:
    """Two served models under one label: the rows are named ``qwen [<served fingerprint>]``; a case
    that failed before it had an identity is matched by its case key, and its rows show no accuracy."""
    records = _records("qwen", FP_A) + _records("qwen", FP_B)
    failed = _status("g1", "failed", reason="items averaged 1.0 documents")
    rows = build_summaries(records, statuses=[failed]).rows
    assert len(rows) == 2 and all(r.model.startswith("qwen [") for r in rows), [r.model for r in rows]
    for row in rows:
        assert row.status == "failed" and row.reason == "items averaged 1.0 documents"
        assert row_fields(row)["accuracy"] is None
    passed = build_summaries(records, statuses=[_status("g1", "passed")]).rows
    assert all(r.status == "passed" and row_fields(r)["accuracy"] == 1.0 for r in passed)


def test_a_passing_case_never_hides_another_grids_failure_of_the_same_answers() -> None:
    """Grid g2 ran the same answers (same identity) and failed; g1's case passed.  The answers'
    row shows the failure, whichever line came first."""
    records = _records("qwen", FP_A, grid="g1")
    passed = _status("g1", "passed", fingerprint=FP_A)
    failed = _status("g2", "failed", fingerprint=FP_A, reason="an invariant broke")
    for order in ([passed, failed], [failed, passed]):
        summaries = build_summaries(records, statuses=order)
        (row,) = summaries.rows
        assert row.status == "failed" and row.reason == "an invariant broke", [s.grid for s in order]
        assert row_fields(row)["accuracy"] is None
        assert any("an invariant broke" in note for note in summaries.notes)
    # two passing grids: the row counts
    (row,) = build_summaries(records, statuses=[passed, _status("g2", "passed", fingerprint=FP_A)]).rows
    assert row.status == "passed" and row_fields(row)["accuracy"] == 1.0
