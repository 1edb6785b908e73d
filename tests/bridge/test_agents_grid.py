"""The ``agents`` grid (bcas.grids.agents): bridged agents beside the loop and the methods at the same
budget, in the same paired comparisons, with cost per correct answer and latency in the methods table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import bcas
from bcas.config import BridgedAgent
from bcas.grids import get_grid, register_grid
from bcas.grids.agents import SEARCH_R1, agents_grid
from bcas.grids.baselines import AGENT_VS_METHOD, BASELINE_MODES
from bcas.llm import register_backend
from bcas.testing.project import codename_items, write_jsonl
from tests.bridge.test_agent_kind import docs_agent


def test_the_agents_grid_puts_each_bridged_agent_beside_the_loop_of_its_mode_at_the_same_budget() -> None:
    grid = get_grid("agents")
    loops = {e.label: e for e in grid.entries if e.kind == "bcas"}
    bridged = [e for e in grid.entries if e.kind == "agent"]
    assert [e.label for e in bridged] == ["agent/search_r1/bm25", "agent/search_r1/hs+r"]
    for entry in bridged:
        ((reference, family),) = entry.compare
        assert family == AGENT_VS_METHOD and reference in loops
        assert entry.config.bridged == SEARCH_R1
        assert entry.config.budget == loops[reference].config.budget
        assert entry.config.retrieval == loops[reference].config.retrieval
    assert {e.kind for e in grid.entries} >= {"bcas", "agent", "retrieve_read", "self_ask"}


def test_a_bridged_agent_has_its_row_in_the_methods_table_with_cost_per_correct_and_latency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    register_backend("instant", "bcas.testing.instant:create")
    data = write_jsonl(tmp_path / "two.jsonl", codename_items(2))
    agent = tmp_path / "my_agent.py"
    agent.write_text(docs_agent(), encoding="utf-8")
    mine = BridgedAgent(command=(sys.executable, str(agent)), timeout_s=120, name="mine")
    register_grid(agents_grid(agents=(("mine", mine),), name="agents_small", methods=("retrieve_read",),
                              datasets=(str(data),), modes=BASELINE_MODES[:1]))  # fmt: skip
    results = bcas.evaluate(grids="agents_small", models="instant", out=tmp_path / "run")
    assert results.passed, results.failures
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    rows = {r["label"]: r for r in summary["methods"]["rows"]}
    assert set(rows) == {"retrieve_read/bm25", "agent/mine/bm25"}
    row = rows["agent/mine/bm25"]
    assert (row["method"], row["agent"], row["n_paired"]) == ("agent", "bcas/bm25", 2)
    assert row["accuracy"] == row["agent_accuracy"] == 1.0 and row["diff"] == 0.0  # both answer alpha
    records = [r for r in results.records if r["label"] == "agent/mine/bm25"]
    tokens = sum(int(r["tokens_in"]) + int(r["tokens_out"]) for r in records)
    assert row["tokens_per_correct"] == pytest.approx(tokens / 2)
    assert row["latency_p50_s"] is not None and row["latency_p50_s"] > 0
    html = (tmp_path / "run" / "index.html").read_text(encoding="utf-8")
    assert "agent/mine/bm25" in html and "p50 latency s/item" in html
