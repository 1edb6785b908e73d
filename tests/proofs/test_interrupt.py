"""Proof: Ctrl-C or a scheduler's SIGTERM mid-grid ends the run cleanly, and the same command resumes it.

A real grid runs as ``python -m pytest`` in a subprocess of its own: two BCAS cases of six
HotpotQA items over real BM25, on the paced test double (bcas/testing/paced.py: the mock's
seeded answers, a short sleep per call, so items take long enough to interrupt between).
Once some records are on disk the run is stopped:

* Ctrl-C: SIGINT to the process group, as a terminal sends it (the xdist workers get it too);
* SIGTERM to the main process only, as ``timeout``, a container runtime or a scheduler sends it.

Promises checked: exit status 2 (pytest's "interrupted"); one line saying how far it got
("interrupted after N of 12 items; run the same command to resume", N the items on disk), no
traceback, under 20 lines in all; ``records.jsonl`` holds what finished (the workers' files
merged into it and gone); a report of what finished (summary and index.html); ``run.json``'s
entry has its end time and ``status: "interrupted"``.  The same command then resumes: it runs
only what is missing and ends with every item recorded once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bcas.testing.project import read_records
from tests.support.mockruns import REPO, make_project

ITEMS = 12  # two cases of six items (the "brief" grid of tests/support/mockruns.py)
STOP_AFTER = 3  # records on disk before the signal
LINE = re.compile(r"^\[bcas\] interrupted after (\d+) of (\d+) items; run the same command to resume")


def _command(*extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "test_grids.py", "-p", "no:cacheprovider", "-p", "no:benchmark",
        "--bcas-backend", "paced", "--bcas-grid", "brief", "--bcas-concurrency", "1", "--bcas-report", "run", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the module's runs: the BM25 index is built once.

    The generation cache is off (``BCAS_NO_CACHE``): a run replaying the replies an earlier
    test stored would finish before the signal reaches it.
    """
    return tmp_path_factory.mktemp("cache")


def _env(cache: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "BCAS_CACHE_DIR": str(cache),
        # 0.4 s a call, about 1.6 s an item: the signal, sent once 3 records are on disk, must
        # land before the run's last item even when this test's poll is late on a loaded
        # machine (at 0.1 s a call a full default run saw the child finish first).
        "BCAS_PACED_DELAY": "0.4",
        "BCAS_NO_CACHE": "1",
        "PYTHONPATH": str(REPO),
    }
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _on_disk(run: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in run.glob("records*.jsonl")) if run.is_dir() else 0


def _as_from_a_terminal() -> None:
    """Ctrl-C's default action in the run, as a terminal starts a command with it.

    A suite started in the background by a non-interactive shell (``pytest tests &`` in a
    script, ``nohup``) inherits SIGINT ignored, as POSIX has such shells start background
    commands, and so would the run this test starts: Ctrl-C could not reach it (a full
    default run started that way failed here every time while the run never saw the signal).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_and_stop(project: Path, cache: Path, sig: signal.Signals, group: bool, *extra: str) -> tuple[int, str, str]:
    """Start the run, send ``sig`` once STOP_AFTER records are on disk; (exit status, output, when)."""
    log = project / "stopped.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            _command(*extra), cwd=project, env=_env(cache), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_as_from_a_terminal,
        )  # fmt: skip
        try:
            started = time.monotonic()
            deadline = started + 300
            while _on_disk(project / "run") < STOP_AFTER:
                if proc.poll() is not None:
                    pytest.fail(f"the run ended (rc {proc.returncode}) before it was stopped:\n{log.read_text()}")
                if time.monotonic() > deadline:
                    pytest.fail("no records within 5 minutes")
                time.sleep(0.05)
            on_disk, sent_s = _on_disk(project / "run"), time.monotonic() - started
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
            status = proc.wait(timeout=300)
            ended_s = time.monotonic() - started
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    # Said with the output: when the signal went out, against when the run ended.
    when = (
        f"[signal sent {sent_s:.2f} s after the start with {on_disk} records on disk; the run ended at {ended_s:.2f} s]"
    )
    return status, log.read_text(), when


def _keys(records: list[dict]) -> set[tuple]:
    return {(r["config_id"], r["dataset_hash"], r["item_id"], r["epoch"]) for r in records}


@pytest.mark.parametrize(
    ("sig", "group", "extra"),
    [
        pytest.param(signal.SIGINT, True, (), id="ctrl-c", marks=pytest.mark.proof_stage),
        pytest.param(signal.SIGTERM, False, (), id="sigterm", marks=pytest.mark.slow),
        pytest.param(signal.SIGINT, True, ("-n", "2"), id="ctrl-c-two-workers", marks=pytest.mark.slow),
    ],
)
def test_an_interrupted_run_reports_what_finished_and_the_same_command_resumes(
    tmp_path: Path, cache: Path, sig: signal.Signals, group: bool, extra: tuple[str, ...]
) -> None:
    project = make_project(tmp_path / "project")
    run = project / "run"

    status, output, when = _run_and_stop(project, cache, sig, group, *extra)
    assert status == int(pytest.ExitCode.INTERRUPTED), output + when
    lines = output.splitlines()
    assert len(lines) < 20 and "Traceback" not in output, output
    said = [m for m in map(LINE.match, lines) if m]
    assert len(said) == 1, output

    # What finished is in records.jsonl (the workers' files merged away), reported, and in run.json.
    assert not list(run.glob("records.*.jsonl")), sorted(p.name for p in run.iterdir())
    finished = read_records(run)
    assert len(finished) == len(_keys(finished))  # each answer once
    assert STOP_AFTER <= len(finished) < ITEMS, output
    assert (int(said[0].group(1)), int(said[0].group(2))) == (len(finished), ITEMS)
    assert (run / "index.html").is_file()
    rows = json.loads((run / "summary.json").read_text(encoding="utf-8"))["rows"]
    assert sum(int(r["n"]) for r in rows) == len(finished), rows  # the summary is of what finished
    entry = json.loads((run / "run.json").read_text(encoding="utf-8"))["sessions"][-1]
    assert entry["status"] == "interrupted" and entry["exit_status"] == 2 and entry["ended_at"], entry
    assert entry["records_written"] == len(finished)

    # The same command resumes: what finished is skipped, the rest runs, each item recorded once.
    again = subprocess.run(
        _command(*extra), cwd=project, env=_env(cache), capture_output=True, text=True, timeout=600, check=False
    )
    assert again.returncode == 0, again.stdout + again.stderr
    final = read_records(run)
    assert len(final) == ITEMS and len(_keys(final)) == ITEMS
    assert _keys(finished) <= _keys(final)
    sessions = json.loads((run / "run.json").read_text(encoding="utf-8"))["sessions"]
    assert [s["status"] for s in sessions] == ["interrupted", "finished"]
    assert sessions[-1]["records_written"] == ITEMS - len(finished)


def test_sigterm_becomes_the_interrupt_ctrl_c_raises_and_the_old_handler_comes_back(
    pytestconfig: pytest.Config,
) -> None:
    """The handler of the main process (the slow run above follows the rest of the path under SIGTERM)."""
    from bcas.harness.interrupt import InterruptPlugin

    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as in a plain pytest process
    plugin = InterruptPlugin(pytestconfig)
    try:
        plugin.install()  # what collecting grid cases does
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode; never this long
        plugin.pytest_unconfigure()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_run_interrupted_before_any_item_finished_still_leaves_its_records_file(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from bcas.run.finalize import finalize_run

    run = tmp_path / "run"
    run.mkdir()
    settings = SimpleNamespace(run_dir=run, grids=("brief",), holm_scope=None)
    assert finalize_run(settings, None, status="interrupted") is None  # nothing to report yet
    assert (run / "records.jsonl").is_file() and read_records(run) == []
    other = tmp_path / "other"
    other.mkdir()
    finalize_run(SimpleNamespace(run_dir=other, grids=("brief",), holm_scope=None), None)
    assert not (other / "records.jsonl").exists()  # a finished session with nothing run writes nothing
