"""Proof: every registered grid, at the extremes of every axis it sweeps, runs on real models.

For each grid in :data:`bcas.grids.GRIDS` (read when the tests are collected, so a grid
registered later is covered too) the cases of :func:`bcas.grids.extreme_cases` -- for the
BCAS entries the smallest and largest search budget (unlimited) and token budget,
planning and reflection on and off, every retrieval mode; for the MADARA entries every
treatment; the RSC probe -- run with one item each on one dataset per entry (HotpotQA
where the grid has it), as ``python -m pytest benchmarks --bcas-grid G --bcas-limit 1 -m
DATASETS -k CASES`` in a subprocess:

* on the embedded default (SmolLM2-135M, llama.cpp in its engine process);
* on a real llama.cpp server on loopback, started by the own-server recipe of docs/models.md
  line with the shipped GGUF, for the grids that recipe runs.

Each run must exit 0 and write a record (the RSC probe: its profile) for every chosen
case, none of them an error, every BCAS record within its budgets (BCAS §3.3: searches
within ``max_searches``, completion tokens within ``max_total_tokens`` +
``forced_answer_tokens``).  Stops for the context window (``context_window``) are
allowed and counted.  A table of grid / dataset / configuration / stop reason /
searches / tokens / seconds is printed.

Two deliberate reductions, so the whole stays inside CI's slow stage:

* ``--bcas-calibration-n 2``: the RSC probe and the routed MADARA pipeline probe 2
  calibration items instead of MADARA's 100 (hours on SmolLM2 on a CPU);
* the grids share one run folder, so a configuration two grids hold alike (the BCAS
  grids' ``hs/sinf/t16k``, ``.../plan``, ``.../plan/rf`` on HotpotQA) is answered once
  and found recorded by the next grid (its seconds are then the resume's).

Every call reaches the model (``--bcas-no-cache``); retrieval indexes come from
``BCAS_CACHE_DIR`` as in any run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.extremes import Row, collect, problems, run_grid, select, table
from support.recipes import recipe_grids, recipe_server

from bcas.grids import GRIDS

CALIBRATION_N = 2
GRID_TIMEOUT_S = 5400  # one grid's subprocess (on a loaded 2-core machine the MADARA grid takes longest)
QUICK = ["--bcas-calibration-n", str(CALIBRATION_N), "--bcas-no-cache"]


@pytest.fixture(scope="module")
def timings(request: pytest.FixtureRequest) -> Iterator[dict[str, float]]:
    """Wall seconds per grid run; the total is written at the end of the module."""
    seconds: dict[str, float] = {}
    start = time.monotonic()
    yield seconds
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and seconds:
        parts = ", ".join(f"{name} {s:.0f} s" for name, s in seconds.items())
        reporter.write_line(f"every grid at its extremes: {time.monotonic() - start:.0f} s in all ({parts})")


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("every-grid") / "run"


def _check(
    grid: str, run_dir: Path, extra: list[str], capsys: pytest.CaptureFixture[str], timings: dict[str, float], key: str
) -> list[Row]:
    selection = select(grid)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc, wall, seconds = run_grid(selection, run_dir, [*QUICK, *extra], env, GRID_TIMEOUT_S)
    timings[key] = wall
    rows = collect(selection, run_dir, seconds)
    windows = sum(r.get("stop_reason") == "context_window" for row in rows for r in row.records)
    with capsys.disabled():
        print(f"\n{key}: {len(rows)} cases in {wall:.0f} s, {windows} context_window stop(s)\n{table(rows)}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    found = problems(rows)
    assert not found, "\n".join(found) + "\n" + out[-3000:]
    return rows


@pytest.mark.slow
@pytest.mark.timeout(GRID_TIMEOUT_S + 300)
@pytest.mark.parametrize("grid", sorted(GRIDS.names()))
def test_every_grid_at_its_extremes_on_the_embedded_model(
    grid: str, shared_run: Path, capsys: pytest.CaptureFixture[str], timings: dict[str, float]
) -> None:
    _check(grid, shared_run, [], capsys, timings, f"embedded {grid}")


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.timeout(GRID_TIMEOUT_S + 300)
def test_the_recipe_grids_at_their_extremes_on_a_llama_cpp_server(
    smollm2_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], timings: dict[str, float]
) -> None:
    with recipe_server(smollm2_gguf) as server:
        served = ["--bcas-backend", "openai", "--bcas-base-url", server.base_url, "--bcas-model", "smollm2-135m"]
        for grid in recipe_grids():
            rows = _check(grid, tmp_path / "run", served, capsys, timings, f"server {grid}")
            assert all(r["model"] == "smollm2-135m" for row in rows for r in row.records)
