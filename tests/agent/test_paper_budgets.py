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
from bcas.agent.protocol import MIN_FIELD_CHARS, QUERY_MAX_CHARS, THOUGHT_MAX_CHARS, action_schema
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


def test_action_fields_fit_the_turn_allowance_and_never_grow_past_fixed_caps() -> None:
    schemas = set()
    for allowance in (*range(1, 600), 1000, 2000, 4000, 16000, 128000, None):
        props = action_schema(["search_database", "ready_to_answer"], allowance)["properties"]
        thought, query = props["thought"]["maxLength"], props["query"]["maxLength"]
        assert thought <= THOUGHT_MAX_CHARS and query <= QUERY_MAX_CHARS
        if allowance is not None:
            # the fields fit the allowance at two characters per token, after the JSON overhead
            assert thought + query <= max(2 * MIN_FIELD_CHARS, 2 * allowance)
        schemas.add((thought, query))
    # bounded whatever the budget: every allowance from 600 tokens on gets the same schema
    assert max(schemas) == (THOUGHT_MAX_CHARS, QUERY_MAX_CHARS)
    assert (
        len({action_schema(["search_database"], n)["properties"]["thought"]["maxLength"] for n in (600, 16000, 10**6)})
        == 1
    )
    assert action_schema(["ready_to_answer"], 16000) == action_schema(["ready_to_answer"], 128000)


# -- the effects are observable ---------------------------------------------------------


@pytest.mark.parametrize("thought_max_chars", [None, 256], ids=["unbounded-thought", "bounded-thought"])
def test_context_scaling_spends_each_budget_with_mock_verbose(
    hotpotqa: Dataset, bm25: Any, thought_max_chars: int | None
) -> None:
    """With an unbounded thought every budget is spent; with the default 256-character
    thought, action turns are bounded, so the 64-turn safety limit caps what a 16K budget
    can spend (measured 0.25 of it): every budget up to 4K is still spent."""
    model = MockModel("verbose")
    items = hotpotqa.items[:3]
    means: dict[int, float] = {}
    for entry in CONTEXT_SCALING.entries:
        # the mock cares for no ranking: BM25 is enough
        agent = replace(entry.config.agent, thought_max_chars=thought_max_chars)
        config = replace(entry.config, retrieval=BM25, agent=agent)
        budget = config.budget
        if thought_max_chars is not None and budget.max_total_tokens > 4000:
            continue
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
    assert sorted(means) == [500, 1000, 2000, 4000, 16000][: 5 if thought_max_chars is None else 4]
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
