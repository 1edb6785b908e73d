"""Which columns a report table shows first, and the regression gate's mark on the summary.

At 1,280 px no table scrolls sideways: each wide table shows its decision columns and hides
the others behind "all N columns" (tests/report/test_fits_a_laptop_browser.py checks the
width in Chromium). Here: the page's HTML hides exactly the non-decision columns, keeps
them in the table (one click shows them), and marks a case the gate failed on its summary row.
"""

from __future__ import annotations

import re
from pathlib import Path

from bcas.gating.report import VERDICT_FAIL, GateReport, GateRow
from bcas.report.columns import DECISION_COLUMNS, hidden_columns
from bcas.report.html import SUMMARY_HEADERS, render_report
from bcas.report.summary import write_summaries
from tests.support.reports import grid_records, render


def _heads(html: str, table_id: str) -> list[tuple[str, bool]]:
    """(header text, hidden) of each header cell of table ``table_id``."""
    table = html.split(f'id="{table_id}"', 1)[1].split("</thead>", 1)[0]
    return [(text, cls == ' class="more"') for cls, text in re.findall(r"<th([^>]*)>(.*?)</th>", table)]


def test_the_summary_shows_its_decision_columns_first_and_keeps_the_rest_one_click_away(tmp_path: Path) -> None:
    path, rows, _ = render(tmp_path, grid_records("search_scaling", n_items=4))
    html = path.read_text(encoding="utf-8")
    heads = _heads(html, "summary")
    assert [h for h, _ in heads] == SUMMARY_HEADERS  # every column is in the page
    shown = [h for h, hidden in heads if not hidden]
    assert shown == list(DECISION_COLUMNS["summary"]) == SUMMARY_HEADERS[: len(shown)]  # decision columns first
    assert len(shown) < len(heads)
    assert '<input type="checkbox" class="cols-all" id="summary-all">' in html
    assert f"all {len(SUMMARY_HEADERS)} columns ({len(heads) - len(shown)} more)" in html
    body = html.split('id="summary"', 1)[1].split("</tbody>", 1)[0]
    first = re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)[1]
    cells = re.findall(r"<td([^>]*)>", first)
    assert len(cells) == len(heads)
    assert ["more" in c for c in cells] == [hidden for _, hidden in heads]  # each cell hidden with its header
    # The reference row says so; the others carry their paired difference with its interval.
    rows_cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)]
    diffs = [cells[7] for cells in rows_cells if cells]
    assert diffs.count("ref") == sum(r.reference for r in rows) == 1 and all(re.fullmatch(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]( \*)?", d)
                                           for d in diffs if d != "ref")  # fmt: skip


def test_hidden_columns_names_only_a_listed_tables_other_columns() -> None:
    assert hidden_columns("summary", SUMMARY_HEADERS) == [
        i for i, h in enumerate(SUMMARY_HEADERS) if h not in DECISION_COLUMNS["summary"]
    ]
    assert hidden_columns("not-listed", ["a", "b", "c"]) == []
    assert hidden_columns("summary", ["grid", "x"]) == []  # never down to one column


def test_a_case_the_gate_failed_is_marked_on_its_summary_row(tmp_path: Path) -> None:
    records = grid_records("search_scaling", n_items=4)
    summaries = write_summaries(tmp_path, records)
    row = next(r for r in summaries.rows if not r.reference)
    failed_id = f"{row.model}-{row.dataset}-{row.label}"

    def gate_row(case_id: str, verdict: str) -> GateRow:
        return GateRow(case_id, row.grid, "grid", 2, 4, 1.0, 0.25, 3, 0, 0.01, 0.05, 0.02, 0.5, verdict)

    passed = next(r for r in summaries.rows if r.label != row.label)
    gate = GateReport(
        "base", 0.05, "grid", "exact McNemar", ["correct_em"],
        [gate_row(failed_id, VERDICT_FAIL), gate_row(f"{passed.model}-{passed.dataset}-{passed.label}", "pass")],
    )  # fmt: skip
    html = render_report(tmp_path, records, summaries.rows, summaries.comparisons, gate=gate).read_text("utf-8")
    body = html.split('id="summary"', 1)[1].split("</tbody>", 1)[0]
    marked = re.findall(r'<tr class="[^"]*gate-fail[^"]*"[^>]*>(.*?)</tr>', body, flags=re.S)
    assert len(marked) == 1
    cells = re.findall(r"<td([^>]*)>(.*?)</td>", marked[0])
    assert cells[3][1] == f"{row.label} ✘ gate"
    assert 'title="regression gate FAIL: 25.0% vs baseline 100.0% (Holm p 0.02)"' in cells[3][0]
    assert body.count("✘ gate") == 1  # the case that passed is not marked
