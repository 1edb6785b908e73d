"""Records of the smoke grid with the fields that depend on the run (not on the answers)
left out, for the identical-records check (tests/test_golden_records.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN_FIELDS = ("latency_s", "created_at", "run_id")
RUN_EXTRA = ("worker", "case_id")
STEP_TIMING = ("latency_s", "cached")


def normalised(record: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if k not in RUN_FIELDS}
    out["extra"] = {k: v for k, v in (record.get("extra") or {}).items() if k not in RUN_EXTRA}
    out["steps"] = [{k: v for k, v in s.items() if k not in STEP_TIMING} for s in record.get("steps") or []]
    return out


def key(record: dict[str, Any]) -> str:
    return "|".join(str(record.get(k)) for k in ("model", "config_id", "dataset_hash", "item_id", "epoch"))


def read_normalised(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = normalised(json.loads(line))
            out[key(rec)] = rec
    return out


def write_golden(records_file: Path, golden: Path) -> int:
    rows = read_normalised(records_file)
    golden.write_text("".join(json.dumps(rows[k], sort_keys=True) + "\n" for k in sorted(rows)), encoding="utf-8")
    return len(rows)
