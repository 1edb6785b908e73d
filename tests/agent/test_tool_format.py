"""The ``tools`` action format: native function calls as the BCAS loop's actions (BCAS §3.1, §3.4).

Scripted models drive the control flow; the properties state the format's promises for
any budget and any script: a ``tools`` turn never calls ``search_database`` once the
search allowance is spent, and searches and tokens are counted the same way in every
format (a search is a search that ran; tokens are the provider's usage).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bcas.agent import SEARCH_TOOL, STOP_REASONS, run_bcas
from bcas.agent.budget import turn_bound
from bcas.agent.loop import Trajectory
from bcas.agent.protocol import ActionParseError, parse_tool_call, tool_definitions
from bcas.agent.records import record_from_trajectory
from bcas.config import ACTION_FORMATS, GUARDED_LOOP, AgentConfig, Budget, ConfigError, RetrievalConfig, RunConfig
from bcas.llm.base import ChatRequest, ToolCall
from bcas.llm.tool_calls import tool_names
from bcas.testing.mock import MockModel
from bcas.testing.scripted import Calls, FakeRetriever, ScriptedModel
from tests.agent.test_loop import ITEM, PASSAGES, answer


def call_search(query: str, text: str = "") -> Calls:
    return Calls(((SEARCH_TOOL, json.dumps({"query": query})),), text)


def call_ready() -> Calls:
    return Calls((("ready_to_answer", "{}"),))


def run(model: Any, budget: Budget | None = None, **agent: Any) -> Trajectory:
    config = RunConfig(
        budget=budget or Budget(max_searches=3, max_total_tokens=2000),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(action_format="tools", **agent),
    )
    return asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=2), config, keep_requests=True))


# -- the protocol ------------------------------------------------------------------------


def test_function_definitions_carry_the_descriptions_and_a_bounded_query() -> None:
    defs = tool_definitions(
        {SEARCH_TOOL: "- search_database: search the database. Uses one search.", "ready_to_answer": "stop."}, 40
    )
    search, ready = (d["function"] for d in defs)
    assert search["name"] == SEARCH_TOOL and search["description"] == "search the database. Uses one search."
    assert search["parameters"]["required"] == ["query"]
    assert search["parameters"]["properties"]["query"]["maxLength"] == 12  # (40 - 24) * 2 * 0.4 (field_caps)
    assert tool_definitions({SEARCH_TOOL: "x"})[0]["function"]["parameters"]["properties"]["query"]["maxLength"] == 256
    assert ready["parameters"]["properties"] == {}
    with pytest.raises(ValueError, match="non-empty subset"):
        tool_definitions({"delete_everything": "x"})


@pytest.mark.parametrize(
    ("calls", "reason"),
    [
        ((), "called no function"),
        ((ToolCall("a", SEARCH_TOOL, '{"query": "x"}'), ToolCall("b", "ready_to_answer", "{}")), "made 2 function"),
        ((ToolCall("a", "search", '{"query": "x"}'),), "there is no function 'search'"),
        ((ToolCall("a", SEARCH_TOOL, '{"query": "x"'),), "not valid JSON"),
        ((ToolCall("a", SEARCH_TOOL, '["x"]'),), "must be a JSON object"),
        ((ToolCall("a", SEARCH_TOOL, '{"q": "x"}'),), 'non-empty "query"'),
        ((ToolCall("a", SEARCH_TOOL, '{"query": 3}'),), 'non-empty "query"'),
        ((ToolCall("a", SEARCH_TOOL, '{"query": "x"}'),), "not available this turn"),
    ],
)
def test_an_unusable_call_is_refused_with_its_reason(calls: tuple[ToolCall, ...], reason: str) -> None:
    offered = ["ready_to_answer"] if "available" in reason else [SEARCH_TOOL, "ready_to_answer"]
    with pytest.raises(ActionParseError, match=reason):
        parse_tool_call(calls, offered)


def test_one_good_call_is_the_action() -> None:
    action = parse_tool_call([ToolCall("a", SEARCH_TOOL, '{"query": " Shirley Temple "}')], [SEARCH_TOOL], "why")
    assert (action.tool, action.query, action.thought) == (SEARCH_TOOL, "Shirley Temple", "why")
    assert parse_tool_call([ToolCall("a", "ready_to_answer", "")], ["ready_to_answer"]).tool == "ready_to_answer"
    assert "tools" in ACTION_FORMATS and AgentConfig(action_format="tools").action_format == "tools"
    with pytest.raises(ConfigError, match="action_format"):
        AgentConfig(action_format="xml")


# -- the loop ------------------------------------------------------------------------------


def test_search_then_answer_with_results_as_tool_messages() -> None:
    model = ScriptedModel([call_search("Kiss and Tell", "find the film"), call_ready(), answer("Chief of Protocol")])
    traj = run(model)
    assert traj.stop_reason == "answered" and traj.prediction == "Chief of Protocol"
    assert [s.kind for s in traj.steps] == ["search", "ready", "answer"]
    assert traj.steps[0].query == "Kiss and Tell" and traj.steps[0].note == "find the film"
    assert traj.steps[0].output == 'find the film\nsearch_database({"query": "Kiss and Tell"})'
    first, second, final = traj.requests
    # every action turn sends the offered tools as functions, and the budget line
    assert tool_names(first.tools) == [SEARCH_TOOL, "ready_to_answer"] and final.tools is None
    assert "Budget: 3 of 3 searches left." in first.messages[-1]["content"]
    assert "Budget: 2 of 3 searches left." in second.messages[-1]["content"]
    # the call and its result come back as the chat API carries them, with our call id
    call, result = second.messages[2], second.messages[3]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == SEARCH_TOOL
    assert result == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": result["content"]}
    assert result["content"].startswith('Search results for "Kiss and Tell"') and "(id p1)" in result["content"]
    assert "Search results" not in second.messages[-1]["content"]  # not repeated in the user turn
    ready_result = final.messages[6]
    assert ready_result["role"] == "tool" and ready_result["tool_call_id"] == final.messages[5]["tool_calls"][0]["id"]


@pytest.mark.parametrize(
    ("reply", "reason", "told_as"),
    [
        ("I think I should search", "called no function", "user"),
        (Calls(((SEARCH_TOOL, '{"query": "a"}'), (SEARCH_TOOL, '{"query": "b"}'))), "made 2 function calls", "tool"),
        (Calls((("lookup", '{"query": "a"}'),)), "there is no function 'lookup'", "tool"),
        (Calls(((SEARCH_TOOL, '{"query": '),)), "not valid JSON", "tool"),
    ],
)
def test_invalid_turns_are_told_to_the_model(reply: Any, reason: str, told_as: str) -> None:
    model = ScriptedModel([reply, call_ready(), answer("x")])
    traj = run(model)
    assert traj.invalid_turns == 1 and traj.steps[0].kind == "invalid" and reason in (traj.steps[0].note or "")
    assert traj.searches_used == 0
    after = traj.requests[1].messages
    if told_as == "user":  # no call to answer: the correction opens the next user turn
        assert after[-1]["role"] == "user" and after[-1]["content"].startswith("Your last reply could not be used")
    else:  # every call is answered by a tool message carrying the correction
        calls = after[2]["tool_calls"]
        results = [m for m in after if m["role"] == "tool"]
        assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
        assert all(reason in r["content"] for r in results)
        assert after[-1]["content"].startswith("Budget:")


def test_a_repeated_query_is_not_run_again() -> None:
    model = ScriptedModel([call_search("Shirley Temple"), call_search("shirley  temple"), call_ready(), answer("x")])
    traj = run(model, repeated_query="invalid")
    assert traj.searches_used == 1 and traj.repeated_queries == 1
    assert "You already searched" in traj.requests[2].messages[-2]["content"]


def test_a_model_without_tool_calling_ends_with_a_clear_error() -> None:
    traj = run(ScriptedModel([call_ready()], supports_tools=False))
    assert traj.stop_reason == "error" and "needs native tool calling" in (traj.error or "")
    assert traj.llm_calls == 0


@pytest.mark.parametrize("variant", ["gold", "verbose", "random"])
def test_the_mock_calls_tools_within_its_budgets(variant: str) -> None:
    model = MockModel(variant)
    model.register_items([ITEM])
    budget = Budget(max_searches=2, max_total_tokens=600)
    traj = run(model, budget)
    assert traj.stop_reason in ("answered", "max_searches", "max_total_tokens")
    assert traj.invalid_turns == 0 and 1 <= traj.searches_used <= 2
    assert traj.tokens_out <= budget.max_total_tokens + budget.forced_answer_tokens
    if variant == "gold":
        assert traj.prediction == "Chief of Protocol"


# -- properties ----------------------------------------------------------------------------

WORDS = ["Shirley", "Temple", "Kiss", "Tell", "radio", "film", "protocol"]
tool_replies = st.one_of(
    st.tuples(st.just("search"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)),
    st.tuples(st.just("fresh"), st.just("")),
    st.tuples(st.just("ready"), st.just("")),
    st.tuples(st.just("several"), st.sampled_from(WORDS)),
    st.tuples(st.just("unknown"), st.sampled_from(["search", "answer", "lookup"])),
    st.tuples(st.just("bad_args"), st.sampled_from(['{"query": ', "[1]", '{"q": "x"}', '{"query": ""}'])),
    st.tuples(st.just("no_call"), st.text(max_size=40)),
    st.tuples(st.just("long_call"), st.integers(50, 400)),
    st.tuples(st.just("answer"), st.sampled_from(["Chief of Protocol", "", "x " * 200])),
)


def tool_reply(kind: str, payload: Any, index: int, request: ChatRequest) -> str | Calls:
    if not request.tools:  # plan, reflection and answer turns are text
        return answer(payload) if kind == "answer" else f"note {index}"
    if kind == "search":
        return call_search(payload)
    if kind == "fresh":
        return call_search(f"fresh query {index}")
    if kind == "ready":
        return call_ready()
    if kind == "several":
        return Calls(((SEARCH_TOOL, json.dumps({"query": payload})), ("ready_to_answer", "{}")))
    if kind == "unknown":
        return Calls(((payload, '{"query": "x"}'),))
    if kind == "bad_args":
        return Calls(((SEARCH_TOOL, payload),))
    if kind == "long_call":
        return call_search("word " * payload)
    return str(payload)


budgets = st.builds(
    Budget,
    max_searches=st.one_of(st.none(), st.integers(0, 3)),
    max_total_tokens=st.integers(1, 2000),
    per_turn_max_tokens=st.one_of(st.none(), st.integers(1, 300)),
    forced_answer_tokens=st.integers(1, 64),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(budget=Budget(max_searches=1, max_total_tokens=2000), script=[("fresh", "")] * 3, planning=False)
@given(budget=budgets, script=st.lists(tool_replies, min_size=1, max_size=20), planning=st.booleans())
def test_a_tools_turn_never_searches_past_the_budget(
    budget: Budget, script: list[tuple[str, Any]], planning: bool
) -> None:
    retriever = FakeRetriever(PASSAGES, k=2)
    searches_before: list[int] = []

    def reply(request: ChatRequest, index: int) -> str | Calls:
        searches_before.append(len(retriever.calls))
        kind, payload = script[index % len(script)]
        return tool_reply(kind, payload, index, request)

    model = ScriptedModel(reply)
    # the guarded invalid-turn limit keeps cyclic scripts of unusable (even empty) replies short
    agent = AgentConfig(action_format="tools", planning=planning, max_invalid_turns=3)
    config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2), agent=agent)
    traj = asyncio.run(run_bcas(ITEM, model, retriever, config))

    assert traj.stop_reason in STOP_REASONS and traj.stop_reason != "error", traj.error
    assert traj.action_turns <= turn_bound(budget, agent)
    # the search allowance holds, every counted search ran once, and no second search is ever recorded
    searches = [s for s in traj.steps if s.kind == "search" and s.flag is None]
    assert traj.searches_used == len(searches) == len(retriever.calls)
    if budget.max_searches is not None:
        assert traj.searches_used <= budget.max_searches
    # once the allowance is spent, search_database is no longer a function the model may call
    for request, used in zip(model.requests, searches_before, strict=True):
        if budget.max_searches is not None and used >= budget.max_searches:
            assert SEARCH_TOOL not in tool_names(request.tools)
        if request.tools:
            assert "Budget:" in request.messages[-1]["content"]  # the budget line, every action turn
    # every call made is answered by a tool message before the conversation goes on
    for request in model.requests:
        made = [c["id"] for m in request.messages for c in m.get("tool_calls") or ()]
        answered = [m["tool_call_id"] for m in request.messages if m["role"] == "tool"]
        assert made == answered
    assert traj.tokens_out == model.completion_tokens_total
    assert traj.tokens_out <= budget.max_total_tokens + budget.forced_answer_tokens
    record = record_from_trajectory(traj, run_id="prop", dataset_name="toy", dataset_hash="h")
    json.dumps(record.to_dict(), allow_nan=False)
    assert record.searches_used == traj.searches_used and record.tokens_out == traj.tokens_out


# One logical action per turn, written in each format.
actions = st.lists(
    st.one_of(
        st.tuples(st.just("search"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)),
        st.tuples(st.just("ready"), st.just("")),
        st.tuples(st.just("garbage"), st.just("")),
    ),
    min_size=1,
    max_size=8,
)


def written(action: tuple[str, str], fmt: str) -> str | Calls:
    kind, query = action
    if kind == "garbage":
        return "no idea"
    tool = SEARCH_TOOL if kind == "search" else "ready_to_answer"
    if fmt == "json":
        return json.dumps({"thought": "t", "action": tool, "query": query})
    if fmt == "text":
        return f"Thought: t\nAction: {tool}\nQuery: {query}"
    return call_search(query, "t") if kind == "search" else Calls(((tool, "{}"),), "t")


@settings(max_examples=100, deadline=None)
@given(script=actions, searches=st.one_of(st.none(), st.integers(0, 3)), planning=st.booleans())
def test_searches_and_tokens_are_counted_alike_in_every_format(
    script: list[tuple[str, str]], searches: int | None, planning: bool
) -> None:
    budget = Budget(max_searches=searches, max_total_tokens=4000)
    outcomes = {}
    for fmt in ACTION_FORMATS:
        retriever = FakeRetriever(PASSAGES, k=2)
        turns: list[int] = []

        def reply(request: ChatRequest, index: int, fmt: str = fmt, turns: list[int] = turns) -> str | Calls:
            acting = request.tools is not None or "Actions you can take now" in request.messages[-1]["content"]
            if not acting:
                return answer("Chief of Protocol") if "answer the question now" in str(request.messages) else "plan"
            turns.append(index)
            return written(script[(len(turns) - 1) % len(script)], fmt)

        model = ScriptedModel(reply)
        # the guarded rules bound the turns of a cyclic script (the paper's loop would run it to 4,000 tokens)
        agent = AgentConfig(action_format=fmt, planning=planning, **GUARDED_LOOP)
        config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2), agent=agent)
        traj = asyncio.run(run_bcas(ITEM, model, retriever, config))
        # tokens: the provider's usage, every call, per step and in total
        assert traj.tokens_out == model.completion_tokens_total and traj.tokens_in == model.prompt_tokens_total
        assert traj.llm_calls == len(model.requests)
        # searches: the searches that ran
        assert traj.searches_used == len(retriever.calls)
        outcomes[fmt] = (
            traj.stop_reason,
            traj.searches_used,
            [q for q, _ in retriever.calls],
            traj.invalid_turns,
            traj.repeated_queries,
            traj.action_turns,
            [s.kind for s in traj.steps],
        )
    assert outcomes["json"] == outcomes["text"] == outcomes["tools"], outcomes
