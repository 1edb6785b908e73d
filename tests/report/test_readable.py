"""A report a reader can take at its word: test doubles are named, unjudged answers are not
counted as judged, a mock has no price, and the drill-down shows no ``None`` or empty
parentheses for what a record does not have."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bcas.report.summary import write_summaries
from tests.support.reports import grid_records, render


def _page(run_dir: Path, records: list[dict[str, Any]]) -> str:
    path, _, _ = render(run_dir, records)
    return path.read_text(encoding="utf-8")


def _mock(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "model": "mock-gold", "model_fingerprint": "mock:gold", "cost_usd": 0.0} for r in records]


def test_a_test_double_gets_a_banner_and_no_price(tmp_path: Path) -> None:
    page = _page(tmp_path / "mock", _mock(grid_records("smoke", n_items=3)))
    assert 'id="test-double"' in page and "mock-gold" in page.split('id="test-double"')[1].split("</div>")[0]
    summary = page.split('id="summary"')[1].split("</table>")[0]
    costs = [row.split("<td")[15] for row in summary.split("<tr")[2:]]
    assert costs and all("—" in c for c in costs), "a mock's cost is no price, not $0"
    real = _page(tmp_path / "real", grid_records("smoke", n_items=3))
    assert 'id="test-double"' not in real


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
    drill = page.split("<h2>Items (")[1]
    text = re.sub(r"<[^>]+>", " ", drill)
    assert "None" not in text
    assert not re.search(r"\(\s*in\s*/\s*out\s*\)", text) and "( in" not in text
