"""benchmarks/perf/bench_first_command.py: what it prints is what its clone ran and recorded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "perf" / "bench_first_command.py"


@pytest.mark.proof_stage  # a clone and a grid run, most of a minute: CI's required proof stage
def test_grid_figures_come_from_the_clones_records(tmp_path):
    # The timing harness without the install (an install is minutes of compiling): the dry-run
    # grid of one HotpotQA item per case in a clone of HEAD, from an empty cache.
    # README command 2 on one small test module of the clone stands in for the whole suite.
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--python", sys.executable, "--skip-install", "--model", "mock:gold",
         "--pytest-args", "-m hotpotqa --bcas-limit 1", "--keep", str(tmp_path),
         "--tests-args", "tests/foundations/test_registry.py -p no:xdist"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    assert f"at {head.stdout.strip()}" in out.stdout  # a clone of the committed HEAD
    assert not (tmp_path / "cache-install").exists()  # --skip-install ran no install

    counted = re.search(r"(\d+) answers, ([\d,]+) prompt and ([\d,]+) completion tokens", out.stdout)
    assert counted, out.stdout
    records = [
        json.loads(line)
        for path in (tmp_path / "reports-grid-n0").rglob("records*.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert int(counted.group(1)) == len(records) > 0
    assert int(counted.group(2).replace(",", "")) == sum(r["tokens_in"] for r in records)
    assert int(counted.group(3).replace(",", "")) == sum(r["tokens_out"] for r in records)

    figures = [json.loads(line[len("FIGURE ") :]) for line in out.stdout.splitlines() if line.startswith("FIGURE ")]
    grid = next(f for f in figures if f["name"] == "grid cold (-n 0)")
    wall = float(re.search(r"grid-n0\s+([\d.]+) s\s+rc 0", out.stdout).group(1))
    assert grid["value"] == round(wall, 1) and grid["met"] == (wall <= 180)
    # the grid ran on an empty cache of its own: its indexes were built there
    assert any((tmp_path / "cache-grid-n0").iterdir())
    # command 2 ran in the clone, after command 1: its wall time is the figure, its outcome line is the log's
    tests = next(f for f in figures if f["name"] == "README command 2 (python3 -m pytest tests)")
    wall = float(re.search(r"tests\s+([\d.]+) s\s+rc 0", out.stdout).group(1))
    assert tests["value"] == round(wall, 1) and tests["target"] == "<= 480"
    log = (tmp_path / "tests.log").read_text()
    passed = re.search(r"(\d+) passed", log)
    assert passed and f"{passed.group(1)} passed" in out.stdout and str(tmp_path / "repo") in log


def test_skip_install_needs_an_environment():
    out = subprocess.run([sys.executable, str(SCRIPT), "--skip-install"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--skip-install needs --python" in out.stderr


def test_the_install_step_times_are_read_back_as_the_install_writes_them(tmp_path):
    """.ci/install's step() and the script's reader agree (the step function alone, no pip run)."""
    import importlib.util

    times = tmp_path / "times.tsv"
    script = (
        'eval "$(sed -n \'/^step() {/,/^}/p\' .ci/install)"; step "torch (CPU wheel)" true; step "sleepy one" sleep 1'
    )
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env={"PATH": "/usr/bin:/bin", "BCAS_INSTALL_TIMES": str(times)},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "bcas install: torch (CPU wheel) 0 s" in done.stderr
    spec = importlib.util.spec_from_file_location("bench_first_command", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    steps = module.install_steps(times)
    assert [name for name, _ in steps] == ["torch (CPU wheel)", "sleepy one"]
    assert steps[0][1] == 0.0 and steps[1][1] >= 1.0
    # a failing step stops the install
    failed = subprocess.run(["bash", "-c", "set -e; " + script.replace("true", "false")], cwd=REPO,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert failed.returncode != 0 and "sleepy one" not in failed.stderr


def test_the_install_puts_every_dependency_and_extra_beside_the_llama_build(tmp_path):
    """While llama.cpp compiles in the background, .ci/install installs what bcas and its extras
    require but llama-cpp-python, read from pyproject.toml by the script it carries: every
    requirement of the extras it names, each once, llama-cpp-python last with bcas itself."""
    import tomllib

    text = (REPO / ".ci" / "install").read_text(encoding="utf-8")
    reader = text.split("<<'PYEOF'\n", 1)[1].split("\nPYEOF\n", 1)[0]
    extras = re.search(r'^EXTRAS="([^"]+)"$', text, re.M)
    assert extras is not None
    (tmp_path / "read.py").write_text(reader)
    done = subprocess.run([sys.executable, str(tmp_path / "read.py"), extras.group(1)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = done.stdout.splitlines()
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = list(project["dependencies"]) + [
        r for e in extras.group(1).split(",") for r in project["optional-dependencies"][e]
    ]
    assert set(extras.group(1).split(",")) == {"test", "server", "parquet", "docs"}
    assert sorted(listed) == sorted({r for r in wanted if not r.startswith("llama-cpp-python")})
    assert len(listed) == len(set(listed)) and any(r.startswith("llama-cpp-python") for r in wanted)
    assert '--find-links "$WHEELS/dist" "$LLAMA" -e ".[$EXTRAS]"' in text  # the built wheel goes in with bcas
