"""Every ``python -m bcas...`` command answers ``--help`` with its usage, never by running.

``python -m bcas.data --help`` once read ``--help`` as a dataset name.  Each command is run
as a user runs it (a fresh interpreter); ``bcas.rejudge`` is a library module whose command
lives in ``bcas.results``: run as a module it says so and exits 2 instead of doing nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMMANDS = (
    "bcas.data",
    "bcas.results",
    "bcas.report.compare",
    "bcas.gating",
    "bcas.gating.power",
    "bcas.harness.gate",  # the former names of the two above, kept working
    "bcas.harness.gate_power",
    "bcas.retrieval.evaluate",
    "bcas.llm.convert",
)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("module", COMMANDS)
def test_help_prints_the_usage_and_runs_nothing(module: str) -> None:
    done = _run(module, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m {module}"), done.stdout[:300]
    assert "error" not in done.stderr.lower(), done.stderr


def test_data_reads_names_not_options() -> None:
    done = _run("bcas.data", "--no-such-option")
    assert done.returncode == 2 and "unrecognized arguments: --no-such-option" in done.stderr, done.stderr
    assert "DatasetError" not in done.stderr and "no such file" not in done.stderr


def test_rejudge_as_a_module_points_to_its_command() -> None:
    done = _run("bcas.rejudge", "--help")
    assert done.returncode == 2
    assert "python -m bcas.results rejudge RUN_DIR --judge BACKEND:MODEL" in done.stderr, done.stderr
