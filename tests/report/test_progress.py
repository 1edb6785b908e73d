"""Progress in pytest's terminal: live lines on a terminal, plain lines in logs, quiet under -q, and -n 2.

Each run is a real pytest process in a pytester folder, on the paced test double
(bcas/testing/paced.py: the mock's random answers with a short delay per call, so a case
lasts long enough to be seen running) over real BM25 on the HotpotQA sample.  Terminal
runs go through a pseudo-terminal and are replayed on a small screen
(tests/support/terminal.py): what the reader saw while cases ran, and what stays.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from bcas.harness.progress import CaseStats
from bcas.testing.project import preload
from tests.support.mockruns import REPO, make_project
from tests.support.terminal import replay, run_on_terminal

# The in-process run below writes records.parquet: pyarrow and pandas must be loaded before
# it, or the copies it loads are dropped with its sys.modules and later readers break.
preload("pandas", "pyarrow")

pytest_plugins = ["pytester"]

CASES = ("paced-hotpotqa-bm25/s1/t2k", "paced-hotpotqa-bm25/s2/t2k")
RUN = [
    "--bcas-backend",
    "paced",
    "--bcas-grid",
    "brief",
    "--bcas-prices",
    "prices.toml",
    "--bcas-concurrency",
    "1",
    "-p",
    "no:benchmark",
]
LIVE = re.compile(
    r"^(\[gw\d\] )?(?P<case>\S+): (?P<done>\d)/6 items, (?P<rate>[\d.]+|-) items/min, "
    r"ETA (?P<eta>[\dhms.]+|\?), [\d.k]+ tokens, \$\d+\.\d{4}$"
)
END = re.compile(
    r"^\[bcas\] (\[gw\d\] )?(?P<case>\S+): 6/6 items in [\d.]+s, (?P<per_min>[\d.]+) items/min, [\d.k]+ tokens, "
    r"\$\d+\.\d{4}; correct_em [\d.]+% \[[\d.]+, [\d.]+\] n=6"
)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    make_project(pytester.path)
    monkeypatch.setenv("BCAS_CACHE_DIR", str(pytester.path / "cache"))
    monkeypatch.setenv("BCAS_PACED_DELAY", "0.05")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return pytester


def on_terminal(project: pytest.Pytester, *args: str) -> tuple[int, str]:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "test_grids.py",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(project.path),
        *RUN,
        *args,
    ]
    return run_on_terminal(argv, project.path, dict(os.environ))


def live_frames(seen: set[str]) -> dict[str, list[re.Match[str]]]:
    frames: dict[str, list[re.Match[str]]] = {}
    for line in seen:
        m = LIVE.match(line)
        if m:
            frames.setdefault(m.group("case"), []).append(m)
    return frames


def assert_collapsed(screen_text: list[str], dots_line: re.Pattern[str]) -> None:
    """What stays: pytest's own result line, no live line, no bcas end line (a terminal shows the table instead)."""
    assert not [line for line in screen_text if LIVE.match(line) or END.match(line)], screen_text
    assert any(dots_line.match(line) for line in screen_text), screen_text
    assert any(line.startswith("bcas/") or "bcas summary" in line for line in screen_text)


def test_terminal_shows_one_live_line_per_running_case_then_pytests_result(project: pytest.Pytester) -> None:
    status, output = on_terminal(project, "--bcas-report", "tty")
    assert status == 0, output[-3000:]
    screen = replay(output)
    frames = live_frames(screen.seen)
    assert set(frames) == set(CASES), screen.seen
    for case, seen in frames.items():
        # A running line counts items, and once an item is done it has a rate and an ETA.
        assert any(m.group("rate") != "-" and m.group("eta") != "?" and 0 < int(m.group("done")) < 6 for m in seen), (
            case
        )
    assert "\x1b[J" in output  # each live line is erased before pytest writes
    assert_collapsed(screen.text(), re.compile(r"^test_grids\.py \.\. +\[100%\]$"))
    assert not [line for line in screen.text() if line.startswith("[bcas]")]


@pytest.mark.proof_stage  # a run on two xdist workers: CI's required proof stage
def test_terminal_with_two_workers_shows_each_workers_case(project: pytest.Pytester) -> None:
    status, output = on_terminal(project, "--bcas-report", "tty-n", "-n", "2")
    assert status == 0, output[-3000:]
    screen = replay(output)
    prefixed = [line for line in screen.seen if re.match(r"^\[gw[01]\] ", line) and LIVE.match(line)]
    assert {LIVE.match(line).group("case") for line in prefixed} == set(CASES), screen.seen
    assert_collapsed(screen.text(), re.compile(r"^\.\. +\[100%\]$"))


@pytest.mark.proof_stage  # a paced grid run, 9 s: CI's required proof stage runs it
def test_logs_get_one_plain_line_per_case_and_no_cursor_movement(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(*RUN, "--bcas-report", str(project.path / "plain"))
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "\x1b[" not in out and "\r" not in out
    ends = [END.match(line) for line in result.outlines if line.startswith("[bcas]")]
    assert [m.group("case") for m in ends if m] == list(CASES), result.outlines
    assert len(ends) == 2
    # One definition of throughput: each end line's items/min is its case's latency line's.
    for m in ends:
        label = m.group("case").split("-", 2)[-1]
        latency = re.search(rf"^latency \S+/{re.escape(label)}: .*?, ([\d.]+) items/min;", out, re.M)
        assert latency and latency.group(1) == m.group("per_min"), (m.group(0), out[-3000:])
    # 6 items of a 400-item file: the n says so
    assert all(re.search(r"n=6 \(6 of \d+ items\)", line) for line in result.outlines if END.match(line)), out
    # Each sits under its case's result line, and pytest's own lines are intact.
    lines = result.outlines
    for i, line in enumerate(lines):
        if line.startswith("[bcas]"):
            assert lines[i - 1] == "test_grids.py ."


@pytest.mark.proof_stage  # a run on two xdist workers: CI's required proof stage
def test_logs_with_two_workers_name_the_worker_on_lines_of_their_own(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(*RUN, "--bcas-report", str(project.path / "plain-n"), "-n", "2")
    result.assert_outcomes(passed=2)
    assert "\x1b[" not in result.stdout.str()
    ends = [line for line in result.outlines if "[bcas]" in line]
    assert len(ends) == 2 and all(line.startswith("[bcas] [gw") and END.match(line) for line in ends), result.outlines
    assert {END.match(line).group("case") for line in ends} == set(CASES)


@pytest.mark.proof_stage  # a paced grid run, 9 s: CI's required proof stage runs it
def test_quiet_shows_no_progress_but_keeps_the_summary(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(*RUN, "--bcas-report", str(project.path / "quiet"), "-q")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert not [line for line in out.splitlines() if LIVE.match(line)] and not [
        line for line in result.outlines if line.startswith("[bcas]")
    ]
    assert "bcas summary" in out and any(line.startswith("brief ") for line in result.outlines)
    assert Path(project.path / "quiet" / "records.jsonl").is_file()


def test_a_long_case_in_a_log_gets_a_line_every_interval(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain lines while a case runs (every 30 s in a real log; every item here), then its end line."""
    import bcas.harness.progress as progress

    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.0)
    result = project.runpytest(*RUN, "--bcas-report", str(project.path / "periodic"), "-k", "s1")
    result.assert_outcomes(passed=1)
    running = [LIVE.match(line[len("[bcas] ") :]) for line in result.outlines if line.startswith("[bcas] ")]
    assert [m.group("done") for m in running if m] == ["0", "1", "2", "3", "4", "5", "6"], result.outlines
    assert sum(bool(END.match(line)) for line in result.outlines) == 1


def test_the_rate_and_eta_count_from_the_first_finished_item_on_a_given_clock() -> None:
    """An instant backend (mock) spends its case's first second warming up (index read, imports),
    then finishes the rest in one more: the ETA is the time those take, not 10x more."""
    record = {"tokens_in": 10, "tokens_out": 5, "cost_usd": 0.0}
    stats = CaseStats("c", total=41, resumed=0, started=0.0)
    assert stats.line(now=5.0) == "c: 0/41 items, - items/min, ETA ?, 0 tokens, $0.0000"
    stats.add(record, now=10.0)  # the first item, after ten seconds of warm-up
    assert "1/41 items, - items/min, ETA ?" in stats.line(now=10.0)  # one point is no rate
    for i in range(1, 21):  # then one item every 0.05 s
        stats.add(record, now=10.0 + 0.05 * i)
    line = stats.line(now=11.0)  # 20 items in the second since the first; 20 left
    assert "21/41 items, 1200.0 items/min, ETA 1.0s, 315 tokens" in line, line
    assert "ETA 1.0s" in CaseStats(**{**stats.__dict__}).line(now=11.0)  # as an xdist worker hands it over
    assert "600.0 items/min, ETA 2.0s" in stats.line(now=12.0)  # a stall lowers the rate as time passes
    resumed = CaseStats("r", total=41, resumed=11, started=0.0)
    for i in range(11):
        resumed.add(record, now=3.0 + 0.1 * i)
    assert "22/41 items, 600.0 items/min, ETA 1.9s" in resumed.line(now=4.0)  # recorded items are not left to run


def test_the_end_line_says_how_many_of_the_files_items_a_case_evaluated_and_why() -> None:
    from bcas.harness.progress import end_line
    from bcas.records.case_status import items_note

    props = {"bcas_case": "c", "bcas_items_total": "20", "bcas_items_run": "20", "bcas_wall_s": "2",
             "bcas_run_tokens": "0", "bcas_run_cost": "$0", "bcas_metric": "correct_em", "bcas_accuracy": "0.5",
             "bcas_ci_low": "0.3", "bcas_ci_high": "0.7", "bcas_n": "20", "bcas_items_note": items_note(20, 50, 30)}  # fmt: skip
    assert "n=20 (20 of 50 items; 30 held for calibration)" in end_line(props)
    assert "held" not in items_note(20, 50, 0)
