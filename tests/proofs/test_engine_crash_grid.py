"""Proof: a native crash of the embedded engine fails one item, and the grid goes on.

A grid of three items runs on the real embedded model (SmolLM2-135M, llama.cpp in its
engine process) as ``python -m pytest`` in a subprocess.  A backend registered from the
project's conftest wraps the embedded model and, on the requests of one item, crashes
the engine process with SIGSEGV, then the fresh engine started for the retry too.  The
run must finish: the other items recorded normally, the crashed item recorded as an
error naming the crash and the request's size, ``run.json`` written.  The same command
without the crashes then resumes: only the crashed item runs again, and every item ends
with an answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bcas.testing.project import backends, budget_grid, codename_items, grid_project, read_records

CRASHING_BACKEND = '''
import os
import signal
import threading
import time

from bcas.llm.base import WrappedModel
from bcas.llm.embedded import create as create_embedded


class CrashingEngine(WrappedModel):
    """The embedded model, whose engine is crashed (SIGSEGV) on one item's first request."""

    def __init__(self, inner):
        self.inner = inner
        self.crashed = False

    async def chat(self, request):
        target = os.environ.get("CRASH_ON", "")
        text = " ".join(str(m.get("content", "")) for m in request.messages)
        if target and target in text and not self.crashed:
            self.crashed = True
            os.kill(self.inner.worker_pid, signal.SIGSEGV)
            threading.Thread(target=self.crash_next_engine, daemon=True).start()
        return await self.inner.chat(request)

    def crash_next_engine(self):
        first = self.inner.worker_pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pid = self.inner.worker_pid
            if pid is not None and pid != first:
                os.kill(pid, signal.SIGSEGV)
                return
            time.sleep(0.005)


def create(model=None, **options):
    return CrashingEngine(create_embedded(model, n_ctx=2048, **options))
'''


def _run(project: Path, report: Path, cache: Path, crash_on: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BCAS_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "CRASH_ON": crash_on}
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--bcas-backend", "crashing",
        "--bcas-grid", "crash", "--bcas-concurrency", "1", "--bcas-report", str(report), "--bcas-no-preflight",
    ]  # fmt: skip
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.proof_stage  # a grid run three times on the real engine: CI's required proof stage
def test_a_crashed_engine_fails_one_item_and_the_rerun_resumes_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    conftest = backends({"crashing": "crashing_backend:create"}, import_path=project) + budget_grid(
        "crash", ["tiny.jsonl"], searches=(1,), tokens=300, limit=3
    )
    grid_project(
        project,
        conftest,
        datasets={"tiny.jsonl": codename_items(3)},
        files={"crashing_backend.py": CRASHING_BACKEND},
    )
    report, cache = tmp_path / "report", tmp_path / "cache"

    first = _run(project, report, cache, crash_on="project 1?")
    out = first.stdout + first.stderr
    assert first.returncode == 1, out  # the case fails for its errored item; the session is not killed
    records = {r["item_id"]: r for r in read_records(report)}
    assert sorted(records) == ["q0", "q1", "q2"], out
    crashed = records["q1"]
    assert crashed["stop_reason"] == "error"
    assert "crashed twice" in crashed["error"] and "SIGSEGV" in crashed["error"]
    assert "max_tokens=" in crashed["error"] and "prompt characters" in crashed["error"]
    assert records["q0"]["error"] is None and records["q2"]["error"] is None
    assert (report / "run.json").is_file()

    second = _run(project, report, cache, crash_on="")
    assert second.returncode == 0, second.stdout + second.stderr
    final = read_records(report)
    latest = {r["item_id"]: r for r in final}
    assert all(latest[i]["error"] is None for i in ("q0", "q1", "q2"))
    # only the crashed item ran again: one new record
    assert len(final) == len(records) + 1
