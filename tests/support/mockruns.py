"""Small real runs on the ``mock`` backend, in a folder of their own, for report, terminal and cost tests.

The ``pages`` grid runs the BCAS loop over real BM25 on the HotpotQA sample (max
searches 1, 2, 3: an ordered budget axis; 3 + planning: a categorical configuration)
and MADARA NF, PDE and SDA on the FEVER sample (k=1: its items hold one document each).  The ``coin`` double
(:mod:`bcas.testing.coin`) is right on some requests only, so its outcomes flip between
configurations.  The price sheet prices the
mock models (the installed sheet prices them at 0), each differently.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bcas.testing.project import backends, grid_project

REPO = Path(__file__).resolve().parents[2]

GRIDS = """
from bcas.config import AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.grids import Grid, GridEntry, register_grid


def _bcas(searches, plan=False, reference=False):
    config = RunConfig(budget=Budget(max_searches=searches, max_total_tokens=2000),
                       retrieval=RetrievalConfig(mode="bm25"), agent=AgentConfig(planning=plan))
    return GridEntry("bcas", config, reference=reference, datasets=("hotpotqa",))


def _madara(method, reference=False):
    config = RunConfig(retrieval=RetrievalConfig(mode="bm25"),
                       assess=AssessConfig(method=method, doc_source="item", max_tokens=48, k=1))
    return GridEntry("madara", config, reference=reference, datasets=("fever",))


register_grid(Grid("pages", (_bcas(1, reference=True), _bcas(2), _bcas(3), _bcas(3, plan=True),
                             _madara("nf", reference=True), _madara("pde"), _madara("sda")),
                   datasets=("hotpotqa", "fever"), limit=12))
register_grid(Grid("brief", (_bcas(1, reference=True), _bcas(2)), datasets=("hotpotqa",), limit=6))
"""
CONFTEST = backends({"paced": "bcas.testing.paced:create", "coin": "bcas.testing.coin:create"}) + GRIDS

PRICES = """
default = "test"
[sheets.test]
description = "mock models at made-up prices, for cost tests"
search_per_call = 0.0
[sheets.test.models."mock-gold"]
input_per_mtok = 10.0
output_per_mtok = 40.0
[sheets.test.models."mock-random"]
input_per_mtok = 2.0
output_per_mtok = 8.0
[sheets.test.models."mock-verbose"]
input_per_mtok = 5.0
output_per_mtok = 20.0
[sheets.test.models."coin"]
input_per_mtok = 3.0
output_per_mtok = 12.0
[sheets.test.models."paced"]
input_per_mtok = 1.0
output_per_mtok = 4.0
"""


def make_project(folder: Path) -> Path:
    """A folder with the grids' test file, a conftest registering the test grids, and ``prices.toml``."""
    return grid_project(folder, CONFTEST, prices=PRICES)


def run_pytest(
    folder: Path, *args: str, timeout: float = 300.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest`` in ``folder`` (a fresh process: no state shared with the calling test run)."""
    env = {**os.environ, "BCAS_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(REPO), **(env or {})}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "test_grids.py", "-p", "no:cacheprovider", "--rootdir", str(folder), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
