"""What a user sees in the terminal after a run: the summary's names whole, a misspelt grid
answered with the closest grid's name, no progress bars in a log that is not a terminal."""

from __future__ import annotations

import json
from pathlib import Path

from bcas.testing.project import budget_grid, codename_items, grid_project
from tests.support.mockruns import run_pytest

LONG = "hotpot_dev_distractor_v1_sample"


def test_the_summary_shows_long_dataset_names_whole_and_no_progress_bars(tmp_path: Path) -> None:
    folder = grid_project(
        tmp_path, budget_grid("tiny", [str(tmp_path / f"{LONG}.jsonl")], (1,), limit=2),
        datasets={f"{LONG}.jsonl": codename_items(2)},
    )  # fmt: skip
    done = run_pytest(folder, "--bcas-grid", "tiny", "--bcas-model", "mock:gold", "--bcas-report", str(tmp_path / "r"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("tiny ")]
    assert rows and all(f" {LONG} " in line for line in rows), done.stdout[-3000:]
    assert "\r" not in out and "it/s]" not in out  # tqdm draws nothing into a captured, non-terminal stream


def test_a_misspelt_grid_is_answered_with_the_closest_name(tmp_path: Path) -> None:
    folder = grid_project(tmp_path, budget_grid("tiny", ["hotpotqa"], (1,), limit=2))
    done = run_pytest(folder, "--bcas-grid", "smoek", "--bcas-model", "mock:gold")
    assert done.returncode == 4, done.stdout[-2000:]
    assert "unknown grid 'smoek'; did you mean 'smoke'?" in done.stderr, done.stderr[-2000:]


def test_records_of_a_test_double_say_so(tmp_path: Path) -> None:
    """getting-started: records of a mock model carry ``extra.mock = true``; the report's banner reads it."""
    folder = grid_project(tmp_path, budget_grid("tiny", ["hotpotqa"], (1,), limit=2))
    done = run_pytest(folder, "--bcas-grid", "tiny", "--bcas-model", "mock:gold", "--bcas-report", str(tmp_path / "r"))
    assert done.returncode == 0, done.stdout[-2000:]
    lines = (tmp_path / "r" / "records.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(json.loads(line)["extra"].get("mock") is True for line in lines)
