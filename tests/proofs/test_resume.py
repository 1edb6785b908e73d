"""Proof: a run killed with SIGKILL mid-grid resumes to exactly the uninterrupted result.

A real grid (SmolLM2-135M in-process through the ``embedded`` backend, two configs
on three HotpotQA items) runs as ``python -m pytest`` in a subprocess:

1. uninterrupted, with its own cold generation cache: the reference records;
2. again with another cold cache, killed with SIGKILL in the middle of an item
   once some records exist (some of that item's calls are cached); a torn write (a record cut short, no newline) is appended to ``records.jsonl``;
3. the same command again: it reports and truncates the torn line, skips what is
   recorded, and finishes.

The final file holds each (config, item) once and equals the reference in
everything but timing; the torn record is never read as one.  The test prints how
much cheaper the resumed run is than the cold one, and what a rerun with a warm
generation cache (fresh report directory) costs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.proofs import by_key, first_difference, raw_records, write_project

from bcas.records import read_records_file

CONFIGS = ((1, False), (1, True))  # (max_searches, planning)
ITEMS = 3
EXPECTED = len(CONFIGS) * ITEMS
KILL_AFTER = 2  # records on disk before the kill
SENTINEL = "torn-write-sentinel"


def _command(report: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "--bcas-backend", "embedded", "--bcas-grid", "resume", "--bcas-concurrency", "1",
        "--bcas-report", str(report), "-o", "log_cli=true", "--log-cli-level=WARNING",
    ]  # fmt: skip


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "BCAS_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}


def _run(project: Path, report: Path, cache: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    done = subprocess.run(
        _command(report), cwd=project, env=_env(cache), capture_output=True, text=True, timeout=1800, check=False
    )
    return done, time.perf_counter() - started


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _cached_calls(cache: Path) -> int:
    path = cache / "generations.sqlite"
    if not path.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            return int(db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])
    except sqlite3.Error:
        return 0  # not created yet


def _mid_item(report: Path, cache: Path) -> bool:
    """KILL_AFTER records are on disk and the next item has at least one finished call."""
    if _count_lines(report / "records.jsonl") < KILL_AFTER:
        return False
    recorded_calls = sum(r.llm_calls for r in read_records_file(report / "records.jsonl"))
    return _cached_calls(cache) > recorded_calls


def _run_and_kill(project: Path, report: Path, cache: Path) -> int:
    """Start the run, SIGKILL its process group in the middle of an item after KILL_AFTER records."""
    log = project / "killed.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            _command(report), cwd=project, env=_env(cache), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 1800
        try:
            while not _mid_item(report, cache):
                if proc.poll() is not None:
                    pytest.fail(f"the run ended (rc {proc.returncode}) before it could be killed:\n{log.read_text()}")
                if time.monotonic() > deadline:
                    pytest.fail("no records appeared within 30 minutes")
                time.sleep(0.1)
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.wait(timeout=60)
    return proc.returncode


@pytest.mark.proof_stage  # minutes of real generation: CI's required proof stage
def test_sigkill_mid_grid_then_rerun_equals_the_uninterrupted_run(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project", grid="resume", configs=CONFIGS, limit=ITEMS)

    # 1. The reference: uninterrupted, cold cache.
    cold, cold_s = _run(project, tmp_path / "reference", tmp_path / "cache-reference")
    assert cold.returncode == 0, cold.stdout + cold.stderr
    reference = raw_records(tmp_path / "reference")
    assert len(reference) == EXPECTED

    # 2. Killed mid-grid, then a torn write appended.
    run_dir, cache = tmp_path / "resumed", tmp_path / "cache-resumed"
    rc = _run_and_kill(project, run_dir, cache)
    assert rc == -signal.SIGKILL
    records_file = run_dir / "records.jsonl"
    before_kill = [r.to_dict() for r in read_records_file(records_file)]
    assert KILL_AFTER <= len(before_kill) < EXPECTED, "the kill did not land mid-grid"
    torn = json.loads(records_file.read_text().splitlines()[0])
    torn["item_id"] = SENTINEL
    torn_line = json.dumps(torn).encode()
    with open(records_file, "ab") as handle:
        handle.write(torn_line[: len(torn_line) * 2 // 3])  # cut short: no closing brace, no newline

    # 3. The same command again.
    resumed, resumed_s = _run(project, run_dir, cache)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert "torn last line" in output  # detected and reported ...
    text = records_file.read_text()
    assert SENTINEL not in text and text.endswith("\n")  # ... and repaired

    final = raw_records(run_dir)
    keys = [(r["config_id"], r["item_id"]) for r in final]
    assert len(keys) == EXPECTED and len(set(keys)) == EXPECTED  # nothing lost, nothing doubled
    assert {r["item_id"] for r in before_kill} <= {r["item_id"] for r in final}
    expected, got = by_key(reference), by_key(final)
    assert got.keys() == expected.keys()
    for key, record in expected.items():
        assert got[key] == record, f"{key}: {first_difference(record, got[key])}"
    written_on_rerun = EXPECTED - len(before_kill)
    cached_calls = sum(s["cached"] for r in final for s in r["steps"])
    assert cached_calls >= 1  # the killed item's finished calls came back from the cache

    # The generation cache alone: the whole grid again on a fresh report directory.
    warm, warm_s = _run(project, tmp_path / "warm", cache)
    assert warm.returncode == 0, warm.stdout + warm.stderr
    warm_records = raw_records(tmp_path / "warm")
    assert by_key(warm_records) == expected
    assert all(s["cached"] for r in warm_records for s in r["steps"])

    print(
        f"\n[resume proof] cold uninterrupted run {cold_s:.1f} s; after SIGKILL at {len(before_kill)}/{EXPECTED} "
        f"records the rerun took {resumed_s:.1f} s ({cold_s / resumed_s:.1f}x cheaper; "
        f"{written_on_rerun} records written, {cached_calls} calls served from the cache); "
        f"whole grid on a warm cache {warm_s:.1f} s ({cold_s / warm_s:.1f}x cheaper)"
    )
