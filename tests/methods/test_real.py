"""The baselines grid on the embedded SmolLM2-135M (hotpotqa, 3 items): every method and the loop,
both retrieval modes, finish with no error record and within their budgets (slow: minutes on CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bcas.grids import get_grid
from bcas.testing.project import read_records
from tests.support.mockruns import REPO


@pytest.mark.slow
def test_the_baselines_grid_on_the_embedded_model_finishes_with_no_error_record(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {**os.environ, "BCAS_THREADS": os.environ.get("BCAS_THREADS", "1"), "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-grid", "baselines",
         "--bcas-model", "embedded", "--bcas-datasets", "hotpotqa", "--bcas-limit", "3", "--bcas-report", str(run_dir)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=3000, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    records = read_records(run_dir)
    labels = {e.label for e in get_grid("baselines").entries}
    assert {r["label"] for r in records} == labels and len(records) == 3 * len(labels)
    assert [r for r in records if r["stop_reason"] == "error"] == []
    for r in records:
        budget = r["config"]["budget"]
        assert r["searches_used"] <= budget["max_searches"]
        if r["method"] != "bcas":
            assert r["tokens_out"] <= budget["max_total_tokens"]
    assert all(r["searches_used"] == 0 for r in records if r["method"] == "closed_book")
    assert all(r["searches_used"] == 1 for r in records if r["method"] == "retrieve_read")
    assert "agent vs methods baselines" in done.stdout
