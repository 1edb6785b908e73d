"""Every view of a run follows its records: ``bcas report`` rebuilds what a session wrote, byte
for byte; ``bcas rejudge`` and ``bcas reprice`` end with that rebuild, so the summary and the
report show the new grades and costs; a session that resumes a run under a new price sheet
prices the whole summary under it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bcas.cli import main
from bcas.records import load_records
from tests.support.mockruns import make_project, run_pytest

VIEWS = ("summary.json", "summary.csv", "index.html", "records.parquet")
OPTIONS = ("--bcas-grid", "brief", "--bcas-model", "coin", "--bcas-limit", "3")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished pytest run of two BCAS configurations x 3 items on the ``coin`` double, priced at 0
    (the installed sheet prices no ``coin``; the project's prices it)."""
    project = make_project(tmp_path_factory.mktemp("rebuild") / "project")
    done = run_pytest(project, *OPTIONS, "--bcas-report", str(project / "reports" / "run"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return project


def _copy(project: Path, tmp_path: Path) -> Path:
    """The finished run in a folder of the same name (the report's title is the folder's name)."""
    copy = tmp_path / "run"
    shutil.copytree(project / "reports" / "run", copy)
    return copy


def _rows(run: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads((run / "summary.json").read_text(encoding="utf-8"))["rows"]
    assert len(rows) == 2, rows
    return rows


def _summary_cells(run: Path, column: str) -> list[str]:
    """The cells of one column of the report's summary table."""
    html = (run / "index.html").read_text(encoding="utf-8")
    table = html[html.index('id="summary"') :]
    table = table[: table.index("</table>")]
    heads = re.findall(r"<th[^>]*>(.*?)</th>", table[: table.index("</thead>")])
    col = heads.index(column)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row)[col] for row in re.findall(r"<tr class=.*?</tr>", table)]


def test_a_rebuild_writes_what_the_session_wrote_byte_for_byte(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    written = {name: (run / name).read_bytes() for name in VIEWS}
    for name in VIEWS:
        (run / name).unlink()
    records_before = (run / "records.jsonl").read_bytes()
    assert main(["report", str(run)]) == 0
    for name in VIEWS:
        assert (run / name).read_bytes() == written[name], f"{name} differs from the session's"
    assert (run / "records.jsonl").read_bytes() == records_before  # a rebuild changes no record


def test_rejudge_shows_the_judge_in_the_summary_and_the_report(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    assert {row["judge_n"] for row in _rows(run)} == {0}
    assert set(_summary_cells(run, "judge %")) == {"—"}
    assert main(["rejudge", str(run), "--judge", "mock:gold"]) == 0
    rows = _rows(run)
    assert [row["judge_n"] for row in rows] == [3, 3]
    # the mock judge agrees with exact match here: its accuracy is the run's, item by item
    assert [row["judge_accuracy"] for row in rows] == [row["accuracy"] for row in rows]
    assert _summary_cells(run, "judge %") == [f"{row['accuracy'] * 100:.1f}" for row in rows]  # type: ignore[operator]
    assert _summary_cells(run, "judge n") == ["3", "3"]
    table = pytest.importorskip("pyarrow.parquet").read_table(run / "records.parquet")
    assert table.column("judge_verdict").to_pylist() == table.column("correct_em").to_pylist()
    # the judge's cost under the run's sheet: the packaged one prices no test double, so unknown, never $0
    assert {(r.judge or {}).get("cost_usd") for r in load_records(run)} == {None}
    last = json.loads((run / "run.json").read_text(encoding="utf-8"))["sessions"][-1]  # what the records now hold
    assert last["command"] == "bcas rejudge" and last["judge"]["spec"] == "mock:gold"
    assert {gid for r in load_records(run) for gid in r.grades or {}} >= {last["judge"]["grade_id"]}
    assert f"mock:gold · {last['judge']['grade_id']}" in (run / "index.html").read_text(encoding="utf-8")


JUDGE_SHEET = """
default = "judged"
[sheets.judged.models."coin"]
input_per_mtok = 3.0
output_per_mtok = 12.0
[sheets.judged.models."mock:gold"]
input_per_mtok = 10.0
output_per_mtok = 40.0
"""


def test_rejudge_prices_the_judge_under_the_latest_sessions_sheet(finished: Path, tmp_path: Path) -> None:
    """The run's first session priced under the packaged sheet (no price for the mock judge); a
    later ``bcas reprice`` put another sheet in force (the judge at $10 / $40 per million): the
    judge's cost is the one under that later sheet."""
    run = _copy(finished, tmp_path)
    prices = tmp_path / "judged.toml"
    prices.write_text(JUDGE_SHEET, encoding="utf-8")
    assert main(["reprice", str(run), "--prices", str(prices)]) == 0
    sessions = json.loads((run / "run.json").read_text(encoding="utf-8"))["sessions"]
    assert len(sessions) >= 2 and (sessions[0].get("price_sheet") or {}).get("path") != str(prices)
    assert main(["rejudge", str(run), "--judge", "mock:gold", "--no-report"]) == 0
    judges = [r.judge or {} for r in load_records(run)]
    assert len(judges) == 6 and all(j.get("model") == "mock:gold" for j in judges)
    for j in judges:
        expected = (int(j.get("tokens_in", 0)) * 10.0 + int(j.get("tokens_out", 0)) * 40.0) / 1e6
        assert j["cost_usd"] == pytest.approx(expected) and j["cost_usd"] > 0


def test_three_way_grades_are_filed_under_their_own_identity(finished: Path, tmp_path: Path) -> None:
    """A three-way rejudge after a two-way one by the same judge grades every answer again
    (it is another grade) and keeps the two-way grade beside it."""
    run = _copy(finished, tmp_path)
    assert main(["rejudge", str(run), "--judge", "mock:gold", "--no-report"]) == 0
    two_way = {gid for r in load_records(run) for gid in r.grades or {}}
    assert main(["rejudge", str(run), "--judge", "mock:gold", "--three-way", "--no-report"]) == 0
    last = json.loads((run / "run.json").read_text(encoding="utf-8"))["sessions"][-1]
    three_way = last["judge"]["grade_id"]
    assert three_way not in two_way
    records = load_records(run)
    assert len(records) == 6
    for rec in records:
        assert set(rec.grades or {}) == two_way | {three_way}  # both grades, each under its own identity
        assert rec.judge is not None and rec.judge["grade_id"] == three_way


def test_no_report_leaves_the_views_as_they_were(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    written = {name: (run / name).read_bytes() for name in VIEWS}
    assert main(["rejudge", str(run), "--judge", "mock:gold", "--no-report"]) == 0
    assert all(r.judge_verdict is not None for r in load_records(run))  # the records changed
    assert {name: (run / name).read_bytes() for name in VIEWS} == written  # the views did not


def _priced(records: Path) -> dict[str, float]:
    """Expected cost per configuration under the project's sheet (coin: $3 / $12 per million tokens)."""
    out: dict[str, float] = {}
    for rec in load_records(records):
        out[rec.label] = out.get(rec.label, 0.0) + (rec.tokens_in * 3.0 + rec.tokens_out * 12.0) / 1e6
    return out


def test_reprice_shows_the_cost_in_the_summary_and_the_report(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    expected = _priced(run)
    assert all(v > 0 for v in expected.values())
    assert main(["reprice", str(run), "--prices", str(finished / "prices.toml")]) == 0
    rows = _rows(run)
    assert {row["label"]: row["cost_usd"] for row in rows} == pytest.approx(expected)
    assert _summary_cells(run, "cost $") == [f"{row['cost_usd']:.4f}" for row in rows]  # type: ignore[str-format]
    assert {r.price_sheet for r in load_records(run)} == {"test"}
    last = json.loads((run / "run.json").read_text(encoding="utf-8"))["sessions"][-1]
    assert last["command"] == "bcas reprice" and last["price_sheet"]["path"] == str(finished / "prices.toml")
    assert last["records_written"] == 6
    assert str(finished / "prices.toml") in (run / "index.html").read_text(encoding="utf-8")


def test_a_session_resumed_under_a_new_sheet_prices_the_whole_summary(finished: Path, tmp_path: Path) -> None:
    """Resumed records are priced under the sheet in force: the summary is the one `bcas reprice` makes."""
    resumed, repriced = _copy(finished, tmp_path / "a"), _copy(finished, tmp_path / "b")
    prices = str(finished / "prices.toml")
    done = run_pytest(finished, *OPTIONS, "--bcas-report", str(resumed), "--bcas-prices", prices)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "repriced: 6 record(s)" in done.stdout, done.stdout[-3000:]
    assert main(["reprice", str(repriced), "--prices", prices]) == 0
    assert {row["label"]: row["cost_usd"] for row in _rows(resumed)} == pytest.approx(_priced(repriced))
    for name in ("summary.json", "summary.csv"):
        assert (resumed / name).read_bytes() == (repriced / name).read_bytes(), name


SINK_SCRIPT = """
import json, sys
from pathlib import Path
from bcas.tracking import register_sink

class Sink:
    def __init__(self, target):
        self.target = target
    def check(self):
        pass
    def publish(self, run_dir):
        Path(self.target).write_text(json.dumps({"run": str(run_dir), "summary": (run_dir / "summary.json").is_file()}))
        return f"fake: {self.target}"

register_sink("fake", Sink, default_target="unused", help="a sink that writes where it published")
from bcas.cli import main  # the command's sink options are the sinks registered when it is imported
sys.exit(main(sys.argv[1:]))
"""


def test_a_sink_is_published_to_only_when_asked(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    target = tmp_path / "published.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    plain = subprocess.run(
        [sys.executable, "-c", SINK_SCRIPT, "report", str(run)], env=env, capture_output=True, text=True
    )
    assert plain.returncode == 0 and not target.exists(), plain.stderr
    asked = subprocess.run(
        [sys.executable, "-c", SINK_SCRIPT, "report", str(run), "--fake", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert asked.returncode == 0, asked.stderr
    assert f"published: fake: {target}" in asked.stdout
    assert json.loads(target.read_text()) == {"run": str(run), "summary": True}
