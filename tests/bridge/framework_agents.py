"""Agents written on real frameworks, as a user writes them, answering through the bridge.

Each is a callable agent (``BridgedAgent(callable="tests.bridge.framework_agents:<name>")``):
given the question and the bridge's endpoints, it points its framework's OpenAI-compatible
model at the bridge's chat endpoint and gives it one tool, ``search``, that posts a tool call
to the bridge's tool-call endpoint.  smolagents runs its ``ToolCallingAgent`` (never its
``CodeAgent``: the bridge executes nothing a model writes, and neither do these agents); the
OpenAI Agents SDK runs an ``Agent`` on the Chat Completions model, tracing off (nothing
leaves the machine).
"""

from __future__ import annotations

from typing import Any

import httpx

from bcas.bridge import Endpoints

INSTRUCTIONS = "Answer the question with a short phrase. Use the search tool to find facts first."
MAX_TOKENS = 64  # per call: the 135M model rambles otherwise
CLIENT_TIMEOUT_S = 3000.0  # a call on a loaded CPU can outlast the OpenAI client's 600 s; no retry doubles it
MAX_STEPS = 2  # a search, then the answer (each framework asks once more without tools past it)


def search_through(endpoints: Endpoints, query: str) -> str:
    """One call of the bridge's search tool (the OpenAI dialect): the tool message's content."""
    call = {"id": "call", "type": "function", "function": {"name": "search", "arguments": {"query": query}}}
    reply = httpx.post(endpoints.tool_call_url, json=call, timeout=600)
    reply.raise_for_status()
    return str(reply.json()["content"])


def smolagents_agent(question: str, endpoints: Endpoints) -> str:
    """smolagents' ``ToolCallingAgent`` on the bridge (``OpenAIServerModel``)."""
    from smolagents import OpenAIServerModel, Tool, ToolCallingAgent

    class Search(Tool):  # type: ignore[misc]
        name = "search"
        description = "Search the document collection for passages about a query."
        inputs = {"query": {"type": "string", "description": "What to search for."}}
        output_type = "string"

        def forward(self, query: str) -> str:
            return search_through(endpoints, query)

    model = OpenAIServerModel(
        model_id=endpoints.model,
        api_base=endpoints.openai_base_url,
        api_key=endpoints.api_key,
        max_tokens=MAX_TOKENS,
        client_kwargs={"timeout": CLIENT_TIMEOUT_S, "max_retries": 0},
    )
    agent = ToolCallingAgent(tools=[Search()], model=model, max_steps=MAX_STEPS, verbosity_level=0)
    return str(agent.run(question))


def openai_agents_agent(question: str, endpoints: Endpoints) -> str:
    """The OpenAI Agents SDK's ``Agent`` on the bridge (``OpenAIChatCompletionsModel``); past its turns, its
    ``max_turns`` error handler asks the model once more, without tools, for the answer."""
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(
        base_url=endpoints.openai_base_url, api_key=endpoints.api_key, timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    model = OpenAIChatCompletionsModel(model=endpoints.model, openai_client=client)
    settings = ModelSettings(max_tokens=MAX_TOKENS, temperature=0.0)

    @function_tool
    def search(query: str) -> str:
        """Search the document collection for passages about a query."""
        return search_through(endpoints, query)

    agent = Agent(name="qa", instructions=INSTRUCTIONS, tools=[search], model=model, model_settings=settings)
    answering = Agent(name="qa", instructions="Answer the question now with a short phrase.", model=model,
                      model_settings=settings)  # fmt: skip

    async def answer_now(data: Any) -> str:
        result = await Runner.run(answering, data.run_data.history, max_turns=1)
        return str(result.final_output)

    result = Runner.run_sync(agent, question, max_turns=MAX_STEPS, error_handlers={"max_turns": answer_now})
    return str(result.final_output)
