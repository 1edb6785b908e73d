"""The model contract shared by every backend.

``ChatModel.chat`` is a coroutine: concurrency comes from many coroutines in flight,
and each backend batches what it receives (embedded: a request queue; openai: many
HTTP requests; vllm: the async engine).  Token counts in ``ChatResult`` are the
provider-reported usage, never estimates.
"""

from __future__ import annotations

import abc
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

FINISH_REASONS = ("stop", "length")


class ModelError(RuntimeError):
    """A backend failed to produce a result; the message says why and what to do."""


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request.

    ``json_schema``: when set, the backend constrains decoding to JSON valid under
    this schema (structured output).  ``top_logprobs``: when set, the result carries
    the log-probabilities of that many most likely tokens at each of the first
    generated positions (used by generative rerankers and judges).
    """

    messages: tuple[dict[str, str], ...]
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] | None = None
    seed: int = 0
    json_schema: dict[str, Any] | None = None
    top_logprobs: int | None = None

    def __post_init__(self) -> None:
        # Accept lists from callers but store immutable tuples so requests hash.
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(dict(m) for m in self.messages))
        if self.stop is not None and not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {self.max_tokens}")

    def cache_key(self, model_id: str) -> str:
        """Hash of (model id, messages, sampling parameters, seed, schema)."""
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "latency_s": self.latency_s,
            "logprobs": self.logprobs,
            "retries": self.retries,
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
        )


class ChatModel(abc.ABC):
    """A chat model backend.  ``model_id`` is backend-agnostic (used in cache keys)."""

    model_id: str = "unknown"
    supports_json_schema: bool = True
    supports_logprobs: bool = False

    @abc.abstractmethod
    async def chat(self, request: ChatRequest) -> ChatResult: ...

    async def aclose(self) -> None:
        """Release resources (threads, HTTP clients, engines)."""
        return None
