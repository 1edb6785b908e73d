"""The gate's report of a case that did not pass: its row says so, with the reason, and
shows no current accuracy; the overall verdict is not a pass."""

from __future__ import annotations

from bcas.gating.report import VERDICT_PASS, GateReport, GateRow, with_case_statuses
from bcas.records.case_status import CaseStatus


def _row(case_id: str) -> GateRow:
    return GateRow(case_id, "g", "session", 2, 10, 0.5, 1.0, 0, 5, 0.06, 0.05, 0.12, 0.5, VERDICT_PASS)


def _status(case_id: str, status: str, reason: str = "") -> CaseStatus:
    return CaseStatus(case_id, "g", "m", "d", "cfg", status, reason)


def test_a_failed_case_is_marked_with_its_reason_and_the_gate_does_not_pass() -> None:
    report = GateReport("base", 0.05, "session", "exact McNemar", ["correct_em"], [_row("a"), _row("b")])
    assert report.overall.startswith("PASS")
    reason = "items averaged 1.0 documents, fewer than the 2 that pde needs"
    with_case_statuses(report, [_status("a", "passed"), _status("b", "failed", reason)])
    a, b = report.rows
    assert (a.verdict, a.case_status, a.current_acc) == (VERDICT_PASS, "passed", 1.0)
    assert (b.verdict, b.case_status, b.reason, b.current_acc) == ("case failed", "failed", reason, None)
    assert report.failed and report.overall.startswith("FAIL") and "1 of 2 gated cases failed" in report.overall
    assert any(line == f"b: case failed: {reason}" for line in report.lines())
    assert report.to_dict()["rows"][1]["reason"] == reason
