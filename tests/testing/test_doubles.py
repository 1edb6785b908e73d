"""The control-flow doubles of bcas.testing do what their docstrings promise."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bcas.llm.base import ChatModel, ChatRequest, ModelError
from bcas.testing.decliner import DECLINE, DeclinerModel
from bcas.testing.instant import AskerModel, InstantModel, canned_reply
from bcas.testing.mock import MockModel
from bcas.testing.recording import RecordingModel
from bcas.testing.scripted import ScriptedModel

ACTION: dict[str, Any] = {"type": "object", "properties": {"action": {"enum": ["search_database", "ready_to_answer"]}}}
ANSWER: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string"}}}


def ask(model: ChatModel, content: str, schema: dict[str, Any] | None, seed: int = 0) -> str:
    request = ChatRequest([{"role": "user", "content": content}], max_tokens=64, json_schema=schema, seed=seed)
    return asyncio.run(model.chat(request)).text


def test_instant_searches_once_then_answers_and_the_server_replies_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BCAS_INSTANT_ANSWER", raising=False)
    model = InstantModel()
    first = json.loads(ask(model, "Question: who?", ACTION))
    assert first["action"] == "search_database" and first["query"] == "Question: who?"
    assert json.loads(ask(model, "Search results: [1] x", ACTION))["action"] == "ready_to_answer"
    assert json.loads(ask(model, "answer now", ANSWER)) == {"answer": "alpha"}
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")
    assert json.loads(ask(model, "answer now", ANSWER)) == {"answer": "beta"}
    assert model.calls == 4 and model.model_id == "instant-default"
    body = {"messages": [{"role": "user", "content": "Question: who?"}],
            "response_format": {"type": "json_schema", "json_schema": {"schema": ACTION}}}  # fmt: skip
    assert json.loads(canned_reply(body)) == first


def test_asker_searches_with_the_question() -> None:
    out = json.loads(ask(AskerModel(), "Some preamble\nQuestion: which letter?\nthe end", ACTION))
    assert out == {"thought": "look it up", "action": "search_database", "query": "which letter?"}


def test_decliner_answers_by_the_project_number() -> None:
    answers = [json.loads(ask(DeclinerModel(), f"codename of project {i}?", ANSWER))["answer"] for i in range(3)]
    assert answers == [DECLINE, "beta", "alpha"]


def test_recording_model_keeps_requests_and_the_usage_it_passed_on() -> None:
    model = RecordingModel(MockModel("gold"))
    ask(model, "hello", None, seed=7)
    ask(model, "again", None, seed=8)
    assert [r.seed for r in model.requests] == [7, 8] and model.calls == 2
    assert model.model_id == "mock:gold" and model.prompt_tokens > 0 and model.completion_tokens > 0
    failing = RecordingModel(ScriptedModel(["x"], fail_at=0))
    with pytest.raises(ModelError):
        ask(failing, "hello", None)
    assert len(failing.requests) == 1 and failing.calls == 0


def test_scripted_model_only_declares_log_probability_support() -> None:
    assert not ScriptedModel(["Yes"]).supports_logprobs
    silent = ScriptedModel(["Yes"], supports_logprobs=True)
    assert silent.supports_logprobs
    request = ChatRequest([{"role": "user", "content": "q"}], max_tokens=4, top_logprobs=2)
    assert asyncio.run(silent.chat(request)).logprobs is None
