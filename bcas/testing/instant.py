"""Instant, deterministic agent replies for testing control flow (never for capability).

* :class:`InstantModel` (registered by tests as a backend through :func:`create`) searches
  once with the end of the last message when the search tool is offered, then answers.
  The answer is read from ``BCAS_INSTANT_ANSWER`` (default ``alpha``) so a test can make
  a run right or wrong on purpose.  Token counts are derived from text length.
* :class:`AskerModel` (:func:`create_asker`) is the same, searching with the question
  itself (the agent's prompt carries it as ``Question: ...``), so the retrieved documents
  depend on the question.
* :func:`canned_reply` answers the same way for an OpenAI-shaped loopback server
  (``FaultServer(reply=canned_reply)``): it reads the JSON schema the ``openai`` backend
  sent in ``response_format``, offers one ``search_database`` action while no results
  have been shown yet, then ``ready_to_answer``, then the answer ``alpha``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any

from bcas.llm.base import ChatModel, ChatRequest, ChatResult

ANSWER = "alpha"


class InstantModel(ChatModel):
    supports_json_schema = True

    def __init__(self, model: str | None = None, **options: object) -> None:
        self.model_id = f"instant-{model or 'default'}"
        self.calls = 0

    async def chat(self, request: ChatRequest) -> ChatResult:
        self.calls += 1
        schema = request.json_schema or {}
        props = schema.get("properties", {})
        prompt = " ".join(m["content"] for m in request.messages)
        if "action" in props:
            tools = props["action"].get("enum", [])
            searched = "Search results" in prompt or "[1]" in prompt
            if "search_database" in tools and not searched:
                last_user = request.messages[-1]["content"]
                out = {"thought": "look it up", "action": "search_database", "query": last_user[-80:]}
            else:
                out = {"thought": "done", "action": "ready_to_answer", "query": ""}
            text = json.dumps(out)
        elif "answer" in props:
            text = json.dumps({"answer": os.environ.get("BCAS_INSTANT_ANSWER", ANSWER)})
        else:
            text = os.environ.get("BCAS_INSTANT_ANSWER", ANSWER)
        return ChatResult(
            text=text,
            prompt_tokens=max(1, len(prompt) // 4),
            completion_tokens=min(request.max_tokens, max(1, len(text) // 4)),
            finish_reason="stop",
            latency_s=0.0,
        )


class AskerModel(InstantModel):
    """The instant model, searching with the question (``Question: ...`` in the prompt)."""

    async def chat(self, request: ChatRequest) -> ChatResult:
        result = await super().chat(request)
        out = json.loads(result.text) if result.text.startswith("{") else {}
        if out.get("action") == "search_database":
            prompt = " ".join(m["content"] for m in request.messages)
            match = re.search(r"Question: (.*)", prompt)
            if match is None:
                raise ValueError("asker: the prompt holds no 'Question: ...' line")
            out["query"] = match.group(1)
            result = dataclasses.replace(result, text=json.dumps(out))
        return result


def create(model: str | None = None, **options: object) -> InstantModel:
    return InstantModel(model, **options)


def create_asker(model: str | None = None, **options: object) -> AskerModel:
    return AskerModel(model, **options)


def _schema(body: dict[str, Any]) -> dict[str, Any]:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema") or {}
    return fmt.get("schema") or {}


def canned_reply(body: dict[str, Any]) -> str:
    """The reply text to one chat-completions request ``body`` (see the module docstring)."""
    props = _schema(body).get("properties", {})
    messages = body.get("messages") or []
    prompt = " ".join(str(m.get("content", "")) for m in messages)
    if "action" in props:
        tools = props["action"].get("enum", [])
        if "search_database" in tools and "Search results" not in prompt:
            last_user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
            return json.dumps({"thought": "look it up", "action": "search_database", "query": last_user[-80:]})
        return json.dumps({"thought": "done", "action": "ready_to_answer", "query": ""})
    if "answer" in props:
        return json.dumps({"answer": ANSWER})
    return ANSWER
