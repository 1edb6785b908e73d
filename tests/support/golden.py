"""Records of the smoke grid with the fields that depend on the run (not on the answers)
left out, for the identical-records check (tests/test_golden_records.py).

The embedded model's records depend on the host as well: llama.cpp picks its CPU kernels
by instruction-set extensions (``bcas.run.manifest.cpu_features``), and a different
summation order can flip a greedy token.  So the embedded golden comes in one file per
host kind, ``smoke_embedded_1.<host key>.jsonl`` (the key: a hash of the CPU features;
``hosts.json`` says which CPU and features wrote each), besides ``smoke_embedded_1.jsonl``
(written before hosts were recorded, on the host CI runs on).  What the host cannot change
(:data:`IDENTITY_FIELDS`: which answers exist and their identities) is the same in all.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from bcas.run.manifest import cpu_features, cpu_name

RUN_FIELDS = ("latency_s", "created_at", "run_id", "timing")
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


# Fields no host can change: which answers exist and their identities (measured: equal between
# the golden hosts).  Everything else may follow the kernels.
IDENTITY_FIELDS = (
    "answers", "config", "config_id", "dataset", "dataset_hash", "epoch", "item_id", "label", "method", "model",
    "model_fingerprint", "prompt_hash", "question", "schema_version", "seed",
)  # fmt: skip


def host_key() -> str:
    """This host's kind for the embedded golden: a hash of its CPU features."""
    return "simd-" + hashlib.sha256(" ".join(cpu_features()).encode()).hexdigest()[:8]


def embedded_goldens(golden_dir: Path, stem: str) -> list[Path]:
    """Every host's golden of ``stem`` (the one written before hosts were recorded first)."""
    return sorted(golden_dir.glob(f"{stem}.*jsonl"), key=lambda p: (p.name != f"{stem}.jsonl", p.name))


def record_host(golden_dir: Path, name: str) -> None:
    """Say in ``hosts.json`` which host wrote the golden file ``name``."""
    path = golden_dir / "hosts.json"
    hosts = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    hosts[name] = {
        "cpu": cpu_name(),
        "cpu_features": cpu_features(),
        "llama-cpp-python": metadata.version("llama-cpp-python"),
    }
    path.write_text(json.dumps(hosts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
