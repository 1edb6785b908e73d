"""The report of three real runs read at a laptop's size (1,280 × 900) in headless Chromium.

The runs, each a real ``pytest`` run of the harness on the ``mock`` backend, priced by a
test sheet (tests/support/mockruns.py), two items per dataset and a subset of each grid:
the ``baselines`` grid (the agent and the methods beside it on HotpotQA, BM25), the
``madara`` grid (NF and SDA on FEVER) and three models (``mock:gold``, ``mock:random``,
``mock:verbose``) on part of the ``pages`` grid (BCAS at 1 and 2 searches, MADARA NF).

On each page: the page never scrolls sideways and no table scrolls inside its box (the
decision columns are shown, the rest behind "all columns"); "all columns" shows every
column of the summary; no name breaks across lines; every figure holds an ``svg`` or a
``canvas``; no script error; no request leaves the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.chromium import is_local, opened
from tests.support.mockruns import REPO, make_project
from tests.support.skips import skip_if_no_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# Two report runs and a browser, about a minute: CI's required proof stage runs it (--runproofs).
pytestmark = [pytest.mark.browser, pytest.mark.proof_stage, skip_if_no_chromium]

WIDTH, HEIGHT = 1280, 900
RUNS = {
    "baselines": ["--bcas-grid", "baselines", "--bcas-model", "mock:gold", "-k", "hotpotqa and (bm25 or closed_book)"],
    "madara": ["--bcas-grid", "madara", "--bcas-model", "mock:gold", "-k", "fever and (nf or sda)"],
    "three-models": ["--bcas-grid", "pages", "--bcas-model", "mock:gold", "--bcas-model", "mock:random"]
    + ["--bcas-model", "mock:verbose", "-k", "s1 or s2 or nf"],
}

# Figures: 55a's convention (figure.bcas-figure holding div.vega-chart), and the figure
# boxes the report drew before it (div.fig, div.methods-figure); an empty one is a sentence.
LAYOUT = r"""
(() => {
  const figures = Array.from(document.querySelectorAll('figure.bcas-figure, figure, div.fig'))
    .filter((f) => !f.querySelector('p.figure-empty'))
    .map((f) => ({name: f.dataset.figure || f.closest('[id]')?.id || f.className,
                  drawn: !!f.querySelector('svg, canvas')}));
  const wide = Array.from(document.querySelectorAll('.scroll'))
    .filter((box) => box.offsetParent !== null && box.scrollWidth > box.clientWidth + 1)
    .map((box) => (box.querySelector('table') || {}).id || box.className);
  const lines = (el) => {
    const range = document.createRange(); range.selectNodeContents(el);
    return new Set(Array.from(range.getClientRects()).filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
  };
  const names = Array.from(document.querySelectorAll('#summary tbody td:nth-child(-n+4), .name'))
    .filter((c) => c.offsetParent !== null && lines(c) > 1).map((c) => c.textContent);
  const summary = document.getElementById('summary');
  const shown = () => Array.from(summary.tHead.rows[0].cells).filter((c) => c.offsetParent !== null).map((c) => c.textContent);
  const before = shown();
  const toggle = document.getElementById('summary-all');
  toggle.click();
  const all = shown();
  toggle.click();
  return {page: document.documentElement.scrollWidth, figures: figures, wide: wide, broken: names,
          before: before, all: all, total: summary.tHead.rows[0].cells.length,
          ready: document.body.dataset.ready};
})()
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three runs, started together (each its own process, as tests/support/mockruns.run_pytest starts one)."""
    project = make_project(tmp_path_factory.mktemp("laptop-runs"))
    env = {**os.environ, "BCAS_CACHE_DIR": str(project / "cache"), "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    procs = {}
    for name, args in RUNS.items():
        command = [sys.executable, "-m", "pytest", "test_grids.py", "-p", "no:cacheprovider", "-q"]
        command += ["--rootdir", str(project), "--bcas-limit", "2", "--bcas-prices", "prices.toml"]
        command += ["--bcas-report", str(project / name), *args]
        procs[name] = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}: {out.decode(errors='replace')[-3000:]}"
    return {name: project / name / "index.html" for name in RUNS}


@pytest.mark.parametrize("run", list(RUNS))
def test_the_report_fits_a_laptop_draws_every_figure_and_stays_on_the_machine(
    run: str, reports: dict[str, Path], browser: Browser
) -> None:
    with opened(browser, reports[run], width=WIDTH, height=HEIGHT) as page:
        facts = page.evaluate(LAYOUT)
        assert page.errors == [], page.errors
        assert page.foreign == [] and all(is_local(url) for url in page.requests), page.requests
    assert facts["ready"] == "1"
    assert facts["page"] <= WIDTH, f"the page is {facts['page']} px wide at {WIDTH} px"
    assert facts["wide"] == [], f"tables that scroll sideways at {WIDTH} px: {facts['wide']}"
    assert facts["broken"] == [], f"names broken across lines: {facts['broken'][:5]}"
    assert facts["figures"] and all(f["drawn"] for f in facts["figures"]), facts["figures"]
    # The decision columns first; every column one click away.
    assert facts["before"][:11] == [
        "grid", "model", "dataset", "config", "n", "acc %", "95% CI", "diff vs ref pts [95%]", "$ / correct",
        "tokens / correct", "p95 s",
    ]  # fmt: skip
    assert len(facts["before"]) == 11 < facts["total"] == len(facts["all"])
