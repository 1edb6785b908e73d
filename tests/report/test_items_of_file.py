"""Nothing silent about the data (issue 54): a case evaluated on fewer items than its dataset
file holds says so wherever its n is shown, in the words the terminal uses ("7 of 12 items;
5 held for calibration", :func:`bcas.records.case_status.items_note`): summary.json, the
report's summary and MADARA tables, ``bcas view`` and ``bcas compare``.  The sizes come from
the run folder's ``cases.jsonl``, so a rebuild from the folder alone shows the same words; a
case evaluated on every item of its file shows none.  Mock models, files of 10 and 12 items.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bcas.cli import main
from bcas.records.case_status import CaseStatus, StatusIndex, items_note, read_case_statuses
from bcas.report.status import with_status
from bcas.report.summary import build_summaries

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "bcas/resources/data/conflictqa_strategyqa.jsonl"

# run -> (grid, file items, calibration size, limit, the words beside each row's n)
RUNS: dict[str, tuple[str, int, int | None, int | str, str]] = {
    "held12": ("madara", 12, 5, "all", "7 of 12 items; 5 held for calibration"),
    "held10": ("madara", 10, 3, 4, "4 of 10 items; 3 held for calibration"),
    "limited": ("smoke", 12, None, 4, "4 of 12 items"),
    "whole": ("smoke", 12, None, "all", ""),
}


def _items(path: Path, n: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(SHIPPED.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import bcas

    root = tmp_path_factory.mktemp("items_of_file")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BCAS_CACHE_DIR", str(root / "cache"))
        for name, (grid, size, calibration, limit, _) in RUNS.items():
            data = _items(root / "data" / f"file{size}.jsonl", size)
            bcas.evaluate(
                grids=grid, models="mock:gold", datasets=[str(data)], calibration_n=calibration, limit=limit,
                out=root / "runs" / name,
            )  # fmt: skip
    return root


def _rows(run: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((run / "summary.json").read_text(encoding="utf-8"))["rows"]
    assert rows, run
    return rows


def _column(html: str, table_id: str, column: str) -> list[str]:
    """The cells of one column of a report table, markup included."""
    found = re.search(rf'<table[^>]* id="{table_id}"', html)
    assert found, table_id
    table = html[found.start() :]
    table = table[: table.index("</table>")]
    heads = re.findall(r"<th[^>]*>(.*?)</th>", table[: table.index("</thead>")])
    col = heads.index(column)
    body = table[table.index("<tbody>") :]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row)[col] for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]


def _shown(n: int, note: str) -> str:
    return f'{n} <span class="n-note">({note})</span>' if note else str(n)


@pytest.mark.parametrize("name", list(RUNS))
def test_summary_json_holds_the_files_size_the_held_out_items_and_the_words(runs: Path, name: str) -> None:
    _grid, size, calibration, _limit, note = RUNS[name]
    rows = _rows(runs / "runs" / name)
    for row in rows:
        assert (row["file_items"], row["held_out"]) == (size, calibration or 0), row
        assert row["items_note"] == note, row
        if note:
            assert note.startswith(f"{row['n']} of {size} items")  # the row's own n, of the file's size
    statuses = read_case_statuses(runs / "runs" / name)  # where the summary took them from
    assert statuses and {(s.file_items, s.held_out) for s in statuses} == {(size, calibration or 0)}


@pytest.mark.parametrize("name", list(RUNS))
def test_the_report_shows_the_words_beside_n_and_only_where_the_file_holds_more(runs: Path, name: str) -> None:
    grid, _size, _calibration, _limit, note = RUNS[name]
    run = runs / "runs" / name
    html = (run / "index.html").read_text(encoding="utf-8")
    rows = _rows(run)
    assert sorted(_column(html, "summary", "n")) == sorted(_shown(r["n"], note) for r in rows)
    if grid == "madara":  # the MADARA methods table shows each case's n too
        assert sorted(_column(html, "madara", "n")) == sorted(_shown(r["n"], note) for r in rows)
    panels = re.findall(r'<table[^>]* id="([^"]*-points)"', html)  # cost against accuracy: one row per point
    assert panels
    for panel in panels:
        cells = _column(html, panel, "n")
        assert cells and set(cells) <= {_shown(r["n"], note) for r in rows}, cells
    if not note:
        assert "n-note" not in html.split("<body", 1)[1].replace(".n-note", "") and " of 12 items" not in html
    assert ("held for calibration" in html) == (grid == "madara")


def test_a_rebuild_from_the_run_folder_alone_shows_the_same_words(runs: Path, tmp_path: Path) -> None:
    run = tmp_path / "held12"
    shutil.copytree(runs / "runs" / "held12", run)
    written = {name: (run / name).read_bytes() for name in ("summary.json", "index.html")}
    for name in written:
        (run / name).unlink()
    assert main(["report", str(run)]) == 0
    assert {name: (run / name).read_bytes() for name in written} == written
    # A cases.jsonl written before the sizes were recorded: no words, no guess.
    lines = [json.loads(line) for line in (run / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    (run / "cases.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in d.items() if k not in ("file_items", "held_out")}) + "\n" for d in lines),
        encoding="utf-8",
    )
    assert main(["report", str(run)]) == 0
    assert {(r["file_items"], r["held_out"], r["items_note"]) for r in _rows(run)} == {(0, 0, "")}
    assert "held for calibration" not in (run / "index.html").read_text(encoding="utf-8")


def test_bcas_view_shows_the_words_beside_each_leaderboard_n(runs: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shown_runs = [runs / "runs" / name for name in ("held12", "held10", "whole")]  # limited's items are whole's
    assert main(["view", *map(str, shown_runs), "--out", str(site)]) == 0
    html = (site / "index.html").read_text(encoding="utf-8")
    view = json.loads((site / "view.json").read_text(encoding="utf-8"))
    shown = [(row["run"], row["n"], row["items_note"]) for t in view["tables"] for row in t["rows"]]
    assert {(run, note) for run, _n, note in shown} == {(p.name, RUNS[p.name][4]) for p in shown_runs}
    cells = re.findall(r'<td>(\d+(?: <span class="n-note">\([^<]*\)</span>)?)</td><td>\d*</td><td class="acc">', html)
    assert sorted(cells) == sorted(_shown(n, note) for _run, n, note in shown)


@pytest.mark.parametrize("name", ["held12", "whole"])
def test_bcas_compare_names_each_side_evaluated_on_fewer_items(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    copy = tmp_path / "again"
    shutil.copytree(runs / "runs" / name, copy)
    assert main(["compare", str(runs / "runs" / name), str(copy)]) == 0
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if " of 12 items" in line]
    note = RUNS[name][4]
    groups = {(r["model"], r["dataset"], r["label"]) for r in _rows(copy)}
    expected = [f"note: {m} / {d} / {label}: {side}: {note}" for m, d, label in groups for side in "AB"]
    assert sorted(notes) == (sorted(expected) if note else []), out


# -- the rule on hand-made rows ------------------------------------------------------------------


def _record(label: str, item: int, grid: str = "g") -> dict[str, Any]:
    return {
        "grid": grid, "model": "m", "dataset": "d", "label": label, "item_id": f"q{item}", "config_id": f"c-{label}",
        "model_fingerprint": "fp", "correct_em": True, "epoch": 0, "answers": ["a"], "cost_usd": 0.0,
        "extra": {"grid": grid},
    }  # fmt: skip


def _status(label: str, file_items: int, held: int, grid: str = "g") -> CaseStatus:
    return CaseStatus(
        case_id=f"{grid}-{label}", grid=grid, model="m", dataset="d", label=label, status="passed",
        fingerprint="fp", config_id=f"c-{label}", file_items=file_items, held_out=held,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("n", "file_items", "held", "words"),
    [
        (20, 50, 30, "20 of 50 items; 30 held for calibration"),
        (3, 50, 30, "3 of 50 items; 30 held for calibration"),
        (20, 21, 0, "20 of 21 items"),
        (20, 20, 0, ""),  # every item of the file
        (21, 20, 5, ""),  # more than the file (repeats): no words either
        (20, 0, 0, ""),  # the size is not known (a corpus-backed file, an older cases.jsonl)
    ],
)
def test_the_words_follow_n_the_files_size_and_the_held_out_items(
    n: int, file_items: int, held: int, words: str
) -> None:
    records = [_record("a", i) for i in range(n)]
    (row,) = build_summaries(records, statuses=[_status("a", file_items, held)]).rows
    assert (row.n, row.items_note) == (n, words)
    assert items_note(n, file_items, held) == words  # the one rule, as every other view asks it
    assert (row.file_items, row.held_out) == (file_items, held)


def test_a_rows_own_grid_gives_its_size_not_another_grids_case_of_the_same_answers() -> None:
    """Two grids share a configuration (one set of answers): each row takes the sizes of its own
    grid's case, which may hold out other items; a row whose grid wrote no line takes the other's."""
    records = [_record("a", i, grid) for grid in ("g", "h") for i in range(5)]
    rows = build_summaries(records).rows
    index = StatusIndex([_status("a", 50, 45, "g"), _status("a", 9, 0, "h")])
    assert {r.grid: r.items_note for r in with_status(rows, index)} == {
        "g": items_note(5, 50, 45),
        "h": "5 of 9 items",
    }
    only_g = StatusIndex([_status("a", 50, 45, "g")])
    assert {r.grid: r.items_note for r in with_status(rows, only_g)} == {
        "g": "5 of 50 items; 45 held for calibration"
    } | {"h": "5 of 50 items; 45 held for calibration"}


def test_a_status_line_with_bad_counts_reads_as_unknown(tmp_path: Path) -> None:
    lines = [
        {"case_id": "a", "grid": "g", "model": "m", "dataset": "d", "label": "a", "status": "passed", "file_items": 12},
        {
            "case_id": "b",
            "grid": "g",
            "model": "m",
            "dataset": "d",
            "label": "b",
            "status": "passed",
            "file_items": "x",
        },
        {"case_id": "c", "grid": "g", "model": "m", "dataset": "d", "label": "c", "status": "passed", "held_out": -4},
    ]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines), encoding="utf-8")
    got = {s.case_id: (s.file_items, s.held_out) for s in read_case_statuses(tmp_path)}
    assert got == {"a": (12, 0), "b": (0, 0), "c": (0, 0)}
