"""Budgets as BCAS §3.3 defines them: only ``max_searches`` and ``max_total_tokens`` cap a
trajectory in the paper grids, so context scaling is observable (the ``mock:verbose``
agent spends each budget) and unlimited searches go beyond a dozen when tokens allow."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from bcas.agent import run_bcas
from bcas.agent.budget import MAX_TURNS_SAFETY, BudgetLedger, turn_bound
from bcas.agent.protocol import MIN_FIELD_CHARS, QUERY_MAX_CHARS, THOUGHT_MAX_CHARS, action_schema
from bcas.config import GUARDED_LOOP, THOUGHT_CHARS_LIMIT, AgentConfig, Budget, ConfigError, RetrievalConfig, RunConfig
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
def twowiki() -> Dataset:
    return load_dataset("2wikimultihopqa")


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
    paper = AgentConfig()
    # the paper's loop: a bound no trajectory whose turns cost a token can reach
    assert paper.max_invalid_turns is None and paper.repeated_query == "search"
    assert turn_bound(Budget(max_searches=3, max_total_tokens=500), paper) == 500
    assert turn_bound(Budget(max_searches=None, max_total_tokens=16000), paper) == 16000
    guarded = AgentConfig(**GUARDED_LOOP)
    assert turn_bound(Budget(max_searches=3), guarded) == 3 + 3
    assert turn_bound(Budget(max_searches=None), guarded) == MAX_TURNS_SAFETY >= 50
    assert turn_bound(Budget(max_searches=1000), guarded) == MAX_TURNS_SAFETY
    assert turn_bound(Budget(max_searches=None), AgentConfig(max_turns=7)) == 7
    with pytest.raises(ConfigError, match="max_turns"):
        AgentConfig(max_turns=0)
    with pytest.raises(ConfigError, match="max_invalid_turns"):
        AgentConfig(max_invalid_turns=0)
    with pytest.raises(ConfigError, match="repeated_query"):
        AgentConfig(repeated_query="skip")
    with pytest.raises(ConfigError, match="per_turn_max_tokens"):
        Budget(per_turn_max_tokens=0)


@pytest.mark.parametrize("grid", PAPER_GRIDS, ids=lambda g: g.name)
def test_paper_grids_run_the_papers_loop(grid: Any) -> None:
    for entry in grid.entries:
        agent = entry.config.agent
        assert agent.repeated_query == "search" and agent.max_invalid_turns is None, entry.label
        assert not agent.exclude_seen and agent.thought_max_chars is None, entry.label
        # no grammar grows with the budget: the action schema is the same at every allowance from 1K on
        schemas = {json.dumps(action_schema(["search_database", "ready_to_answer"], n, None)) for n in (1000, 16000)}
        assert (
            len(schemas) == 1
            and "maxLength" not in action_schema(["search_database"], 16000, None)["properties"]["thought"]
        )


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


def test_an_unbounded_thought_is_capped_to_fit_a_small_allowance_by_a_constant_at_most() -> None:
    """The paper's loop near the end of its budget: a thought that filled the last few
    tokens would be cut off before its action; it gets a cap that fits instead, never
    above the constant the grammar tolerates, and a large allowance leaves it unbounded."""
    for allowance in range(1, 2000):
        props = action_schema(["search_database", "ready_to_answer"], allowance, None)["properties"]
        cap = props["thought"].get("maxLength")
        if cap is None:
            assert allowance > 200  # unbounded only where the allowance has room for more than the constant
        else:
            assert cap <= THOUGHT_CHARS_LIMIT
            assert cap + props["query"]["maxLength"] <= max(2 * MIN_FIELD_CHARS, 2 * allowance)
    assert "maxLength" not in action_schema(["search_database"], 16000, None)["properties"]["thought"]
    assert action_schema(["search_database"], 100, None)["properties"]["thought"]["maxLength"] < 200


# -- the effects are observable ---------------------------------------------------------


def test_context_scaling_spends_each_budget_with_mock_verbose(twowiki: Dataset) -> None:
    """BCAS §5.1's mechanism can occur: a model that writes all it may spends at least 90%
    of every token level of the grid as it stands (2WikiMultihopQA, 3 items), and t4k and
    t16k give different trajectories."""
    from bcas.retrieval import build_retriever

    retriever = build_retriever(twowiki.documents, BM25, progress=False)
    model = MockModel("verbose")
    items = twowiki.items[:3]
    spent: dict[str, list[int]] = {}
    for entry in CONTEXT_SCALING.entries:
        config = replace(entry.config, retrieval=BM25)  # the mock cares for no ranking: BM25 is enough
        budget = config.budget
        trajs = run_items(items, model, retriever, config)
        assert all(t.error is None for t in trajs)
        for t in trajs:
            assert t.tokens_out >= 0.9 * budget.max_total_tokens, (entry.label, t.tokens_out)
            assert t.tokens_out <= budget.max_total_tokens + budget.forced_answer_tokens
            assert t.stop_reason == "max_total_tokens", (entry.label, t.stop_reason)
        spent[entry.label] = [t.tokens_out for t in trajs]
    # formerly identical (3,383 tokens each, the 64-turn bound ending both)
    assert min(spent["hs/sinf/t16k"]) > 3.5 * max(spent["hs/sinf/t4k"])


def test_the_turn_bound_cannot_end_a_trajectory_before_the_budget(hotpotqa: Dataset, bm25: Any) -> None:
    """Unlimited searches, the paper's 16K budget: a model whose turns cost about 200 tokens
    takes about 80 action turns (more than the former 64-turn safety limit), and the token
    budget, not a turn count, ends the trajectory."""

    def reply(request: ChatRequest, index: int) -> str:
        if request.json_schema and "action" in request.json_schema["properties"]:
            thought = " ".join(["more"] * 190)
            return json.dumps({"thought": thought, "action": "search_database", "query": f"film director {index}"})
        return json.dumps({"answer": "x"})

    entry = next(e for e in CONTEXT_SCALING.entries if e.reference)
    config = replace(entry.config, retrieval=BM25)
    (traj,) = run_items(hotpotqa.items[:1], ScriptedModel(reply), bm25, config)
    assert traj.stop_reason == "max_total_tokens"
    assert traj.searches_used > MAX_TURNS_SAFETY
    assert traj.tokens_out >= config.budget.max_total_tokens - config.budget.forced_answer_tokens


def test_a_repeated_query_is_a_search_in_the_paper_grids(hotpotqa: Dataset, bm25: Any) -> None:
    """BCAS §3.4 skips no search: a model that repeats its query spends its searches, sees
    each search's results, and answers when the searches run out (``max_searches``)."""
    limited = [e for e in SEARCH_SCALING.entries if e.config.budget.max_searches is not None]
    assert [e.config.budget.max_searches for e in limited] == [1, 2, 3]
    question = hotpotqa.items[0].question
    for entry in limited:
        seen: list[int] = []

        def reply(request: ChatRequest, index: int, seen: list[int] = seen) -> str:
            if request.json_schema and "action" in request.json_schema["properties"]:
                prompt = "\n".join(str(m.get("content") or "") for m in request.messages)
                seen.append(prompt.count("Search results for"))
                return json.dumps({"thought": "again", "action": "search_database", "query": question})
            return json.dumps({"answer": "x"})

        config = replace(entry.config, retrieval=BM25)
        (traj,) = run_items(hotpotqa.items[:1], ScriptedModel(reply), bm25, config)
        n = config.budget.max_searches
        assert traj.stop_reason == "max_searches", entry.label
        assert traj.searches_used == n and traj.repeated_queries == n - 1
        searches = [s for s in traj.steps if s.kind == "search"]
        assert all(s.flag is None and s.retrieved for s in searches)
        # the same query returns the same passages (nothing already shown is left out)
        assert len({s.retrieved for s in searches}) == 1
        # each action turn's prompt holds the results of every search before it
        assert seen == list(range(n))
        assert traj.steps[-1].kind == "answer" and traj.prediction == "x"


def test_guarded_rules_remain_as_options(hotpotqa: Dataset, bm25: Any) -> None:
    """The former rules, on request: a repeat is not run and three unusable turns end the item."""
    question = hotpotqa.items[0].question

    def reply(request: ChatRequest, index: int) -> str:
        if request.json_schema and "action" in request.json_schema["properties"]:
            return json.dumps({"thought": "again", "action": "search_database", "query": question})
        return json.dumps({"answer": "x"})

    entry = next(e for e in SEARCH_SCALING.entries if e.config.budget.max_searches == 3)
    config = replace(entry.config, retrieval=BM25, agent=replace(entry.config.agent, **GUARDED_LOOP))
    (traj,) = run_items(hotpotqa.items[:1], ScriptedModel(reply), bm25, config)
    assert traj.stop_reason == "max_invalid_turns" and traj.searches_used == 1 and traj.repeated_queries == 3


def test_a_reply_cut_off_by_its_allowance_is_an_explained_invalid_turn() -> None:
    """An unbounded thought may run past the turn's allowance; the turn is then invalid, its
    note says it was cut off, and the item still ends with an answer."""
    from bcas.testing.scripted import FakeRetriever

    def reply(request: ChatRequest, index: int) -> str:
        if request.json_schema and "action" in request.json_schema["properties"]:
            thought = " ".join(["think"] * 400)
            return json.dumps({"thought": thought, "action": "search_database", "query": "q"})
        return json.dumps({"answer": "x"})

    item = load_dataset("hotpotqa").items[0]
    config = RunConfig(budget=Budget(max_searches=None, max_total_tokens=300), retrieval=BM25)
    traj = asyncio.run(run_bcas(item, ScriptedModel(reply), FakeRetriever([("d", "t", "text")]), config))
    invalid = [s for s in traj.steps if s.kind == "invalid"]
    assert len(invalid) == 1 and invalid[0].finish_reason == "length"
    assert "cut off at its 300-token allowance" in invalid[0].note
    assert traj.stop_reason == "max_total_tokens" and traj.prediction == "x"
