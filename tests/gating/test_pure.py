"""The gate is a package of its own, below the run engine: importing it, and running its
commands, loads no pytest (issue 24, deliver 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _python(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_importing_the_gate_loads_no_pytest() -> None:
    done = _python(
        "-c",
        "import sys, bcas.gating, bcas.gating.case, bcas.gating.power\n"
        "assert 'pytest' not in sys.modules, 'pytest imported'\n"
        "assert not [m for m in sys.modules if m.startswith(('bcas.harness', 'bcas.run', 'bcas.api'))]\n"
        "assert issubclass(bcas.gating.GateError, ValueError) and issubclass(bcas.gating.BaselineError, bcas.gating.GateError)\n",
    )
    assert done.returncode == 0, done.stderr


def test_gate_write_writes_a_baseline_and_fails_in_one_line(tmp_path: Path) -> None:
    """``bcas gate write`` writes the baseline of a records file; a missing input is one error line."""
    records = tmp_path / "records.jsonl"
    rows = [
        {
            "model": "m",
            "dataset": "ds",
            "config_id": "c",
            "dataset_hash": "h",
            "item_id": f"q{i}",
            "correct_em": i % 2 == 0,
        }
        for i in range(4)
    ]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    new = _python("-m", "bcas", "gate", "write", str(records), str(tmp_path / "new.json"))
    assert new.returncode == 0, new.stderr
    assert "wrote" in new.stdout and "bcas gate power" in new.stdout
    data = json.loads((tmp_path / "new.json").read_text(encoding="utf-8"))
    (case,) = data["cases"].values()
    assert case["items"] == {"q0": True, "q1": False, "q2": True, "q3": False} and case["accuracy"] == 0.5
    missing = _python("-m", "bcas", "gate", "write", str(tmp_path / "nothing"), str(tmp_path / "x.json"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and "Traceback" not in missing.stderr
