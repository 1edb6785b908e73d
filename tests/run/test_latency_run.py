"""Latency through a whole run: a served model at concurrency 1 and 4, then a rerun from the cache.

A one-configuration grid against a :class:`bcas.testing.slotted.SlottedServer` (4 slots of 50 ms,
the mock's replies) through ``bcas.evaluate``, the same engine as the pytest door: the
summary (json and csv), the terminal lines, the report's section and the MLflow case
metrics carry the latency columns; the two levels' records share their answer
identities; ``bcas latency`` reads the two folders as a throughput/p95 table; a rerun
answered from the generation cache says so and shows the recorded model times.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from support.skips import MLFLOW_IMPORTABLE

import bcas
from bcas.cli import main as bcas_main
from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.grids import GRIDS, Grid, GridEntry, register_grid
from bcas.metrics.latency import latency_lines
from bcas.report.vega import LOADER, page_figures
from bcas.testing.mock_server import mock_reply
from bcas.testing.project import codename_items, read_records, write_jsonl
from bcas.testing.slotted import SlottedServer

SERVED = "slotted"
SERVICE_S = 0.05
GRID = "latency_levels"


def _grid(folder: Path) -> str:
    """A one-configuration BCAS grid over 6 codename items (registered once per process)."""
    if GRID not in GRIDS:
        data = write_jsonl(folder / "codenames.jsonl", codename_items(6))
        config = RunConfig(budget=Budget(max_searches=1, max_total_tokens=2000), retrieval=RetrievalConfig(mode="bm25"))
        register_grid(Grid(GRID, (GridEntry("bcas", config, reference=True),), datasets=(str(data),)))
    return GRID


def _rows(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "summary.json").read_text())["rows"]


def test_levels_summary_report_terminal_cache_and_mlflow(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_MLFLOW_EXPERIMENT", "bcas-latency")
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    sinks = {"mlflow": uri} if MLFLOW_IMPORTABLE else {}
    runs = {}
    results = {}
    with SlottedServer(slots=4, service_s=SERVICE_S, reply=mock_reply("random"), model=SERVED) as server:
        common = {
            "grids": _grid(tmp_path_factory.mktemp("data")),
            "models": f"openai:{SERVED}",
            "base_url": server.base_url,
            "limit": 6,
        }
        for level in (1, 4):
            runs[level] = tmp_path / f"c{level}"
            results[level] = bcas.evaluate(**common, concurrency=level, no_cache=True, out=runs[level], **sinks)
        replay = tmp_path / "replay"
        bcas.evaluate(**common, concurrency=1, out=tmp_path / "warm")  # fills the cache
        asked = server.requests
        replayed = bcas.evaluate(**common, concurrency=1, out=replay)
        assert server.requests - asked < 6  # the session's start-up probes at most: no item asked the server
    # the terminal's lines (bcas.run.finalize prints them under pytest)
    shown = "\n".join(latency_lines(results[4].summary) + latency_lines(replayed.summary))
    for level in (1, 4):
        rows = _rows(runs[level])
        assert rows and all(r["concurrency"] == level and r["latency_source"] == "live" for r in rows)
        for r in rows:
            assert r["latency_p50_lo"] <= r["latency_p50"] <= r["latency_p50_hi"] <= r["latency_p95"] + 1e-9
            assert r["mean_model_call_s"] >= SERVICE_S * 0.9  # every call held a slot for the service time
            assert r["mean_search_s"] is not None and r["items_per_min"] > 0
            shares = r["share_model"] + r["share_search"] + r["share_wait"] + r["share_harness"]
            assert shares == pytest.approx(1.0, abs=1e-9)
        header = next(csv.reader(io.StringIO((runs[level] / "summary.csv").read_text())))
        assert {"latency_p50", "latency_p95", "latency_p99", "items_per_min", "share_wait"} <= set(header)
        page = (runs[level] / "index.html").read_text()
        assert "Latency and throughput" in page and "Time per item by configuration" in page
        per_item = dict(page_figures(page))["latency-per-item"]["data"]["values"]
        assert len([v for v in per_item if v["mark"] == "item"]) == len(read_records(runs[level]))  # a tick each
    assert "concurrency 4, live" in shown and f"latency {GRID}/" in shown
    # the level is a run condition: the same answers, item by item
    keys = {
        lvl: {(r["config_id"], r["item_id"], r["model_fingerprint"], r["prompt_hash"]) for r in read_records(d)}
        for lvl, d in runs.items()
    }
    assert keys[1] == keys[4]
    # several items at once queue behind the executor's slots only at level 1
    assert _rows(runs[1])[0]["mean_wait_s"] > _rows(runs[4])[0]["mean_wait_s"]
    # bcas latency: the two folders as one table per configuration, one line per level
    assert bcas_main(["latency", str(runs[1]), str(runs[4]), "--out", str(tmp_path / "knee.html")]) == 0
    table = capsys.readouterr().out
    assert "items/min" in table and "p95 s" in table
    knee_page = (tmp_path / "knee.html").read_text()
    assert "Throughput against p95 latency" in knee_page
    [(name, knee)] = page_figures(knee_page)  # the knee, drawn offline by the bundle inlined in the page
    assert name == "latency-knee" and sorted(v["concurrency"] for v in knee["data"]["values"]) == [1, 4]
    assert knee_page.count(LOADER) == 1 and "<script src" not in knee_page
    # the replay: source cache, the recorded model time per call, no wait or throughput of its own
    for row in _rows(replay):
        assert row["latency_source"] == "cache" and row["mean_wait_s"] is None and row["items_per_min"] is None
        assert row["mean_model_call_s"] >= SERVICE_S * 0.9  # recorded, not the replay's microseconds
    assert "cache)" in shown
    if MLFLOW_IMPORTABLE:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("bcas-latency")
        children = [r for r in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
        assert children
        for run in children:
            for name in ("latency_p50", "latency_p95", "latency_p99", "items_per_min", "mean_wait_s", "share_model"):
                assert name in run.data.metrics, name
            assert run.data.tags["bcas.latency_source"] == "live"
