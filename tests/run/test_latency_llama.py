"""The smoke grid on a real llama.cpp server at concurrency 1 and 4: latency columns, figure, load table.

``llama_cpp.server`` serving the shipped GGUF (the session's ``llama_server``) through
the ``openai`` backend, the smoke grid's one-search BM25 case (``-k s1``) through the
pytest door, each level into its own run folder without the generation cache (the
documented way of running load as an axis), then a rerun of level 1 from the cache.
Slow: four runs of a case on a real model.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bcas.cli import main as bcas_main
from bcas.testing.servers import LlamaCppServer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _run(server: LlamaCppServer, out: Path, level: int, cache: Path, *more: str) -> str:
    command = [
        sys.executable, "-m", "pytest", "benchmarks", "--bcas-grid", "smoke", "-k", "s1",
        "--bcas-model", "openai:smollm2", "--bcas-base-url", server.base_url, "--bcas-concurrency", str(level),
        "--bcas-report", str(out), "-p", "no:cacheprovider", *more,
    ]  # fmt: skip
    env = {**os.environ, "BCAS_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


def _rows(run: Path) -> list[dict]:
    return json.loads((run / "summary.json").read_text())["rows"]


def test_smoke_grid_at_two_levels_on_llama_cpp(
    llama_server: LlamaCppServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    runs = {level: tmp_path / f"c{level}" for level in (1, 4)}
    shown = {level: _run(llama_server, run, level, cache, "--bcas-no-cache") for level, run in runs.items()}
    for level, run in runs.items():
        rows = _rows(run)
        assert rows
        for row in rows:
            assert row["latency_source"] == "live" and row["concurrency"] == level
            assert 0 < row["latency_p50"] <= row["latency_p95"] and row["items_per_min"] > 0
            assert row["mean_model_call_s"] > 0 and row["mean_search_s"] is not None
        header = next(csv.reader(io.StringIO((run / "summary.csv").read_text())))
        assert {"latency_p95", "items_per_min", "share_model"} <= set(header)
        page = (run / "index.html").read_text()
        assert "Latency and throughput" in page and "Time per item by configuration" in page
        assert f"concurrency {level}, live)" in shown[level] and "latency smoke/" in shown[level]
    capsys.readouterr()
    assert bcas_main(["latency", str(runs[1]), str(runs[4]), "--out", str(tmp_path / "knee.html")]) == 0
    table = capsys.readouterr().out
    assert "items/min" in table and "p95 s" in table
    assert "Throughput against p95 latency" in (tmp_path / "knee.html").read_text()
    # from the cache: level 1 again (a warm-up run fills the cache), the recorded times shown
    _run(llama_server, tmp_path / "warm", 1, cache)
    replay = _run(llama_server, tmp_path / "replay", 1, cache)
    for row in _rows(tmp_path / "replay"):
        assert row["latency_source"] == "cache" and row["items_per_min"] is None and row["mean_wait_s"] is None
        assert row["mean_model_call_s"] > 0.05  # the recorded seconds of a real model call, not a lookup's
    assert "concurrency 1, cache)" in replay
