"""The ``agent`` run kind: a user's agent (a command or a Python callable) answers through the bridge in a
grid, beside the BCAS loop; its code is part of the answer identity; its failures are error records."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.config import BridgedAgent, Budget, RetrievalConfig, RunConfig
from bcas.grids import Grid, GridEntry, register_grid
from bcas.llm import register_backend
from bcas.testing.project import codename_items, write_jsonl
from tests.support.skips import skip_if_no_mcp

DOCS = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
BUDGET = Budget(max_searches=2, max_total_tokens=400)
RETRIEVAL = RetrievalConfig(mode="bm25", k=2)


def docs_agent() -> str:
    """The command-line agent exactly as docs/extending.md shows it."""
    text = DOCS.read_text(encoding="utf-8")
    after = text.split("<!-- bridged-agent-example -->", 1)[1]
    match = re.search(r"```python\n(.*?)```", after, re.DOTALL)
    assert match is not None, "docs/extending.md lost its bridged agent example"
    return match.group(1)


@pytest.fixture
def items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    register_backend("instant", "bcas.testing.instant:create")
    return write_jsonl(tmp_path / "two.jsonl", codename_items(2))


def grid(name: str, data: Path, *agents: tuple[str, BridgedAgent], budget: Budget = BUDGET) -> str:
    entries = [GridEntry("bcas", RunConfig(budget=budget, retrieval=RETRIEVAL), reference=True, name="bcas")]
    entries += [GridEntry("agent", RunConfig(budget=budget, retrieval=RETRIEVAL, bridged=a), name=n) for n, a in agents]
    register_grid(Grid(name, tuple(entries), datasets=(str(data),)))
    return name


def by_label(records: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return sorted((r for r in records if r["label"] == label), key=lambda r: r["item_id"])


def test_the_documented_command_agent_runs_in_a_grid_beside_the_loop(items: Path, tmp_path: Path) -> None:
    agent = tmp_path / "my_agent.py"
    agent.write_text(docs_agent(), encoding="utf-8")
    mine = BridgedAgent(command=(sys.executable, str(agent)), timeout_s=120, name="mine")
    results = bcas.evaluate(
        grids=grid("docs_agent", items, ("agent/mine", mine)), models="instant", out=tmp_path / "run"
    )
    records = by_label(results.records, "agent/mine")
    assert len(records) == 2 and len(by_label(results.records, "bcas")) == 2
    for r in records:
        assert r["error"] is None and r["stop_reason"] == "answered" and r["correct_em"]  # instant answers alpha
        assert [s["kind"] for s in r["steps"]] == ["search", "generate"]
        assert r["steps"][0]["query"] == r["question"] and len(r["steps"][0]["docs"]) == RETRIEVAL.k
        assert r["searches_used"] == 1 and r["llm_calls"] == 1
        assert r["tokens_out"] == sum(s["tokens_out"] for s in r["steps"]) > 0
        # timed as the loop's and the methods' are (the instant double reports no call times; the
        # calls' metering is tested on the real backend in tests/bridge/test_bridge.py)
        assert r["timing"]["searches"] == r["searches_used"] and r["timing"]["search_s"] > 0
    assert results.passed, results.failures


def test_changing_the_agents_code_answers_again_and_an_unchanged_rerun_resumes(items: Path, tmp_path: Path) -> None:
    agent = tmp_path / "my_agent.py"
    agent.write_text(docs_agent(), encoding="utf-8")
    mine = BridgedAgent(command=(sys.executable, str(agent)), timeout_s=120, name="mine")
    name, run = grid("resume_agent", items, ("agent/mine", mine)), tmp_path / "run"
    first = bcas.evaluate(grids=name, models="instant", out=run)
    assert first.written == 4
    again = bcas.evaluate(grids=name, models="instant", out=run)
    assert again.written == 0  # unchanged: every answer resumed
    agent.write_text(docs_agent() + "# a change to the agent's code\n", encoding="utf-8")
    changed = bcas.evaluate(grids=name, models="instant", out=run)
    assert changed.written == 2  # the agent's two answers, not the loop's
    ids = {r["config_id"] for r in changed.records if r["label"] == "agent/mine"}
    assert len(ids) == 2  # the old code's answers and the new code's, apart


AGENTS_MODULE = '''
import time
import httpx


def crashes(question, endpoints):
    raise RuntimeError("the agent fell over")


def says_nothing(question, endpoints):
    return None


def greedy(question, endpoints):
    """Searches ten times and calls the model until the bridge refuses."""
    with httpx.Client(timeout=30) as client:
        for i in range(10):
            call = {"id": str(i), "function": {"name": "search", "arguments": {"query": f"{question} {i}"}}}
            client.post(endpoints.tool_call_url, json=call).raise_for_status()
        for _ in range(50):
            reply = client.post(endpoints.openai_base_url + "/chat/completions",
                                json={"model": endpoints.model, "messages": [{"role": "user", "content": question}]})
            if reply.status_code != 200:
                return reply.json()["error"]["code"]
    return "never refused"


def mcp_searcher(question, endpoints):
    """Searches once through the MCP server (the official client session), then answers."""
    import asyncio

    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def search():
        async with streamable_http_client(endpoints.mcp_url) as streams, ClientSession(*streams[:2]) as session:
            await session.initialize()
            return await session.call_tool("search", {"query": question})

    asyncio.run(search())
    return "alpha"
'''


@pytest.fixture
def agents_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "bridge_agents_57.py").write_text(textwrap.dedent(AGENTS_MODULE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "bridge_agents_57"


def test_a_crash_a_timeout_and_no_answer_are_error_records_with_their_reason(
    items: Path, tmp_path: Path, agents_module: str
) -> None:
    failing = (
        ("crash", BridgedAgent(callable=f"{agents_module}:crashes")),
        ("silent", BridgedAgent(callable=f"{agents_module}:says_nothing")),
        ("exit", BridgedAgent(command=(sys.executable, "-c", "import sys; sys.exit('no model here')"))),
        ("mute", BridgedAgent(command=(sys.executable, "-c", "pass"))),
        ("slow", BridgedAgent(command=(sys.executable, "-c", "import time; time.sleep(60)"), timeout_s=1)),
    )
    results = bcas.evaluate(grids=grid("failing_agents", items, *failing), models="instant", out=tmp_path / "run")
    expected = {
        "crash": "crash: RuntimeError: the agent fell over",
        "silent": "no answer: the agent returned nothing",
        "exit": "crash: exit status 1: no model here",
        "mute": "no answer: the agent printed nothing on stdout",
        "slow": "timeout: the agent ran past 1 s (killed)",
    }
    for label, error in expected.items():
        records = by_label(results.records, label)
        assert len(records) == 2, label
        assert all(r["stop_reason"] == "error" and r["error"] == error and not r["correct_em"] for r in records)


def test_budgets_hold_whatever_the_agent_does(items: Path, tmp_path: Path, agents_module: str) -> None:
    greedy = BridgedAgent(callable=f"{agents_module}:greedy", name="greedy")
    budget = Budget(max_searches=2, max_total_tokens=20)  # the instant model writes one token a call
    name = grid("greedy_agent", items, ("greedy", greedy), budget=budget)
    results = bcas.evaluate(grids=name, models="instant", out=tmp_path / "r")
    for r in by_label(results.records, "greedy"):
        assert r["searches_used"] == budget.max_searches
        assert len(r["extra"]["bridge"]["refused_searches"]) == 10 - budget.max_searches
        assert r["tokens_out"] == budget.max_total_tokens and r["extra"]["bridge"]["refused_calls"] == 1
        assert r["prediction"] == "max_total_tokens"  # the agent was told why, and answered with it
    assert results.passed, results.failures


@skip_if_no_mcp
def test_an_agent_searching_through_mcp_runs_in_a_grid(items: Path, tmp_path: Path, agents_module: str) -> None:
    mcp = BridgedAgent(callable=f"{agents_module}:mcp_searcher", dialects=("mcp",), name="mcp")
    results = bcas.evaluate(grids=grid("mcp_agent", items, ("mcp", mcp)), models="instant", out=tmp_path / "run")
    records = by_label(results.records, "mcp")
    assert len(records) == 2 and all(r["error"] is None for r in records)
    assert all([(s["kind"], s["note"]) for s in r["steps"]] == [("search", "mcp")] for r in records)
    assert all(r["timing"]["searches"] == r["searches_used"] == 1 for r in records)  # MCP searches are timed too
