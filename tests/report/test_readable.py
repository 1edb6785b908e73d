"""A report a reader can take at its word: test doubles are named, unjudged answers are not
counted as judged, a mock has no price, and the drill-down shows no ``None`` or empty
parentheses for what a record does not have."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bcas.records.pricing import load_price_sheet, reprice_record
from bcas.records.schema import Record
from bcas.report.html import SUMMARY_HEADERS
from bcas.report.summary import write_summaries
from tests.support.reports import grid_records, render


def _page(run_dir: Path, records: list[dict[str, Any]]) -> str:
    path, _, _ = render(run_dir, records)
    return path.read_text(encoding="utf-8")


def _mock(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as the mock backend writes them, priced by the installed price sheet."""
    sheet = load_price_sheet()
    mocked = [Record.from_dict({**r, "model": "mock-gold", "model_fingerprint": "mock:gold"}) for r in records]
    return [reprice_record(r, sheet).to_dict() for r in mocked]


def _summary_costs(page: str) -> list[str]:
    summary = page.split('id="summary"')[1].split("</table>")[0]
    column = SUMMARY_HEADERS.index("cost $") + 1  # the cell after the row's own markup
    return [row.split("<td")[column] for row in summary.split("<tr")[2:]]


def test_a_test_double_gets_a_banner_and_no_price(tmp_path: Path) -> None:
    records = _mock(grid_records("smoke", n_items=3))
    assert records and all(r["cost_usd"] is None for r in records), "a mock's cost is no price, not $0"
    page = _page(tmp_path / "mock", records)
    assert 'id="test-double"' in page and "mock-gold" in page.split('id="test-double"')[1].split("</div>")[0]
    costs = _summary_costs(page)
    assert costs and all("—" in c for c in costs)
    # summary.json says what the page says: no cost, not 0.
    rows = json.loads((tmp_path / "mock" / "summary.json").read_text(encoding="utf-8"))["rows"]
    assert rows and all(r["cost_usd"] is None and r.get("cost_of_pass") is None for r in rows)
    real = _page(tmp_path / "real", grid_records("smoke", n_items=3))
    assert 'id="test-double"' not in real


def test_a_priced_model_shows_its_cost_in_the_report_as_in_the_summary(tmp_path: Path) -> None:
    """A cost of $0 that a sheet gave (a self-hosted model) is shown as 0, the same in both views."""
    records = [{**r, "cost_usd": 0.0} for r in grid_records("smoke", n_items=3)]
    page = _page(tmp_path / "run", records)
    rows = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))["rows"]
    assert rows and all(r["cost_usd"] == 0.0 for r in rows)
    costs = _summary_costs(page)
    assert costs and all(">0.0000<" in c for c in costs), costs


def test_judge_n_counts_only_the_records_the_judge_graded(tmp_path: Path) -> None:
    records = grid_records("smoke", n_items=6)
    label = records[0]["label"]
    mine = [r for r in records if r["label"] == label]
    for i, r in enumerate(mine):
        if i < 2:
            r["judge_verdict"] = True  # graded
        else:
            r["prediction"] = ""  # empty answers the judge never saw
            r["judge_verdict"] = None
    rows = write_summaries(tmp_path, records).rows
    (row,) = [r for r in rows if r.label == label]
    assert row.judge_n == 2


def test_the_drill_down_shows_no_none_and_no_empty_parentheses(tmp_path: Path) -> None:
    records = grid_records("smoke", n_items=2)
    for r in records:
        r["judge_verdict"] = None
        for step in r["steps"]:
            step.pop("tokens_in", None)
            step.pop("tokens_out", None)
    page = _page(tmp_path, records)
    drill = page.split("<h2>Items (")[1].split("<script>")[0]  # the drill-down, not the scripts after it
    text = re.sub(r"<[^>]+>", " ", drill)
    assert "None" not in text
    assert not re.search(r"\(\s*in\s*/\s*out\s*\)", text) and "( in" not in text
