"""The baselines grid on the embedded SmolLM2-135M (hotpotqa): every method and the loop finish with
no error record and within their budgets (slow: minutes to an hour on CPU).

Two halves.  BM25 (and ``closed_book``) on 3 items, the issue's run.  Hybrid + re-ranking on 1
item with ``--bcas-rerank-candidates 10``: on CPU the default reranker is the ``llm`` reranker,
one call of the evaluated model per candidate, and BCAS §3.5's pool of 100 makes each search of
that mode 100 model calls (hours on two cores for the grid); 10 keep it to minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bcas.grids import get_grid
from bcas.testing.project import read_records
from tests.support.mockruns import REPO


def run_half(run_dir: Path, select: str, items: int, timeout: float, *more: str) -> tuple[list[dict[str, Any]], str]:
    env = {**os.environ, "BCAS_THREADS": os.environ.get("BCAS_THREADS", "1"), "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-grid", "baselines",
         "--bcas-model", "embedded", "--bcas-datasets", "hotpotqa", "--bcas-limit", str(items), "-k", select,
         "--bcas-report", str(run_dir), *more],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return read_records(run_dir), done.stdout


def check(records: list[dict[str, Any]], labels: set[str], items: int) -> None:
    assert {r["label"] for r in records} == labels and len(records) == items * len(labels)
    assert [r for r in records if r["stop_reason"] == "error"] == []
    for r in records:
        budget = r["config"]["budget"]
        assert int(r["searches_used"]) <= budget["max_searches"]
        if r["method"] != "bcas":
            assert int(r["tokens_out"]) <= budget["max_total_tokens"]
    assert all(r["searches_used"] == 0 for r in records if r["method"] == "closed_book")
    assert all(r["searches_used"] == 1 for r in records if r["method"] == "retrieve_read")


@pytest.mark.slow
def test_the_bm25_half_on_the_embedded_model_finishes_with_no_error_record(tmp_path: Path) -> None:
    records, out = run_half(tmp_path / "run", "bm25 or closed_book", 3, 3300)
    labels = {e.label for e in get_grid("baselines").entries if "hs+r" not in e.label}
    check(records, labels, 3)
    assert "agent vs methods baselines" in out and "extra cost per extra correct answer" in out


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_reranked_half_on_the_embedded_model_finishes_with_no_error_record(tmp_path: Path) -> None:
    records, _ = run_half(tmp_path / "run", "hs+r", 1, 3500, "--bcas-rerank-candidates", "10")
    # the label says the run departs from the grid's 100 candidates (bcas.grids.table.base_label strips it)
    check(records, {f"{e.label}/rc10" for e in get_grid("baselines").entries if "hs+r" in e.label}, 1)
    assert all(r["config"]["retrieval"]["candidates"] == 10 for r in records)
    # Every search re-ranked its pool on the model under test: one rerank step per search, 10 calls each.
    for r in records:
        reranks = [s for s in r["steps"] if s["kind"] == "rerank"]
        assert len(reranks) == int(r["searches_used"]), r["label"]
        assert all(s["calls"] == 10 for s in reranks), r["label"]
