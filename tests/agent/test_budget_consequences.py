"""What a trajectory loses when the budget is kept wrongly (BCAS §3.3; MADARA on the search tool, §4).

The loop runs with a scripted model and an in-memory retriever; token counts are the
scripted model's (one word or punctuation mark per token), so each budget below is
set to land exactly on the boundary it checks.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bcas.agent import run_bcas
from bcas.config import AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.llm.base import ChatRequest, ChatResult
from bcas.llm.usage import add_usage
from bcas.testing.scripted import FakeRetriever, ScriptedModel, count_tokens

PASSAGES = [
    ("d0", "Paris", "Paris is the capital of France and its largest city."),
    ("d1", "France", "France is a country whose capital is Paris."),
    ("d2", "Cheese", "France makes many kinds of cheese."),
    ("d3", "Gardening", "Tomatoes grow well in warm gardens."),
]
ITEM = Item("q1", "What is the capital of France?", ("Paris",), tuple(Document(*p) for p in PASSAGES), ("d0",))


def search(query: str) -> str:
    return json.dumps({"thought": "look", "action": "search_database", "query": query})


READY = json.dumps({"thought": "done", "action": "ready_to_answer", "query": ""})
ANSWER = json.dumps({"answer": "Paris"})


def test_a_turn_is_still_taken_when_exactly_the_reserve_is_left() -> None:
    """Documented: spent once *fewer than* ``forced_answer_tokens`` remain; at exactly that many, one more turn."""
    first = search("capital of France")
    reserve = 24
    assert count_tokens(READY) <= reserve and count_tokens(ANSWER) <= reserve
    budget = Budget(max_searches=3, max_total_tokens=count_tokens(first) + reserve, forced_answer_tokens=reserve)
    model = ScriptedModel([first, READY, ANSWER])
    config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2))
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=2), config))
    assert traj.steps[0].tokens_out == count_tokens(first)  # after the search, exactly the reserve is left
    # the second action turn ran (within the budget), and the model answered of its own accord
    assert [s.kind for s in traj.steps] == ["search", "ready", "answer"], [s.kind for s in traj.steps]
    assert traj.steps[1].max_tokens == reserve and traj.steps[1].flag is None
    assert traj.stop_reason == "answered" and traj.prediction == "Paris"


class ReRankingRetriever(FakeRetriever):
    """A retriever whose re-ranker calls the evaluated model: ``cost`` completion tokens per search."""

    def __init__(self, cost: int) -> None:
        super().__init__(PASSAGES, k=2)
        self.cost = cost

    async def asearch(self, query: str, k: int | None = None, exclude_ids: Any = ()) -> list[Any]:
        add_usage(ChatResult("5", prompt_tokens=40, completion_tokens=self.cost, finish_reason="stop", latency_s=0.0))
        return self.search(query, k=k, exclude_ids=exclude_ids)


def test_reranking_tokens_do_not_shorten_the_agent_s_turns() -> None:
    """The re-ranker is outside the agent's completion budget (BCAS §3.5): it costs no turn."""
    queries = ["capital of France", "French capital city", "largest city of France"]
    model = ScriptedModel([search(q) for q in queries] + [ANSWER])
    spent = sum(count_tokens(search(q)) for q in queries)
    budget = Budget(max_searches=3, max_total_tokens=spent + 60, forced_answer_tokens=24)
    config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2))
    traj = asyncio.run(run_bcas(ITEM, model, ReRankingRetriever(cost=500), config))
    # every search the budget allows was made, and the answer was not forced
    assert traj.searches_used == 3 and traj.stop_reason == "max_searches", (traj.stop_reason, traj.searches_used)
    assert [s.kind for s in traj.steps if s.kind != "rerank"] == ["search", "search", "search", "answer"]
    assert not traj.ledger.forced_allowance_used
    # the re-ranking is on the ledger all the same (its calls and tokens are paid for)
    reranks = [s for s in traj.steps if s.kind == "rerank"]
    assert len(reranks) == 3 and traj.tokens_out == traj.ledger.agent_tokens_out + 3 * 500


def _scoring_at_cap(request: ChatRequest, index: int) -> str:
    """Assessment agents that use every token they may (the worst case the loop plans for)."""
    props = (request.json_schema or {}).get("properties", {})
    if "action" in props:
        return search("capital of France")
    if "score" in props:
        return '{"score": 5, "reason": "' + "because " * 40 + '"}'
    return ANSWER


def test_an_assessment_on_the_search_tool_leaves_the_final_answer_its_reserve() -> None:
    """A MADARA treatment that would fit only by eating the forced-answer reserve is skipped (MADARA §4 on BCAS)."""
    score_cap, hits, reserve = 16, 4, 16
    worst = 3 * hits * score_cap  # three agents x four hits, each at its cap
    first = count_tokens(search("capital of France"))
    # The assessment's worst case fits in what is left, but not in what is left beyond the reserve.
    tokens = first + worst + reserve - 1
    config = RunConfig(
        budget=Budget(max_searches=1, max_total_tokens=tokens, per_turn_max_tokens=64, forced_answer_tokens=reserve),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(assess="sda"),
        assess=AssessConfig(n_docs=hits, score_max_tokens=score_cap),
    )
    traj = asyncio.run(run_bcas(ITEM, ScriptedModel(_scoring_at_cap), FakeRetriever(PASSAGES, k=hits), config))
    final = traj.steps[-1]
    assert final.kind == "answer" and final.flag is None, (final.kind, final.flag)  # within budget, not forced
    assert final.max_tokens >= reserve  # the answer could still ask for its reserve
    assert traj.ledger.budgeted_tokens_out <= tokens and traj.prediction == "Paris"
    # with room for the reserve as well, the assessment runs
    roomy = RunConfig(
        budget=Budget(
            max_searches=1, max_total_tokens=tokens + 1, per_turn_max_tokens=64, forced_answer_tokens=reserve
        ),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(assess="sda"),
        assess=AssessConfig(n_docs=hits, score_max_tokens=score_cap),
    )
    traj = asyncio.run(run_bcas(ITEM, ScriptedModel(_scoring_at_cap), FakeRetriever(PASSAGES, k=hits), roomy))
    assess = [s for s in traj.steps if s.kind == "assess"]
    assert len(assess) == 1 and assess[0].flag is None and assess[0].calls == worst // score_cap
    assert traj.steps[-1].kind == "answer" and traj.steps[-1].max_tokens >= reserve


def test_a_pde_assessment_counts_its_per_document_answers_in_its_worst_case() -> None:
    """PDE also answers once per kept document (MADARA §4.4, Algorithm 2 lines 31-33).

    Those calls must fit beside the forced-answer reserve too.
    """
    score_cap, answer_cap, hits, k, reserve = 16, 24, 4, 2, 16
    worst = 3 * hits * score_cap + k * answer_cap
    first = count_tokens(search("capital of France"))

    def config(tokens: int) -> RunConfig:
        return RunConfig(
            budget=Budget(
                max_searches=1, max_total_tokens=tokens, per_turn_max_tokens=64, forced_answer_tokens=reserve
            ),
            retrieval=RetrievalConfig(k=k),
            agent=AgentConfig(assess="pde"),
            assess=AssessConfig(n_docs=hits, score_max_tokens=score_cap, answer_max_tokens=answer_cap),
        )

    tight = first + worst + reserve - 1  # the scores alone would fit; with the answers, not beside the reserve
    traj = asyncio.run(run_bcas(ITEM, ScriptedModel(_scoring_at_cap), FakeRetriever(PASSAGES, k=hits), config(tight)))
    (assess,) = [s for s in traj.steps if s.kind == "assess"]
    assert assess.flag == "assess_skipped" and assess.calls == 0
    assert traj.steps[-1].kind == "answer" and traj.steps[-1].flag is None
    traj = asyncio.run(
        run_bcas(ITEM, ScriptedModel(_scoring_at_cap), FakeRetriever(PASSAGES, k=hits), config(tight + 1))
    )
    (assess,) = [s for s in traj.steps if s.kind == "assess"]
    assert assess.flag is None and assess.calls > 0  # with room for everything, PDE runs


def test_the_ledger_refuses_a_search_past_the_allowance_naming_it() -> None:
    """A loop that offered the search tool once the allowance was spent is a defect, not a
    trajectory: the ledger stops it with the search's number and the cap."""
    import pytest

    from bcas.agent.budget import BudgetError, BudgetLedger, Step

    ledger = BudgetLedger(Budget(max_searches=2, max_total_tokens=500))
    ledger.record(Step(kind="search", query="a", tokens_out=5))
    ledger.record(Step(kind="search", query="a", tokens_out=5, flag="repeated_query"))  # not counted
    ledger.record(Step(kind="search", query="b", tokens_out=5))
    with pytest.raises(BudgetError) as refused:
        ledger.record(Step(kind="search", query="c", tokens_out=5))
    assert str(refused.value) == (
        "search #3 exceeds max_searches=2; the loop must not offer the search tool once the allowance is spent"
    )


def test_the_forced_answer_allowance_is_spent_once_and_only_by_a_forced_answer() -> None:
    import pytest

    from bcas.agent.budget import BudgetError, BudgetLedger, Step

    ledger = BudgetLedger(Budget(max_searches=1, max_total_tokens=60, forced_answer_tokens=48))
    ledger.record(Step(kind="search", query="a", tokens_out=20))
    assert ledger.tokens_spent and ledger.answer_max_tokens() == (48, True)
    ledger.record(Step(kind="answer", tokens_out=30, flag="over_budget"))
    ledger.record(Step(kind="answer", tokens_out=3))  # a later step of another kind is still recorded
    with pytest.raises(BudgetError) as twice:
        ledger.record(Step(kind="answer", tokens_out=3, flag="over_budget"))
    assert str(twice.value) == "the forced-answer allowance was already used in this trajectory"
    with pytest.raises(BudgetError) as again:
        ledger.answer_max_tokens()
    assert str(again.value) == "the forced-answer allowance was already used in this trajectory"
    exhausted = BudgetLedger(Budget(max_searches=1, max_total_tokens=50))
    exhausted.record(Step(kind="search", query="a", tokens_out=50))
    with pytest.raises(BudgetError) as spent:
        exhausted.turn_max_tokens()
    assert str(spent.value) == "the completion-token budget is spent; only the forced answer may run"


def test_the_budget_line_shows_searches_and_tokens_left_every_turn() -> None:
    """BCAS §3.3: each turn tells the model what it has *left*, both halves of the line.  On the
    first turn nothing is spent (all searches, all tokens); after each search one search and
    that turn's completion tokens are gone.  A line that showed tokens used would read
    ``0 of 2000`` on the first turn."""
    first, second = search("capital of France"), search("France capital city")
    model = ScriptedModel([first, second, READY, ANSWER])
    config = RunConfig(budget=Budget(max_searches=3, max_total_tokens=2000), retrieval=RetrievalConfig(k=2))
    asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=2), config, keep_requests=True))
    lines = [r.messages[-1]["content"] for r in model.requests]
    spent_first, spent_second = count_tokens(first), count_tokens(second)
    assert "Budget: 3 of 3 searches left. 2000 of 2000 output tokens left" in lines[0], lines[0]
    assert f"Budget: 2 of 3 searches left. {2000 - spent_first} of 2000 output tokens left" in lines[1], lines[1]
    left = 2000 - spent_first - spent_second
    assert f"Budget: 1 of 3 searches left. {left} of 2000 output tokens left" in lines[2], lines[2]
