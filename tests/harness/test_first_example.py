"""The README's first example on the embedded model searches and answers (issue 47, item 8).

The command under "Evaluate a model" is read from the README and run as written on the
CPU default (SmolLM2-135M-Instruct in llama.cpp): every item it records made at least one
search and ended with an answer, not at the context window.  Minutes on a CPU: slow stage.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARK = "# the embedded CPU default"


def first_example() -> list[str]:
    """The README's first command after ``MARK`` (the first example of "Evaluate a model")."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARK))
    return shlex.split(lines[start + 1])


def test_the_first_example_runs_on_the_cpu_default_as_written() -> None:
    args = first_example()
    assert args[:4] == ["python3", "-m", "pytest", "benchmarks"]
    assert "--bcas-model" not in args and "--bcas-backend" not in args  # the default model


@pytest.mark.slow  # SmolLM2 on a CPU: a few minutes
def test_the_first_example_searches_and_answers_on_the_embedded_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BCAS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, *first_example()[1:], "-p", "no:cacheprovider", "--bcas-report", str(run)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    assert records
    for record in records:
        assert int(record["searches_used"]) >= 1, record
        assert str(record["prediction"] or "").strip(), record
        assert record.get("stop_reason") != "context_window", record
