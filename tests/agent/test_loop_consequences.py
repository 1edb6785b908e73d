"""What the BCAS loop does with repeated queries and with a squeezed context, on a scripted
model (BCAS §3.4): a repeat the grid allows is a search, never an unusable turn; the final
answer keeps the research plan when older search results are left out to fit the window."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bcas.agent import run_bcas
from bcas.agent.loop import Trajectory
from bcas.agent.window import CONTEXT_MARGIN, ContextWindow
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.llm.base import ChatRequest
from bcas.testing.scripted import FakeRetriever, ScriptedModel
from tests.agent.test_loop import ITEM, PASSAGES, answer, ready, search

DROPPED = "[earlier search results left out to fit the context window]"
PLAN = "PLAN: find who played Corliss Archer in Kiss and Tell, then the office she held."


def run(model: ScriptedModel, budget: Budget, retriever: Any = None, **agent: Any) -> Trajectory:
    config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2), agent=AgentConfig(**agent))
    retriever = retriever if retriever is not None else FakeRetriever(PASSAGES, k=2)
    return asyncio.run(run_bcas(ITEM, model, retriever, config, keep_requests=True))


def test_repeats_the_grid_allows_are_searches_not_unusable_turns() -> None:
    """With ``repeated_query="search"`` (the paper's behaviour) and ``max_invalid_turns=2``, a model
    that asks the same query five times spends its five searches: the repeats are not counted
    toward the invalid-turn limit, so the stop reason is ``max_searches``."""
    model = ScriptedModel(
        lambda request, i: answer("Chief of Protocol") if "answer" in (request.json_schema or {}).get(
            "properties", {}) and "action" not in request.json_schema["properties"] else search("Shirley Temple")
    )  # fmt: skip
    traj = run(model, Budget(max_searches=5, max_total_tokens=4000), max_invalid_turns=2, max_turns=20)
    assert traj.stop_reason == "max_searches"
    assert traj.searches_used == 5 and traj.repeated_queries == 4 and traj.invalid_turns == 0
    assert [s.flag for s in traj.steps if s.kind == "search"] == [None] * 5
    # the same script, with repeats declared unusable: the limit ends it after two repeats
    strict = run(model, Budget(max_searches=5, max_total_tokens=4000), max_invalid_turns=2, max_turns=20,
                 repeated_query="invalid")  # fmt: skip
    assert strict.stop_reason == "max_invalid_turns" and strict.searches_used == 1


def test_allowed_repeats_do_not_count_toward_the_invalid_turn_limit() -> None:
    """Two repeats the grid allows, then one unusable reply: with ``max_invalid_turns=2`` that is one
    unusable turn, so the loop goes on to its next search and answers."""
    actions = [search("Shirley Temple")] * 3 + ["not an action at all"] + [search("Corliss Archer"), ready()]
    calls: list[str] = []

    def script(request: ChatRequest, index: int) -> str:
        if "action" not in (request.json_schema or {}).get("properties", {}) and request.json_schema:
            return answer("Chief of Protocol")
        calls.append("action")
        return actions[min(len(calls), len(actions)) - 1]

    traj = run(ScriptedModel(script), Budget(max_searches=5, max_total_tokens=4000), max_invalid_turns=2)
    assert traj.stop_reason == "answered" and traj.prediction == "Chief of Protocol"
    assert traj.invalid_turns == 1 and traj.repeated_queries == 2 and traj.searches_used == 4


LONG = [(d, t, (x + " ") * 6) for d, t, x in PASSAGES]  # passages long enough to fill a small window


def _script(request: ChatRequest, index: int) -> str:
    properties = (request.json_schema or {}).get("properties", {})
    if "action" in properties:
        turn = sum(1 for m in request.messages if m["role"] == "assistant")  # the plan, then one per turn
        queries = ["Kiss and Tell film", "Shirley Temple", "Corliss Archer radio"]
        return search(queries[turn - 1]) if turn <= len(queries) else ready()
    if "answer" in properties:
        return answer("Chief of Protocol")
    return PLAN  # the planning call (free text)


def _answer_messages(window: int | None) -> tuple[Trajectory, list[dict[str, Any]]]:
    model = ScriptedModel(_script)
    if window is not None:
        model.context_window = window  # type: ignore[attr-defined]
    traj = run(model, Budget(max_searches=4, max_total_tokens=4000), retriever=FakeRetriever(LONG, k=2),
               planning=True)  # fmt: skip
    return traj, list(model.requests[-1].messages)


def test_a_squeezed_final_answer_keeps_the_plan_and_drops_the_oldest_results() -> None:
    whole_traj, whole = _answer_messages(None)
    assert whole_traj.stop_reason == "answered" and whole_traj.plan == PLAN
    assert not any(DROPPED in (m.get("content") or "") for m in whole)
    # A window the final answer's whole history just does not fit, while every action turn did.
    estimate = ContextWindow(None).prompt_estimate
    need = Budget().forced_answer_tokens
    window = estimate(whole) + CONTEXT_MARGIN + need - 1
    assert all(estimate(list(r.messages)) + CONTEXT_MARGIN + 64 <= window for r in whole_traj.requests[:-1])
    traj, squeezed = _answer_messages(window)
    assert traj.stop_reason == "answered" and traj.prediction == "Chief of Protocol"
    contents = [m.get("content") or "" for m in squeezed]
    assert any(DROPPED in c for c in contents)  # the oldest results were left out
    assert ContextWindow(window).room(squeezed) >= need  # and the answer fits
    # the plan request (the question) and the plan itself are still there, first after the system prompt
    assert whole[1] == squeezed[1] and ITEM.question in contents[1]
    assert squeezed[2]["role"] == "assistant" and contents[2] == PLAN
    # the latest results stay (only the oldest ones make room)
    assert contents[-1] == (whole[-1].get("content") or "")
    assert json.loads(json.dumps(squeezed))  # plain messages a provider accepts
