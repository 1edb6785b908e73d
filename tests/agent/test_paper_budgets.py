"""Budgets as BCAS §3.3 defines them: only ``max_searches`` and ``max_total_tokens`` cap a
trajectory in the paper grids, so context scaling is observable (the ``mock:verbose``
agent spends each budget) and unlimited searches go beyond a dozen when tokens allow."""

from __future__ import annotations

import asyncio
import json
import statistics
from dataclasses import replace
from typing import Any

import pytest

from bcas.agent import run_bcas
from bcas.agent.budget import MAX_TURNS_SAFETY, BudgetLedger, turn_bound
from bcas.agent.protocol import QUERY_MAX_CHARS, action_schema
from bcas.config import AgentConfig, Budget, ConfigError, RetrievalConfig, RunConfig
from bcas.data import Dataset, load_dataset
from bcas.grids import ABLATION, CONTEXT_SCALING, SEARCH_SCALING, SMOKE
from bcas.llm.base import ChatRequest
from bcas.testing.mock import MockModel
from bcas.testing.scripted import ScriptedModel

PAPER_GRIDS = (SEARCH_SCALING, CONTEXT_SCALING, ABLATION)
BM25 = RetrievalConfig(mode="bm25")


@pytest.fixture(scope="module")
def hotpotqa() -> Dataset:
    return load_dataset("hotpotqa")


@pytest.fixture(scope="module")
def bm25(hotpotqa: Dataset) -> Any:
    from bcas.retrieval import build_retriever

    return build_retriever(hotpotqa.documents, BM25, progress=False)


def run_items(items: Any, model: Any, retriever: Any, config: RunConfig) -> list[Any]:
    async def go() -> list[Any]:
        return [await run_bcas(item, model, retriever, config) for item in items]

    return asyncio.run(go())


# -- the configuration ------------------------------------------------------------------


@pytest.mark.parametrize("grid", PAPER_GRIDS, ids=lambda g: g.name)
def test_paper_grids_cap_only_searches_and_tokens(grid: Any) -> None:
    for entry in grid.entries:
        assert entry.config.budget.per_turn_max_tokens is None, entry.label
        assert entry.config.agent.max_turns is None, entry.label


def test_smoke_grid_keeps_its_per_call_cap() -> None:
    bcas = [e for e in SMOKE.entries if e.kind == "bcas"]
    assert bcas and all(e.config.budget.per_turn_max_tokens == 160 for e in bcas)
    # limited searches: the derived bound is below the former fixed cap of 12 turns
    assert all(turn_bound(e.config.budget, e.config.agent) <= 12 for e in bcas)


def test_turn_bound_is_derived_from_the_budgets() -> None:
    agent = AgentConfig()
    assert turn_bound(Budget(max_searches=3), agent) == 3 + agent.max_invalid_turns
    assert turn_bound(Budget(max_searches=None), agent) == MAX_TURNS_SAFETY >= 50
    assert turn_bound(Budget(max_searches=1000), agent) == MAX_TURNS_SAFETY
    assert turn_bound(Budget(max_searches=None), AgentConfig(max_turns=7)) == 7
    with pytest.raises(ConfigError, match="max_turns"):
        AgentConfig(max_turns=0)
    with pytest.raises(ConfigError, match="per_turn_max_tokens"):
        Budget(per_turn_max_tokens=0)


def test_a_turn_may_use_what_remains_of_the_budget() -> None:
    assert BudgetLedger(Budget(max_total_tokens=16000)).turn_max_tokens() == 16000
    assert BudgetLedger(Budget(max_total_tokens=16000, per_turn_max_tokens=384)).turn_max_tokens() == 384
    assert BudgetLedger(Budget(max_total_tokens=100, per_turn_max_tokens=384)).turn_max_tokens() == 100


def test_action_fields_are_sized_from_the_turn_allowance() -> None:
    caps = []
    for allowance in (64, 500, 2000, 16000):
        props = action_schema(["search_database", "ready_to_answer"], allowance)["properties"]
        thought, query = props["thought"]["maxLength"], props["query"]["maxLength"]
        # the fields fit the allowance at two characters per token, after the JSON overhead
        assert thought + query <= max(16, 2 * allowance)
        caps.append((thought, query))
    assert [t for t, _ in caps] == sorted({t for t, _ in caps})  # strictly growing thoughts
    assert caps[-1][0] > 16000 and caps[-1][1] == QUERY_MAX_CHARS
    assert "maxLength" not in action_schema(["ready_to_answer"])["properties"]["thought"]


# -- the effects are observable ---------------------------------------------------------


def test_context_scaling_spends_each_budget_with_mock_verbose(hotpotqa: Dataset, bm25: Any) -> None:
    model = MockModel("verbose")
    items = hotpotqa.items[:3]
    means: dict[int, float] = {}
    for entry in CONTEXT_SCALING.entries:
        config = replace(entry.config, retrieval=BM25)  # the mock cares for no ranking: BM25 is enough
        budget = config.budget
        assert budget.max_searches is None and budget.per_turn_max_tokens is None
        trajs = run_items(items, model, bm25, config)
        assert all(t.error is None for t in trajs)
        mean = statistics.mean(t.tokens_out for t in trajs)
        assert mean >= 0.9 * budget.max_total_tokens, entry.label
        assert all(t.tokens_out <= budget.max_total_tokens + budget.forced_answer_tokens for t in trajs)
        if not (entry.config.agent.planning or entry.config.agent.reflection):
            means[budget.max_total_tokens] = mean
            # unlimited searches go past a dozen whenever the tokens allow a dozen turns
            if budget.max_total_tokens >= 2000:
                assert min(t.searches_used for t in trajs) > 12, entry.label
    assert sorted(means) == [500, 1000, 2000, 4000, 16000]
    ordered = [means[b] for b in sorted(means)]
    assert all(a < b for a, b in zip(ordered, ordered[1:], strict=False))


def test_unlimited_searches_exceed_twelve_when_tokens_allow(hotpotqa: Dataset, bm25: Any) -> None:
    """A model with short distinct searches, under the paper's 16K unlimited configuration."""

    def reply(request: ChatRequest, index: int) -> str:
        if request.json_schema and "action" in request.json_schema["properties"]:
            return json.dumps({"thought": "more", "action": "search_database", "query": f"film director {index}"})
        return json.dumps({"answer": "x"})

    entry = next(e for e in CONTEXT_SCALING.entries if e.reference)
    config = replace(entry.config, retrieval=BM25)
    (traj,) = run_items(hotpotqa.items[:1], ScriptedModel(reply), bm25, config)
    assert traj.searches_used == MAX_TURNS_SAFETY > 12
    assert traj.stop_reason == "max_turns" and traj.tokens_out < config.budget.max_total_tokens
