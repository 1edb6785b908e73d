"""The smoke grid on a real llama.cpp server at concurrency 1 and 4: latency columns, figure, load table.

``llama_cpp.server`` serving the shipped GGUF (the session's ``llama_server``) through
the ``openai`` backend; each level into its own run folder without the generation cache
(the documented way of running load as an axis).  Slow: two runs of the smoke grid on a
real model.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import bcas
from bcas.report.latency_runs import main as latency_main
from bcas.testing.servers import LlamaCppServer

pytestmark = pytest.mark.slow


def test_smoke_grid_at_two_levels_on_llama_cpp(
    llama_server: LlamaCppServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    runs = {}
    for level in (1, 4):
        runs[level] = tmp_path / f"c{level}"
        bcas.evaluate(
            grids="smoke", models="openai:smollm2", base_url=llama_server.base_url, limit=1,
            concurrency=level, no_cache=True, out=runs[level],
        )  # fmt: skip
    for level, run in runs.items():
        rows = json.loads((run / "summary.json").read_text())["rows"]
        assert rows
        for row in rows:
            assert row["latency_source"] == "live" and row["concurrency"] == level
            assert row["latency_p50"] > 0 and row["latency_p95"] >= row["latency_p50"]
            assert row["mean_model_call_s"] > 0 and row["items_per_min"] > 0
        header = next(csv.reader(io.StringIO((run / "summary.csv").read_text())))
        assert {"latency_p95", "items_per_min", "share_model"} <= set(header)
        page = (run / "index.html").read_text()
        assert "Latency and throughput" in page and "Time per item by configuration" in page
    capsys.readouterr()
    assert latency_main([str(runs[1]), str(runs[4]), "--out", str(tmp_path / "knee.html")]) == 0
    table = capsys.readouterr().out
    assert "items/min" in table and "p95 s" in table
    assert "Throughput against p95 latency" in (tmp_path / "knee.html").read_text()
