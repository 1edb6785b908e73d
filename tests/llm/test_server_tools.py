"""Native tool calls against a real llama.cpp server on loopback in function-calling mode.

``bcas serve --chat_format chatml-function-calling`` serves the shipped
SmolLM2: the openai backend sends the turn's functions, reads the server's ``tool_calls``
and sends the results back as ``tool`` messages; the BCAS loop in the ``tools`` format
runs on it with a search budget of 1 and never records a second search.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bcas.agent import SEARCH_TOOL, run_bcas
from bcas.agent.protocol import tool_definitions
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import load_dataset
from bcas.llm import load_model
from bcas.llm.base import ChatRequest
from bcas.llm.tool_calls import assistant_message, tool_message, tool_names
from bcas.testing.servers import LlamaCppServer

pytestmark = pytest.mark.server

TOOLS = tool_definitions(
    {SEARCH_TOOL: "search the document database with a short keyword query", "ready_to_answer": "stop searching"}, 64
)
QUESTION = [
    {"role": "system", "content": "You answer questions by searching a document database."},
    {
        "role": "user",
        "content": "Question: Who wrote Hamlet?\nCall exactly one function: search_database or ready_to_answer.",
    },
]


@pytest.fixture(scope="module")
def tool_server(smollm2_gguf: Path) -> Iterator[LlamaCppServer]:
    server = LlamaCppServer(
        smollm2_gguf, alias="smollm2", n_ctx=4096, extra_args=["--chat_format", "chatml-function-calling"]
    )
    server.start()
    yield server
    server.stop()


def _model(server: LlamaCppServer) -> Any:
    return load_model("openai", server.alias, base_url=server.base_url, cache=False)


def test_the_server_calls_a_function_and_sees_its_result(tool_server: LlamaCppServer) -> None:
    model = _model(tool_server)
    first = asyncio.run(model.chat(ChatRequest(QUESTION, max_tokens=64, tools=TOOLS)))
    # The function-calling handler makes the model pick a function under a grammar: one call, valid JSON.
    assert len(first.tool_calls) >= 1 and first.tool_calls[0].name in tool_names(TOOLS)
    assert isinstance(json.loads(first.tool_calls[0].arguments), dict)
    assert first.prompt_tokens > 0 and first.completion_tokens > 0  # the server's usage
    call = first.tool_calls[0]

    def follow_up(result: str) -> ChatRequest:
        history = [*QUESTION, assistant_message(first.text, [call]), tool_message(call, result)]
        return ChatRequest([*history, {"role": "user", "content": "Answer now."}], max_tokens=8)

    async def both() -> tuple[Any, Any]:
        return await model.chat(follow_up("")), await model.chat(follow_up("Hamlet " * 40))

    empty, full = asyncio.run(both())
    # The result's 40 words are in the prompt the model read (bcas.llm.llama_server shows tool results).
    assert full.prompt_tokens - empty.prompt_tokens >= 40


@pytest.mark.proof_stage  # a tools run against a real llama.cpp server, 15 s: CI's required proof stage runs it
def test_a_tools_run_with_one_search_never_records_a_second(tool_server: LlamaCppServer) -> None:
    from bcas.retrieval import build_retriever

    dataset = load_dataset("hotpotqa").subset(2, seed=0)
    retrieval = RetrievalConfig(mode="bm25", k=2)
    retriever = build_retriever(dataset.documents, retrieval, progress=False)
    budget = Budget(max_searches=1, max_total_tokens=600, per_turn_max_tokens=64)
    config = RunConfig(budget=budget, retrieval=retrieval, agent=AgentConfig(action_format="tools"))
    model = _model(tool_server)

    async def run_all() -> list[Any]:
        return [await run_bcas(item, model, retriever, config, keep_requests=True) for item in dataset.items]

    for traj in asyncio.run(run_all()):
        assert traj.stop_reason != "error", traj.error
        searches = [s for s in traj.steps if s.kind == "search" and s.flag is None]
        assert traj.searches_used == len(searches) <= 1
        actions = [r for r in traj.requests if r.tools]
        assert len(actions) == traj.action_turns >= 1
        for request in actions:
            assert "Budget:" in request.messages[-1]["content"]
        if traj.searches_used:  # the search spent the allowance: no action turn after it
            assert traj.stop_reason == "max_searches" and traj.steps[-1].kind == "answer"
        record = record_from_trajectory(traj, run_id="tools", dataset=dataset)
        assert record.searches_used <= 1 and record.config["agent"]["action_format"] == "tools"
        assert record.label.endswith("/tools")
