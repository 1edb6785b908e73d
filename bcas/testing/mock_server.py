"""The ``mock`` backend's answers over HTTP: a loopback OpenAI-compatible server for harness runs.

``FaultServer(reply=mock_reply("random"))`` answers every chat request as
:class:`bcas.testing.mock.MockModel` answers the same :class:`bcas.llm.ChatRequest`
(messages, ``max_tokens``, temperature, stop, seed, the JSON schema of
``response_format``, ``top_logprobs``), so a run with ``--bcas-model openai:NAME
--bcas-base-url URL`` goes through the ``openai`` backend, HTTP, retries and the
generation cache, and gets the mock's deterministic replies: the same request gives
the same reply on any server.  The ``random`` and ``verbose`` variants need nothing
else; ``gold`` answers only the questions of the items given to :func:`mock_reply`.

It stands in for no capability: it exists to run the harness's control flow (shards,
several servers, schedulers played as local processes) over a real connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from bcas.llm.base import ChatRequest
from bcas.testing.mock import MockModel


def request_of(body: dict[str, Any]) -> ChatRequest:
    """The :class:`ChatRequest` an OpenAI chat-completions body carries (as the openai backend sends it)."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else fmt.get("schema")
    stop = body.get("stop")
    return ChatRequest(
        messages=[{"role": str(m.get("role")), "content": str(m.get("content") or "")} for m in body["messages"]],
        max_tokens=int(body.get("max_tokens") or 256),
        temperature=float(body.get("temperature") or 0.0),
        stop=tuple(stop) if isinstance(stop, list) else (stop,) if isinstance(stop, str) else None,
        seed=int(body.get("seed") or 0),
        json_schema=schema or None,
        top_logprobs=body.get("top_logprobs") or None,
    )


def mock_reply(variant: str = "random", items: Iterable[Any] | None = None) -> Callable[[dict[str, Any]], str]:
    """A ``FaultServer`` reply function answering as ``MockModel(variant)`` (``items``: for ``gold``)."""
    model = MockModel(variant)
    if items is not None:
        model.register_items(items)

    def reply(body: dict[str, Any]) -> str:
        # Each request thread runs its own event loop: the mock's chat is pure and instant.
        return asyncio.run(model.chat(request_of(body))).text

    return reply


__all__ = ["mock_reply", "request_of"]
