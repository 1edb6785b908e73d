"""The bridge (bcas.bridge): an outside agent's calls and searches on the item's ledger, its budgets
held in every dialect whatever the agent does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bcas.bridge import DIALECTS, Endpoints, open_bridge, refusal_message
from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.items import Item
from bcas.llm.base import ContextWindowError
from bcas.testing.scripted import FakeRetriever, ScriptedModel
from tests.support.skips import MCP_IMPORTABLE, skip_if_no_mcp

ITEM = Item(id="q1", question="Where was the author of Hamlet born?", answers=("Stratford",), documents=())
PASSAGES = [
    ("d1", "Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
    ("d2", "William Shakespeare", "William Shakespeare was born in Stratford-upon-Avon."),
    ("d3", "Paris", "Paris is the capital of France."),
]
SERVED = tuple(d for d in DIALECTS if d != "mcp" or MCP_IMPORTABLE)


def config(searches: int | None = 3, tokens: int = 2000, k: int = 2) -> RunConfig:
    return RunConfig(budget=Budget(max_searches=searches, max_total_tokens=tokens),
                     retrieval=RetrievalConfig(mode="bm25", k=k))  # fmt: skip


# -- one search in each dialect, as an agent makes it: (passages returned?, message) -------------------


def search_openai(client: httpx.Client, ep: Endpoints, query: str) -> str:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "search", "arguments": json.dumps({"query": query})},
    }
    reply = client.post(ep.tool_call_url, json=call)
    reply.raise_for_status()
    return str(reply.json()["content"])


def search_retriever(client: httpx.Client, ep: Endpoints, query: str) -> str:
    reply = client.post(ep.retrieve_url, json={"queries": [query], "topk": 3, "return_scores": True})
    reply.raise_for_status()
    return "\n".join(d["document"]["contents"] for d in reply.json()["result"][0])


async def mcp_searches(url: str, queries: list[str]) -> tuple[list[str], list[str]]:
    """The tool names the server lists and one search per query, through the official client session."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        listed = await session.list_tools()
        texts = []
        for q in queries:
            result = await session.call_tool("search", {"query": q})
            texts.append("".join(getattr(c, "text", "") for c in result.content))
        return [t.name for t in listed.tools], texts


def searching_agent(dialect: str, queries: list[str], chats: int = 0) -> Callable[[Endpoints], list[str]]:
    """An agent (run in a thread, as a callable agent is) that chats ``chats`` times, then searches each query."""

    def agent(ep: Endpoints) -> list[str]:
        with httpx.Client(timeout=30) as client:
            for _ in range(chats):
                client.post(f"{ep.openai_base_url}/chat/completions",
                            json={"model": ep.model, "messages": [{"role": "user", "content": "go on"}]})  # fmt: skip
            if dialect == "mcp":
                return asyncio.run(mcp_searches(ep.mcp_url, queries))[1]
            search = search_openai if dialect == "openai" else search_retriever
            return [search(client, ep, q) for q in queries]

    return agent


def run_agent(
    agent: Callable[[Endpoints], Any], cfg: RunConfig, model: Any = None, mcp: bool = False
) -> tuple[Any, Any]:
    async def main() -> tuple[Any, Any]:
        dialects = ("openai", "retriever", "mcp") if mcp else ("openai", "retriever")
        used = model or ScriptedModel(["thinking about it"])
        async with open_bridge(ITEM, used, FakeRetriever(PASSAGES, k=3), cfg, dialects) as (bridge, ep):
            out = await asyncio.to_thread(agent, ep)
        return bridge, out

    return asyncio.run(main())


# -- the done-when property ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", SERVED)
def test_ten_searches_under_a_budget_of_three_record_three_and_refuse_the_fourth(dialect: str) -> None:
    queries = [f"Hamlet author {i}" for i in range(10)]
    bridge, messages = run_agent(searching_agent(dialect, queries), config(searches=3), mcp=dialect == "mcp")
    searches = [s for s in bridge.ledger.steps if s.kind == "search"]
    assert [s.query for s in searches] == queries[:3]
    assert all(s.note == dialect for s in searches)
    assert all("Shakespeare" in m for m in messages[:3])  # passages came back while the budget lasted
    assert refusal_message() in messages[3]
    assert all("Shakespeare" not in m for m in messages[3:])  # never a passage past the budget
    assert [r["query"] for r in bridge.refused_searches] == queries[3:]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(min_value=0, max_value=4),
    tries=st.integers(min_value=0, max_value=7),
    chats=st.integers(min_value=0, max_value=2),
    dialect=st.sampled_from(SERVED),
)
def test_searches_never_pass_the_budget_in_any_dialect(budget: int, tries: int, chats: int, dialect: str) -> None:
    """Whatever the agent does (how often it searches, in which dialect, between how many model calls),
    the ledger holds min(tries, budget) searches and every further try got the refusal, no passage."""
    queries = [f"Shakespeare {i}" for i in range(tries)]
    bridge, messages = run_agent(
        searching_agent(dialect, queries, chats), config(searches=budget), mcp=dialect == "mcp"
    )
    assert bridge.ledger.searches_used == min(tries, budget)
    assert len(bridge.refused_searches) == max(0, tries - budget)
    assert [refusal_message() in m for m in messages] == [i >= budget for i in range(tries)]
    assert sum(1 for s in bridge.ledger.steps if s.kind == "generate") == chats


# -- the chat endpoint: the ledger and the token budget ---------------------------------------------------------


def chat(ep: Endpoints, max_tokens: int | None = None, stream: bool = False) -> httpx.Response:
    body: dict[str, Any] = {
        "model": ep.model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    if max_tokens:
        body["max_tokens"] = max_tokens
    if stream:
        body["stream"] = True
    return httpx.post(f"{ep.openai_base_url}/chat/completions", json=body, timeout=30)


def test_every_call_is_a_ledger_step_with_the_usage_the_agent_was_told() -> None:
    def agent(ep: Endpoints) -> list[dict[str, Any]]:
        return [chat(ep, max_tokens=5).json(), chat(ep).json()]

    bridge, replies = run_agent(agent, config(tokens=100), ScriptedModel(["one two three four five six seven"]))
    steps = [s for s in bridge.ledger.steps if s.kind == "generate"]
    assert [s.tokens_out for s in steps] == [r["usage"]["completion_tokens"] for r in replies] == [5, 7]
    assert [s.tokens_in for s in steps] == [r["usage"]["prompt_tokens"] for r in replies]
    assert replies[0]["choices"][0]["finish_reason"] == "length"  # capped at the agent's own max_tokens


def test_a_call_is_capped_at_the_tokens_left_then_refused_once_none_are() -> None:
    def agent(ep: Endpoints) -> list[httpx.Response]:
        return [chat(ep) for _ in range(4)]

    model = ScriptedModel(["a b c d e f g h i j"])  # ten tokens a reply
    bridge, replies = run_agent(agent, config(tokens=25), model)
    assert [r.status_code for r in replies] == [200, 200, 200, 400]
    assert [r.json()["usage"]["completion_tokens"] for r in replies[:3]] == [10, 10, 5]  # the third capped
    assert replies[3].json()["error"]["code"] == "max_total_tokens"
    assert bridge.ledger.tokens_out == 25 and bridge.refused_calls == 1
    assert len(model.requests) == 3  # the refused call never reached the model


def test_a_streamed_call_is_one_chunk_then_the_finish_with_its_usage() -> None:
    def agent(ep: Endpoints) -> str:
        return chat(ep, stream=True).text

    bridge, text = run_agent(agent, config(), ScriptedModel(["streamed reply"]))
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    assert events[0]["choices"][0]["delta"]["content"] == "streamed reply"
    assert events[-1]["usage"]["completion_tokens"] == bridge.ledger.tokens_out == 2
    assert text.rstrip().endswith("data: [DONE]")


def test_the_tool_schema_says_the_searches_left() -> None:
    def agent(ep: Endpoints) -> list[dict[str, Any]]:
        first = httpx.get(ep.tools_url).json()
        search_openai(httpx.Client(), ep, "Hamlet")
        return [first, httpx.get(ep.tools_url).json()]

    _, (before, after) = run_agent(agent, config(searches=2))
    assert (before["searches_left"], after["searches_left"]) == (2, 1)
    assert "Searches left: 1." in after["tools"][0]["function"]["description"]
    assert after["tools"][0]["function"]["parameters"]["required"] == ["query"]


def test_a_retriever_api_reply_has_search_r1s_shape_and_honours_topk_up_to_the_configured_k() -> None:
    def agent(ep: Endpoints) -> list[Any]:
        scored = httpx.post(ep.retrieve_url, json={"queries": ["Shakespeare born"], "topk": 1, "return_scores": True})
        plain = httpx.post(ep.retrieve_url, json={"queries": ["Shakespeare born"], "topk": 50})
        return [scored.json(), plain.json()]

    _, (scored, plain) = run_agent(agent, config(k=2))
    (hits,) = scored["result"]
    assert len(hits) == 1 and set(hits[0]) == {"document", "score"}
    assert hits[0]["document"]["contents"].split("\n")[0] == "William Shakespeare"  # title, newline, text
    assert len(plain["result"][0]) == 2 and set(plain["result"][0][0]) == {"id", "contents"}
    assert plain["searches_left"] == 1


def test_the_bridge_binds_loopback_only() -> None:
    def agent(ep: Endpoints) -> list[str]:
        return [ep.openai_base_url, ep.retrieve_url, ep.mcp_url]

    _, urls = run_agent(agent, config(), mcp=MCP_IMPORTABLE)
    assert all(u.startswith("http://127.0.0.1:") for u in urls if u)


@skip_if_no_mcp
def test_the_mcp_server_lists_and_calls_the_search_tool_through_the_official_client_session() -> None:
    async def listed(url: str) -> tuple[list[Any], str]:
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            result = await session.call_tool("search", {"query": "Shakespeare born"})
            return tools, "".join(getattr(c, "text", "") for c in result.content)

    def agent(ep: Endpoints) -> tuple[list[Any], str]:
        return asyncio.run(listed(ep.mcp_url))

    bridge, (tools, text) = run_agent(agent, config(searches=2), mcp=True)
    assert [t.name for t in tools] == ["search"]
    assert tools[0].input_schema["required"] == ["query"]
    assert "[1] William Shakespeare: William Shakespeare was born in Stratford-upon-Avon." in text
    assert "(searches left: 1)" in text
    assert [(s.query, s.note) for s in bridge.ledger.steps] == [("Shakespeare born", "mcp")]


# -- the context window: no call asks the backend for more than its window ----------------------------------


class WindowedModel(ScriptedModel):
    """A backend with a small window that counts the prompt as a tool-calling backend renders it: the
    messages, the tools' schemas and the instructions around them (``density`` tokens a character); a
    prompt that fills the window is its "context exceeded" error, as llama.cpp's is."""

    def __init__(self, window: int, density: float = 1 / 3) -> None:
        super().__init__(["a b c d e f g h i j"])
        self.context_window, self.density, self.asked = window, density, []

    def backend_prompt(self, request: Any) -> int:
        text = sum(len(m.get("content") or "") for m in request.messages)
        tools = sum(len(json.dumps(t)) for t in request.tools or ())
        return int((text + tools) * self.density) + (100 if request.tools else 0)

    async def chat(self, request: Any) -> Any:
        prompt = self.backend_prompt(request)
        if prompt >= self.context_window:
            raise ContextWindowError(f"Requested tokens ({prompt}) exceed context window of {self.context_window}")
        self.asked.append(prompt + request.max_tokens)
        self.fixed_prompt_tokens = prompt
        return await super().chat(request)


def windowed_chat(ep: Endpoints, content: str, tools: list[dict[str, Any]] | None = None) -> httpx.Response:
    body: dict[str, Any] = {"model": ep.model, "messages": [{"role": "user", "content": content}]}
    if tools:
        body["tools"] = tools
    return httpx.post(f"{ep.openai_base_url}/chat/completions", json=body, timeout=30)


BIG_TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look it up. " * 125,
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}  # fmt: skip


def test_a_call_offering_tools_asks_no_more_than_the_window_leaves_after_the_prompt_the_backend_renders() -> None:
    model = WindowedModel(window=1024)

    def agent(ep: Endpoints) -> list[httpx.Response]:
        return [windowed_chat(ep, "hi", [BIG_TOOL]), windowed_chat(ep, "hi again " * 20, [BIG_TOOL])]

    bridge, replies = run_agent(agent, config(tokens=5000), model)
    assert all(asked <= 1024 for asked in model.asked)  # prompt + max_tokens, as the backend counts the prompt
    assert [r.status_code for r in replies] == [200, 200] and len(model.asked) == 2
    assert [s.tokens_in for s in bridge.ledger.steps] == [r.json()["usage"]["prompt_tokens"] for r in replies]


@pytest.mark.parametrize("chars", [1100, 4000])  # fills the window by the backend's count / by the estimate too
def test_a_prompt_that_alone_fills_the_window_is_refused_as_a_spent_budget_is_not_a_backend_failure(
    chars: int,
) -> None:
    model = WindowedModel(window=1024, density=1.0)  # a denser tokenizer than the bridge's estimate assumes

    def agent(ep: Endpoints) -> httpx.Response:
        return windowed_chat(ep, "7" * chars)

    bridge, reply = run_agent(agent, config(tokens=5000), model)
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "context_window"
    assert bridge.refused_calls == 1
    assert bridge.ledger.steps == [] and bridge.ledger.tokens_out == 0  # nothing was generated: nothing to count
    assert model.asked == []


def test_an_agents_calls_and_searches_are_timed_on_the_items_meter_like_the_loops() -> None:
    # The real openai backend against a loopback server of known service time: the bridge's
    # threads run each call and search in the item's context, so the executor's meter (opened
    # around the item, as bcas.records.executor does) counts them, as it counts the loop's.
    from bcas.llm.openai_compat import OpenAICompatModel
    from bcas.testing.slotted import SlottedServer
    from bcas.timing import timing

    def agent(ep: Endpoints) -> None:
        with httpx.Client(timeout=30) as client:
            search_openai(client, ep, "Shakespeare")
            search_retriever(client, ep, "Hamlet")
        chat(ep, max_tokens=8).raise_for_status()

    async def main() -> Any:
        with SlottedServer(slots=2, service_s=0.05) as server:
            model = OpenAICompatModel("slotted", base_url=server.base_url)
            with timing() as meter:
                async with open_bridge(
                    ITEM, model, FakeRetriever(PASSAGES, k=3), config(), ("openai", "retriever")
                ) as (
                    _,
                    ep,
                ):
                    await asyncio.to_thread(agent, ep)
            return meter

    meter = asyncio.run(main())
    assert meter.searches == 2 and len(meter.search_times) == 2
    assert meter.model_calls == 1 and meter.model_s >= 0.05  # the server held the call 0.05 s
