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
from bcas.llm.tool_calls import parse_tool_calls_text
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
