"""A reply written as text by a model served in process is read as calls only when it is calls.

``parse_tool_calls_text`` serves backends without a server-side parser (vLLM's engine,
:mod:`bcas.llm.vllm_engine`).  A malformed reply must reach the BCAS loop as text, where
it is one invalid turn (BCAS §3.4: the correction and the invalid-turn limit), never as
calls that make the item fail.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from bcas.agent import run_bcas
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.llm.base import ChatRequest, ChatResult
from bcas.llm.tool_calls import calls_from_message, parse_tool_calls_text
from bcas.testing.scripted import FakeRetriever, ScriptedModel

SEARCH = {"name": "search_database", "arguments": {"query": "capital of France"}}
MALFORMED = [
    json.dumps([SEARCH, {"query": "no name here"}]),  # one element without a name
    json.dumps([SEARCH, "search_database"]),  # one element that is not an object
    json.dumps([{"arguments": {"query": "x"}}]),  # a list of one unnamed element
]


@pytest.mark.parametrize("reply", MALFORMED)
def test_a_json_list_with_an_unnamed_element_is_text_not_calls(reply: str) -> None:
    assert parse_tool_calls_text(reply) == (reply, ())


class TextCallingModel(ScriptedModel):
    """Writes its calls as text, read back the way the in-process vLLM backend reads them."""

    async def chat(self, request: ChatRequest) -> ChatResult:
        result = await super().chat(request)
        if not request.tools:
            return result
        text, calls = parse_tool_calls_text(result.text)
        return ChatResult(text, result.prompt_tokens, result.completion_tokens, result.finish_reason, 0.0,
                          tool_calls=calls)  # fmt: skip


@pytest.mark.parametrize("reply", MALFORMED)
def test_a_malformed_call_list_is_an_invalid_turn_not_an_errored_item(reply: str) -> None:
    item = Item("q1", "What is the capital of France?", ("Paris",), (Document("d0", "Paris", "Paris is the capital."),))
    script = [reply, json.dumps(SEARCH), json.dumps({"name": "ready_to_answer", "arguments": {}}), "Paris"]
    config = RunConfig(
        budget=Budget(max_searches=2, max_total_tokens=2000),
        retrieval=RetrievalConfig(k=1),
        agent=AgentConfig(action_format="tools"),
    )
    traj = asyncio.run(
        run_bcas(item, TextCallingModel(script), FakeRetriever([("d0", "Paris", "Paris is the capital.")], k=1), config)
    )
    assert traj.error is None and traj.stop_reason != "error", traj.error
    assert traj.steps[0].kind == "invalid" and traj.invalid_turns == 1
    assert traj.prediction == "Paris"


def test_a_server_s_message_yields_its_calls_and_skips_what_is_not_a_call() -> None:
    """Whatever else a server puts in a message, its well-formed calls are read and nothing raises."""
    search = {"id": "c1", "type": "function", "function": {"name": "search_database", "arguments": '{"query": "x"}'}}
    (call,) = calls_from_message({"tool_calls": [None, "search_database", search]})
    assert (call.id, call.name, call.arguments) == ("c1", "search_database", '{"query": "x"}')
    # an empty tool_calls list beside a legacy function_call: the legacy call is the reply's call
    legacy = {"tool_calls": [], "function_call": {"name": "ready_to_answer", "arguments": "{}"}}
    assert [c.name for c in calls_from_message(legacy)] == ["ready_to_answer"]
    # a function_call without a name is no call: the content is the reply
    assert calls_from_message({"content": "Paris", "function_call": {"name": None, "arguments": ""}}) == ()


@pytest.mark.parametrize("body", ['["search_database", {"query": "x"}]', '"search_database"', "42"])
def test_a_tool_call_block_that_is_not_an_object_is_an_invalid_call(body: str) -> None:
    """A ``<tool_call>`` block holding JSON other than an object is one call without a name (an invalid turn)."""
    content, calls = parse_tool_calls_text(f"<tool_call>{body}</tool_call>")
    assert content == "" and len(calls) == 1
    assert (calls[0].name, calls[0].arguments) == ("", body)
