"""Helpers of the deploy tests (tests/deploy/): the environment of a launched run and its
answers without timing, to compare a launcher's merged run with the unsharded one."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import fields
from pathlib import Path

from bcas.metrics.latency import LatencyColumns

ROOT = Path(__file__).resolve().parents[2]
SUITE = ["--bcas-grid", "smoke", "--bcas-limit", "2"]  # the smoke grid, 2 items per dataset
VOLATILE = {"run_id", "created_at", "latency_s", "timing"}  # when and where an answer was made, not what it is
# A summary row's latency columns (bcas.metrics.latency): how fast this run went, not what it found.
LATENCY_COLUMNS = frozenset(f.name for f in fields(LatencyColumns))


def launch_env(tmp_path: Path) -> dict[str, str]:
    """This interpreter's environment for a launched run: this checkout's bcas, its own cache,
    one llama.cpp thread, no shard variables or Ray address inherited."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "BCAS_SHARD_INDEX", "BCAS_SHARD_COUNT")}
    env.update(BCAS_CACHE_DIR=str(tmp_path / "cache"), BCAS_THREADS="1", PYTHONPATH=str(ROOT))
    return env


def answers(run_dir: Path) -> dict[tuple, dict]:
    """The run's records by answer identity, without their timing fields (nor their steps'); a duplicate fails."""
    out: dict[tuple, dict] = {}
    for line in (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            key = (rec["model_fingerprint"], rec["config_id"], rec["dataset_hash"], rec["item_id"], rec["epoch"])
            assert key not in out, f"answer recorded twice: {key}"
            out[key] = {k: v for k, v in rec.items() if k not in VOLATILE}
            if isinstance(out[key].get("steps"), list):  # each step's latency too
                out[key]["steps"] = [{k: v for k, v in step.items() if k not in VOLATILE} for step in rec["steps"]]
    return out


def lasting_summary(run_dir: Path) -> dict:
    """The run's summary.json without its rows' latency columns (run conditions, like VOLATILE)."""
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    summary["rows"] = [{k: v for k, v in row.items() if k not in LATENCY_COLUMNS} for row in summary["rows"]]
    return summary


def lasting_summary_csv(run_dir: Path) -> list[dict[str, str]]:
    """The run's summary.csv rows without their latency columns."""
    with open(run_dir / "summary.csv", encoding="utf-8", newline="") as handle:
        return [{k: v for k, v in row.items() if k not in LATENCY_COLUMNS} for row in csv.DictReader(handle)]
