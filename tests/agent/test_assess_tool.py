"""MADARA treatments on the BCAS search tool (AgentConfig.assess): ledgered and budgeted.

Control flow with the scripted model; the treatments themselves run for real in
tests/assess/test_real_assess.py.
"""

from __future__ import annotations

import asyncio
import json

from bcas.agent import run_bcas
from bcas.config import AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.testing.scripted import FakeRetriever, ScriptedModel

PASSAGES = [
    ("d0", "Paris", "Paris is the capital of France and its largest city."),
    ("d1", "France", "France is a country whose capital is Paris."),
    ("d2", "Cheese", "France makes many kinds of cheese."),
    ("d3", "Gardening", "Tomatoes grow well in warm gardens."),
]
ITEM = Item("q1", "What is the capital of France?", ("Paris",), tuple(Document(*p) for p in PASSAGES), ("d0",))


def _reply(request, index: int) -> str:
    props = (request.json_schema or {}).get("properties", {})
    text = request.messages[-1]["content"]
    if "action" in props:
        return json.dumps({"thought": "search", "action": "search_database", "query": "capital of France"})
    if "score" in props:
        return json.dumps({"score": 5 if "capital" in text.split("Document")[-1] else 1})
    if "answer" in props:
        return json.dumps({"answer": "Paris"})
    return "Paris"


def _config(method: str, tokens: int) -> RunConfig:
    return RunConfig(
        budget=Budget(max_searches=1, max_total_tokens=tokens, per_turn_max_tokens=64, forced_answer_tokens=16),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(assess=method),
        assess=AssessConfig(n_docs=4, score_max_tokens=16),
    )


def test_atf_on_the_search_tool_is_one_ledgered_step_within_budget() -> None:
    model = ScriptedModel(_reply)
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=4), _config("atf", 4000)))
    kinds = [s.kind for s in traj.steps]
    assert kinds == ["search", "assess", "answer"], kinds
    search, assess = traj.steps[0], traj.steps[1]
    assert len(search.retrieved) == 4  # the assessment pool (n_docs)
    assert assess.calls == 3 * 4  # three agents x four hits
    assert 2 <= len(assess.retrieved) <= 2  # ATF keeps at least 2, at most k
    assert traj.llm_calls == sum(s.calls for s in traj.steps) == 1 + 12 + 1
    assert traj.tokens_out == sum(s.tokens_out for s in traj.steps) and assess.tokens_out > 0
    assert traj.ledger.budgeted_tokens_out <= 4000
    # The model's next prompt shows only the kept hits.
    answer_prompt = model.requests[-1].messages[-1]["content"]
    kept = set(assess.retrieved)
    assert set(traj.passage_ids.values()) == kept  # the opaque ids shown map back to the kept chunks
    for label in traj.passage_ids:
        assert f"(id {label})" in answer_prompt
    assert not [chunk for chunk in search.retrieved if chunk in answer_prompt]  # no dataset id is shown


def test_assessment_that_would_overrun_the_budget_is_skipped_and_flagged() -> None:
    model = ScriptedModel(_reply)
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=4), _config("sda", 200)))
    assess = [s for s in traj.steps if s.kind == "assess"]
    assert len(assess) == 1 and assess[0].flag == "assess_skipped" and assess[0].calls == 0
    assert not any("score" in (r.json_schema or {}).get("properties", {}) for r in model.requests)
    assert traj.llm_calls == len(model.requests)
    assert traj.ledger.budgeted_tokens_out <= 200
