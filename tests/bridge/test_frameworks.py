"""Real agent frameworks from PyPI (smolagents, the OpenAI Agents SDK; the ``agents`` extra) answering
through the bridge: on a scripted model in the default run, on the embedded SmolLM2-135M in a grid
(slow), with every call on the ledger."""

from __future__ import annotations

import asyncio
import importlib.util
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.bridge import open_bridge
from bcas.bridge.runner import AgentOutcome, run_agent
from bcas.config import BridgedAgent, Budget, RetrievalConfig, RunConfig
from bcas.grids import GRIDS, Grid, GridEntry, register_grid
from bcas.items import Item
from bcas.testing.recording import recording_backend
from bcas.testing.scripted import Calls, FakeRetriever, ScriptedModel

FRAMEWORKS = {
    "smolagents": "tests.bridge.framework_agents:smolagents_agent",
    "agents": "tests.bridge.framework_agents:openai_agents_agent",  # the OpenAI Agents SDK (PyPI openai-agents)
}
ITEM = Item(id="q1", question="Where was the author of Hamlet born?", answers=("Stratford",), documents=())
PASSAGES = [
    ("d1", "Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
    ("d2", "William Shakespeare", "William Shakespeare was born in Stratford-upon-Avon."),
]


def needs(package: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        importlib.util.find_spec(package) is None,
        reason=f"{package} is not installed: pip install 'bcas[agents]' (CI installs it)",
    )


# The framework's last word: smolagents answers through its final_answer tool, the Agents SDK with text.
LAST = {"smolagents": Calls((("final_answer", '{"answer": "Stratford-upon-Avon"}'),)), "agents": "Stratford-upon-Avon"}


@pytest.mark.parametrize("package", [pytest.param(p, marks=needs(p)) for p in FRAMEWORKS])
def test_a_framework_agent_searches_through_the_bridge_and_answers(package: str) -> None:
    model = ScriptedModel([Calls((("search", '{"query": "Hamlet author born"}'),)), LAST[package]])
    cfg = RunConfig(budget=Budget(max_searches=2, max_total_tokens=500), retrieval=RetrievalConfig(mode="bm25", k=2))

    async def main() -> tuple[Any, AgentOutcome]:
        async with open_bridge(ITEM, model, FakeRetriever(PASSAGES, k=2), cfg, ("openai",)) as (bridge, ep):
            return bridge, await run_agent(BridgedAgent(callable=FRAMEWORKS[package]), ITEM.question, ep)

    bridge, outcome = asyncio.run(main())
    assert outcome == AgentOutcome(answer="Stratford-upon-Avon")
    assert [(s.kind, s.query) for s in bridge.ledger.steps] == [
        ("generate", None), ("search", "Hamlet author born"), ("generate", None)
    ]  # fmt: skip
    first, second = model.requests
    assert first.tools and [t["function"]["name"] for t in first.tools if t["function"]["name"] == "search"]
    # the framework put the bridge's tool message (the passages and the searches left) in its conversation
    # (the Agents SDK as a tool message, smolagents as its observation)
    seen = [m["content"] for m in second.messages if "born in Stratford-upon-Avon" in m["content"]]
    assert len(seen) == 1 and "(searches left: 1)" in seen[0]


@pytest.mark.slow  # two frameworks x two HotpotQA items on SmolLM2-135M: minutes on a CPU
@needs("smolagents")
@needs("agents")
def test_two_frameworks_answer_hotpotqa_on_the_embedded_model_with_every_call_on_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    with ExitStack() as stack:
        models = stack.enter_context(recording_backend("recembedded_bridge", inner="embedded"))
        grids = GRIDS.snapshot()
        stack.callback(GRIDS.restore, grids)
        budget, retrieval = Budget(max_searches=2, max_total_tokens=600), RetrievalConfig(mode="bm25", k=2)
        entries = tuple(
            GridEntry("agent", RunConfig(budget=budget, retrieval=retrieval,
                                         bridged=BridgedAgent(callable=target, timeout_s=3000)), name=f"agent/{name}")
            for name, target in FRAMEWORKS.items()
        )  # fmt: skip
        register_grid(Grid("frameworks_embedded", entries, datasets=("hotpotqa",), limit=2))
        results = bcas.evaluate(grids="frameworks_embedded", models="recembedded_bridge", out=tmp_path / "run",
                                no_cache=True)  # fmt: skip
    (model,) = models
    records = results.records
    assert sorted(r["label"] for r in records) == ["agent/agents"] * 2 + ["agent/smolagents"] * 2
    assert [(r["label"], r["error"]) for r in records if r["error"]] == []  # an answer may be wrong, never missing
    for r in records:
        calls = [s for s in r["steps"] if s["kind"] == "generate"]
        assert calls and r["llm_calls"] == len(calls)
        assert r["tokens_out"] == sum(s["tokens_out"] for s in calls) <= 600
        assert all(s["tokens_out"] <= s["max_tokens"] for s in calls)  # native tool calls too
        assert r["searches_used"] <= 2
    # the records hold every call the bridge made to the model, and nothing else
    assert sum(r["llm_calls"] for r in records) == model.calls
    assert sum(r["tokens_in"] for r in records) == model.prompt_tokens
    assert sum(r["tokens_out"] for r in records) == model.completion_tokens
