"""What a user sees in the terminal after a run: the summary's names whole, a misspelt grid
answered with the closest grid's name, no progress bars in a log that is not a terminal."""

from __future__ import annotations

import json

import pytest

from bcas.testing.project import budget_grid, codename_items, grid_project

pytest_plugins = ["pytester"]


def run_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The grid's test file run in this process (a fresh interpreter per run costs seconds)."""
    return pytester.runpytest("test_grids.py", "-p", "no:cacheprovider", *args)


LONG = "hotpot_dev_distractor_v1_sample"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(pytester.path / "cache"))
    return pytester


def test_the_summary_shows_long_dataset_names_whole_and_no_progress_bars(project: pytest.Pytester) -> None:
    tmp_path = project.path
    grid_project(
        tmp_path, budget_grid("tiny", [str(tmp_path / f"{LONG}.jsonl")], (1,), limit=2),
        datasets={f"{LONG}.jsonl": codename_items(2)},
    )  # fmt: skip
    done = run_pytest(project, "--bcas-grid", "tiny", "--bcas-model", "mock:gold", "--bcas-report", str(tmp_path / "r"))
    stdout = done.stdout.str()
    out = stdout + done.stderr.str()
    assert done.ret == 0, out[-3000:]
    rows = [line for line in stdout.splitlines() if line.startswith("tiny ")]
    assert rows and all(f" {LONG} " in line for line in rows), stdout[-3000:]
    assert "\r" not in out and "it/s]" not in out  # tqdm draws nothing into a captured, non-terminal stream


def test_a_misspelt_grid_is_answered_with_the_closest_name(project: pytest.Pytester) -> None:
    grid_project(project.path, budget_grid("tiny", ["hotpotqa"], (1,), limit=2))
    done = run_pytest(project, "--bcas-grid", "smoek", "--bcas-model", "mock:gold")
    assert done.ret == 4, done.stdout.str()[-2000:]
    assert "unknown grid 'smoek' (did you mean 'smoke'?); available: " in done.stderr.str(), done.stderr.str()[-2000:]


def test_records_of_a_test_double_say_so(project: pytest.Pytester) -> None:
    """getting-started: records of a mock model carry ``extra.mock = true``; the report's banner reads it."""
    tmp_path = project.path
    grid_project(tmp_path, budget_grid("tiny", ["hotpotqa"], (1,), limit=2))
    done = run_pytest(project, "--bcas-grid", "tiny", "--bcas-model", "mock:gold", "--bcas-report", str(tmp_path / "r"))
    assert done.ret == 0, done.stdout.str()[-2000:]
    lines = (tmp_path / "r" / "records.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(json.loads(line)["extra"].get("mock") is True for line in lines)
