"""The model contract shared by every backend.

``ChatModel.chat`` is a coroutine: concurrency comes from many coroutines in flight,
and each backend batches what it receives (embedded: a request queue; openai: many
HTTP requests; vllm: the async engine).  Token counts in ``ChatResult`` are the
provider-reported usage, never estimates.

Reasoning models.  ``ChatResult.text`` is the reply without the model's reasoning;
the reasoning goes to ``ChatResult.reasoning``, whether the provider sent it apart
(``reasoning_content``) or inline between ``<think>`` and ``</think>``
(:func:`split_reasoning`).  ``completion_tokens`` counts it, as providers do (the
OpenAI usage convention: reasoning tokens are completion tokens);
``reasoning_tokens`` is the part the provider reported as reasoning
(``usage.completion_tokens_details.reasoning_tokens``), 0 when it reports none.

Native tool calling.  ``ChatRequest.tools`` holds function definitions in the chat API's
form (``{"type": "function", "function": {"name", "description", "parameters"}}``); a
backend that supports them (``ChatModel.supports_tools``) returns the calls the model
made in ``ChatResult.tool_calls`` (:class:`ToolCall`: id, name, arguments as the JSON
text the model wrote), with ``text`` holding any content written beside them.  The
conversation carries them as the chat API does: an assistant message with
``tool_calls`` and one ``{"role": "tool", "tool_call_id": ..., "content": ...}`` message
per call (:mod:`bcas.llm.tool_calls`).
"""

from __future__ import annotations

import abc
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FINISH_REASONS = ("stop", "length")
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_THINK_BLOCK = re.compile(re.escape(THINK_OPEN) + r"(.*?)" + re.escape(THINK_CLOSE), re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str]:
    """``(reasoning, reply)`` of a text that may hold ``<think>…</think>`` blocks.

    Every closed block is reasoning.  A ``</think>`` without its opening tag closes
    reasoning that began with the reply (chat templates that open the block in the
    prompt, as Qwen3 and DeepSeek-R1 do).  An unclosed ``<think>`` (a reply cut off
    while thinking) makes the rest of the text reasoning.  Text without the tags is
    returned unchanged as the reply.
    """
    if THINK_OPEN not in text and THINK_CLOSE not in text:
        return "", text
    parts: list[str] = []
    head, sep, tail = text.partition(THINK_CLOSE)
    if sep and THINK_OPEN not in head:
        parts.append(head)
        text = tail
    parts.extend(m.group(1) for m in _THINK_BLOCK.finditer(text))
    text = _THINK_BLOCK.sub("", text)
    if THINK_OPEN in text:
        text, _, rest = text.partition(THINK_OPEN)
        parts.append(rest)
    reasoning = "\n".join(p.strip() for p in parts if p.strip())
    return reasoning, text.strip()


class ModelError(RuntimeError):
    """A backend failed to produce a result; the message says why and what to do."""


class ContextWindowError(ModelError):
    """The request does not fit the model's context window (a server's "context exceeded" reply).

    ``window``: the context length in tokens, when the server or the model says it.  A
    caller that can shorten the conversation (the BCAS loop) catches this apart from
    other failures and stops with reason ``context_window``.
    """

    def __init__(self, message: str, window: int | None = None) -> None:
        super().__init__(message)
        self.window = window


@dataclass(frozen=True)
class ToolCall:
    """One function call a model made: the call id, the function's name, its arguments (JSON text as written)."""

    id: str
    name: str
    arguments: str

    def to_dict(self) -> dict[str, Any]:
        """The call as the chat API writes it in an assistant message's ``tool_calls``."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        function = data.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # some servers send the arguments as an object
            arguments = json.dumps(arguments if arguments is not None else {})
        return cls(id=str(data.get("id") or ""), name=str(function.get("name") or ""), arguments=arguments)


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request.

    ``json_schema``: when set, the backend constrains decoding to JSON valid under
    this schema (structured output).  ``top_logprobs``: when set, the result carries
    the log-probabilities of that many most likely tokens at each of the first
    generated positions (used by generative rerankers and judges).  ``tools``: when
    set, the function definitions the model may call (native tool calling; the calls
    come back in ``ChatResult.tool_calls``).  Messages may be tool results
    (``role`` ``tool`` with ``tool_call_id``) and assistant messages with ``tool_calls``.
    """

    messages: Sequence[dict[str, Any]]  # stored as a tuple (see __post_init__)
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] | None = None
    seed: int = 0
    json_schema: dict[str, Any] | None = None
    top_logprobs: int | None = None
    tools: tuple[dict[str, Any], ...] | None = None

    def __post_init__(self) -> None:
        # Accept lists from callers but store immutable tuples so requests hash.
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(dict(m) for m in self.messages))
        if self.stop is not None and not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))
        if self.tools is not None and not isinstance(self.tools, tuple):
            object.__setattr__(self, "tools", tuple(dict(t) for t in self.tools))
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {self.max_tokens}")

    def cache_key(self, model_id: str) -> str:
        """Hash of (model id, messages, sampling parameters, seed, schema, tools)."""
        payload = {
            "model": model_id,
            "messages": [dict(m) for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stop": list(self.stop) if self.stop else None,
            "seed": self.seed,
            # As a string, so property order (which steers constrained decoding) counts.
            "json_schema": json.dumps(self.json_schema) if self.json_schema is not None else None,
            "top_logprobs": self.top_logprobs,
        }
        if self.tools is not None:  # absent otherwise, so requests without tools keep their keys
            payload["tools"] = json.dumps(list(self.tools))
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    latency_s: float
    cached: bool = False
    logprobs: list[dict[str, float]] | None = None
    retries: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    reasoning: str = ""
    reasoning_tokens: int = 0
    tool_calls: tuple[ToolCall, ...] = ()
    # What the backend measured of this call besides latency_s (bcas.llm.timing.CALL_FIELDS);
    # kept in the generation cache, so a replay reports the recorded times.
    timing: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "latency_s": self.latency_s,
            "logprobs": self.logprobs,
            "retries": self.retries,
            "reasoning": self.reasoning,
            "reasoning_tokens": self.reasoning_tokens,
            **({"tool_calls": [c.to_dict() for c in self.tool_calls]} if self.tool_calls else {}),
            **({"timing": dict(self.timing)} if self.timing else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], cached: bool = False) -> ChatResult:
        return cls(
            text=data["text"],
            prompt_tokens=int(data["prompt_tokens"]),
            completion_tokens=int(data["completion_tokens"]),
            finish_reason=data["finish_reason"],
            latency_s=float(data["latency_s"]),
            cached=cached,
            logprobs=data.get("logprobs"),
            retries=int(data.get("retries", 0)),
            reasoning=data.get("reasoning") or "",
            reasoning_tokens=int(data.get("reasoning_tokens") or 0),
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            timing={str(k): float(v) for k, v in (data.get("timing") or {}).items()},
        )


class ChatModel(abc.ABC):
    """A chat model backend.  ``model_id`` is backend-agnostic (used in cache keys).

    ``context_window``: the model's context length in tokens (prompt and completion
    together), ``None`` when unknown; callers clamp ``max_tokens`` to what it leaves.
    """

    model_id: str = "unknown"
    supports_json_schema: bool = True
    supports_logprobs: bool = False
    # Native tool calling (ChatRequest.tools): the backend sends the definitions and
    # returns the calls.  ``tools_problem`` says why not, when a model cannot.
    supports_tools: bool = False
    tools_problem: str = "this backend does not implement native tool calling"
    # Tokens the model attends to (prompt + completion), when known: the embedded
    # engine's n_ctx, a llama.cpp server's /props n_ctx, vLLM's max_model_len.
    context_window: int | None = None

    @abc.abstractmethod
    async def chat(self, request: ChatRequest) -> ChatResult: ...

    async def aclose(self) -> None:
        """Release resources (threads, HTTP clients, engines)."""
        return None


class WrappedModel(ChatModel):
    """A model in front of another (``inner``): it answers to the inner model's id and capabilities."""

    inner: ChatModel

    @property
    def model_id(self) -> str:  # type: ignore[override]
        return self.inner.model_id

    @property
    def supports_json_schema(self) -> bool:  # type: ignore[override]
        return self.inner.supports_json_schema

    @property
    def supports_logprobs(self) -> bool:  # type: ignore[override]
        return self.inner.supports_logprobs

    @property
    def supports_tools(self) -> bool:  # type: ignore[override]
        return self.inner.supports_tools

    @property
    def tools_problem(self) -> str:  # type: ignore[override]
        return self.inner.tools_problem

    @property
    def context_window(self) -> int | None:  # type: ignore[override]
        return self.inner.context_window
