"""Reasoning models: ``<think>`` blocks and ``reasoning_content`` are kept apart from the
action, charged to the token budget as the provider reports them, recorded, and never
parsed as an action (BCAS §3.3: the token budget counts every completion token)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bcas.agent import run_bcas
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.llm.base import ChatRequest, ChatResult, split_reasoning
from bcas.llm.cache import GenerationCache
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.llm.vllm_engine import reasoning_token_count
from bcas.testing.scripted import FakeRetriever, ScriptedModel, count_tokens
from bcas.testing.servers import FaultServer

PASSAGES = [
    ("d1", "Shirley Temple", "Shirley Temple Black served as Chief of Protocol of the United States."),
    ("d2", "Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 film starring Shirley Temple as Corliss Archer."),
]
ITEM = Item(
    id="q1",
    question="What position did the actress who played Corliss Archer in Kiss and Tell hold?",
    answers=("Chief of Protocol",),
    documents=tuple(Document(d, t, x) for d, t, x in PASSAGES),
)
# A reasoning trace that spells out an action of its own: it must never be taken.
DECOY = '{"thought": "done", "action": "ready_to_answer", "query": ""}'
SEARCH = json.dumps({"thought": "find her", "action": "search_database", "query": "Shirley Temple"})
READY = json.dumps({"thought": "enough", "action": "ready_to_answer", "query": ""})
ANSWER = json.dumps({"answer": "Chief of Protocol"})


def config(tokens: int = 2000, searches: int | None = 2) -> RunConfig:
    budget = Budget(max_searches=searches, max_total_tokens=tokens)
    return RunConfig(budget=budget, retrieval=RetrievalConfig(k=1), agent=AgentConfig(max_invalid_turns=3))


@pytest.mark.parametrize(
    ("text", "reasoning", "reply"),
    [
        ("plain reply", "", "plain reply"),
        (f"<think>I could say {DECOY}</think>\n{SEARCH}", f"I could say {DECOY}", SEARCH),
        (f"opened by the template</think>{SEARCH}", "opened by the template", SEARCH),
        ("<think>cut off while thinking", "cut off while thinking", ""),
        ("<think>a</think>x<think>b</think>y", "a\nb", "xy"),
    ],
)
def test_split_reasoning(text: str, reasoning: str, reply: str) -> None:
    assert split_reasoning(text) == (reasoning, reply)


def test_inline_think_is_budgeted_recorded_and_never_an_action() -> None:
    think = f"<think>{'let me think ' * 20}maybe {DECOY}</think>"
    model = ScriptedModel([think + SEARCH, think + READY, ANSWER])
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=1), config(), keep_requests=True))
    assert [s.kind for s in traj.steps] == ["search", "ready", "answer"]  # the decoy was not taken
    first = traj.steps[0]
    assert first.output == SEARCH and "<think>" not in first.output
    assert DECOY in first.reasoning and first.query == "Shirley Temple"
    # the reasoning counts against the budget (this provider reports it inside completion_tokens)
    assert first.tokens_out == count_tokens(think + SEARCH) > count_tokens(SEARCH)
    assert traj.tokens_out == model.completion_tokens_total
    # the history sent back holds the action only
    assert all("<think>" not in m["content"] and "let me think" not in m["content"] for m in traj.requests[-1].messages)
    record = record_from_trajectory(traj, run_id="r", dataset_name="toy", dataset_hash="h")
    assert DECOY in record.steps[0]["reasoning"] and record.tokens_reasoning == 0  # none reported
    assert record.prediction == "Chief of Protocol"


def test_a_reply_that_only_thinks_is_an_invalid_turn() -> None:
    model = ScriptedModel([f"<think>I will answer: {DECOY}", ANSWER])
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=1), config()))
    assert traj.steps[0].kind == "invalid" and DECOY in traj.steps[0].reasoning
    assert traj.searches_used == 0 and traj.stop_reason == "max_invalid_turns"


def test_thinking_spends_the_token_budget() -> None:
    think = "<think>" + "hmm " * 150 + "</think>"
    model = ScriptedModel([think + SEARCH, think + json.dumps({"thought": "t", "action": "search_database",
                                                              "query": "Kiss and Tell"}), ANSWER])  # fmt: skip
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=1), config(tokens=400, searches=None)))
    assert traj.stop_reason == "max_total_tokens" and traj.searches_used == 2
    assert traj.ledger.budgeted_tokens_out <= 400


# -- reasoning_content from an OpenAI-compatible server -------------------------------------


class ReasoningServer(FaultServer):
    """The loopback OpenAI server, answering like vLLM with a reasoning parser: the
    reasoning in ``message.reasoning_content``, its tokens inside ``completion_tokens``
    and reported in ``usage.completion_tokens_details.reasoning_tokens``."""

    reasoning = f"First I check the question. Then {DECOY} would be wrong."

    def completion(self, body: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        payload = super().completion(body, text)
        steps = len(payload["choices"][0]["message"]["content"].split())
        thinking = len(self.reasoning.split())
        payload["choices"][0]["message"]["reasoning_content"] = self.reasoning
        payload["usage"]["completion_tokens"] = steps + thinking
        payload["usage"]["total_tokens"] = payload["usage"]["prompt_tokens"] + steps + thinking
        payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": thinking}
        return payload


def _server_reply(body: dict[str, Any]) -> str:
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema") or {}
    if "action" in schema.get("properties", {}):
        searched = any("Search results" in str(m.get("content")) for m in body["messages"])
        return READY if searched else SEARCH
    return ANSWER


def test_reasoning_content_is_budgeted_recorded_and_never_an_action() -> None:
    with ReasoningServer(reply=_server_reply) as server:
        model = OpenAICompatModel("reasoner", base_url=server.base_url, timeout=10.0)
        traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=1), config()))
        sent = [r.body for r in server.log]
    thinking = len(ReasoningServer.reasoning.split())
    assert [s.kind for s in traj.steps] == ["search", "ready", "answer"]
    assert all(s.reasoning == ReasoningServer.reasoning and s.tokens_reasoning == thinking for s in traj.steps)
    assert traj.steps[0].output == SEARCH
    assert traj.tokens_reasoning == 3 * thinking
    assert traj.tokens_out == sum(len(s.output.split()) + thinking for s in traj.steps)
    # the reasoning is never sent back to the server (in any of the three requests, the later two
    # carrying the earlier replies)
    assert len([body for body in sent if body]) == 3
    assert all("First I check" not in json.dumps(body) for body in sent)
    record = record_from_trajectory(traj, run_id="r", dataset_name="toy", dataset_hash="h")
    assert record.tokens_reasoning == 3 * thinking and record.tokens_out == traj.tokens_out
    assert record.steps[0]["tokens_reasoning"] == thinking and record.prediction == "Chief of Protocol"


def test_openai_backend_splits_inline_think() -> None:
    with FaultServer(reply=lambda body: f"<think>pondering {DECOY}</think>{ANSWER}") as server:
        model = OpenAICompatModel("reasoner", base_url=server.base_url, timeout=10.0)
        result = asyncio.run(model.chat(ChatRequest([{"role": "user", "content": "hi"}])))
    assert result.text == ANSWER and result.reasoning == f"pondering {DECOY}"
    assert result.reasoning_tokens == 0  # not reported by this server; inside completion_tokens
    assert result.completion_tokens == len(f"<think>pondering {DECOY}</think>{ANSWER}".split())


# -- vLLM token accounting and the cache ------------------------------------------------------


class _Tokenizer:
    """Whitespace tokenizer; ``</think>`` is one token (id 99) when ``single`` is true."""

    unk_token_id = 0

    def __init__(self, single: bool) -> None:
        self.single = single

    def convert_tokens_to_ids(self, token: str) -> int:
        return 99 if self.single and token == "</think>" else self.unk_token_id

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [1] * len(text.replace("</think>", " </think> ").split())


def test_vllm_reasoning_token_count() -> None:
    text = "<think> a b </think> c d"
    assert reasoning_token_count(_Tokenizer(True), [5, 6, 7, 99, 8, 9], text) == 4
    assert reasoning_token_count(_Tokenizer(False), [5, 6, 7, 4, 8, 9], text) == 4
    assert reasoning_token_count(_Tokenizer(True), [5, 6, 7], "<think> still going") == 3
    assert reasoning_token_count(_Tokenizer(True), [5, 6], "no reasoning") == 0


def test_reasoning_survives_the_generation_cache(tmp_path: Any) -> None:
    cache = GenerationCache(tmp_path / "gen.sqlite", enabled=True)
    result = ChatResult("x", 3, 9, "stop", 0.1, reasoning="because", reasoning_tokens=7)
    cache.put("k", "m", result)
    hit = cache.get("k")
    assert hit is not None and (hit.reasoning, hit.reasoning_tokens) == ("because", 7)
