"""An instant, deterministic chat model for testing control flow (never for capability).

It searches once with the question when the search tool is offered, then answers.
The answer is read from ``BCAS_INSTANT_ANSWER`` (default ``alpha``) so a test can
make a run right or wrong on purpose.  Token counts are derived from text length.
"""

from __future__ import annotations

import json
import os

from bcas.llm.base import ChatModel, ChatRequest, ChatResult


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
            text = json.dumps({"answer": os.environ.get("BCAS_INSTANT_ANSWER", "alpha")})
        else:
            text = os.environ.get("BCAS_INSTANT_ANSWER", "alpha")
        return ChatResult(
            text=text,
            prompt_tokens=max(1, len(prompt) // 4),
            completion_tokens=min(request.max_tokens, max(1, len(text) // 4)),
            finish_reason="stop",
            latency_s=0.0,
        )


def create(model: str | None = None, **options: object) -> InstantModel:
    return InstantModel(model, **options)
