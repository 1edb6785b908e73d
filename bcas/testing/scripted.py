"""In-process doubles for exercising the agent's control flow without a real model.

* :class:`ScriptedModel` answers each request from a script (a list of replies or a
  function of the request).  It behaves like an honest provider: it never returns
  more than ``max_tokens`` tokens (a longer reply is truncated and finishes with
  ``"length"``) and reports the usage it returned.  Tokens are words and single
  punctuation marks.  A scripted :class:`Calls` reply makes native function calls
  (requests with ``tools`` only); its tokens are those of its text, names and arguments,
  and a call that does not fit ``max_tokens`` is cut off (no call, ``"length"``).
* :class:`FakeRetriever` searches a handful of in-memory passages by word overlap
  and honours ``k`` and ``exclude_ids`` like the real retrievers.

They are used by the unit tests and by the harness-overhead benchmark; real runs use
``bcas.llm.load_model`` and ``bcas.retrieval.build_retriever``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ModelError, ToolCall

_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Calls:
    """A scripted reply that calls functions: ``(name, arguments JSON text)`` pairs, and any text beside them."""

    calls: tuple[tuple[str, str], ...]
    text: str = ""

    @property
    def tokens(self) -> int:
        return count_tokens(self.text) + sum(count_tokens(f"{name} {args}") for name, args in self.calls)


Reply = str | Calls
Script = Sequence[Reply] | Callable[[ChatRequest, int], Reply]


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, int, bool]:
    """``(text cut to max_tokens tokens, tokens kept, truncated?)``."""
    matches = list(_TOKEN.finditer(text))
    if len(matches) <= max_tokens:
        return text, len(matches), False
    end = matches[max_tokens - 1].end() if max_tokens > 0 else 0
    return text[:end], max_tokens, True


class ScriptedModel(ChatModel):
    """A chat model whose replies come from a script.

    ``script``: a list of replies (the last one repeats once the list is used up) or
    ``fn(request, index) -> str``.  ``fail_at``: the 0-based call index that raises
    :class:`ModelError`.  ``supports_logprobs`` only declares the capability: no reply
    carries log-probabilities.  ``requests`` keeps every request received.
    """

    def __init__(
        self,
        script: Script,
        *,
        model_id: str = "scripted",
        supports_json_schema: bool = True,
        supports_tools: bool = True,
        supports_logprobs: bool = False,
        fail_at: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        self.script = script
        self.model_id = model_id
        self.supports_json_schema = supports_json_schema
        self.supports_tools = supports_tools
        self.supports_logprobs = supports_logprobs
        self.tools_problem = "" if supports_tools else "this scripted model was made without tool calling"
        self.fail_at = fail_at
        self.fixed_prompt_tokens = prompt_tokens
        self.requests: list[ChatRequest] = []
        # Usage returned so far, counted independently of any ledger.
        self.prompt_tokens_total = 0
        self.completion_tokens_total = 0

    def reply(self, request: ChatRequest, index: int) -> Reply:
        if callable(self.script):
            return self.script(request, index)
        if not self.script:
            return ""
        return self.script[min(index, len(self.script) - 1)]

    async def chat(self, request: ChatRequest) -> ChatResult:
        index = len(self.requests)
        self.requests.append(request)
        if self.fail_at is not None and index == self.fail_at:
            raise ModelError(f"{self.model_id}: scripted failure at call {index}")
        reply = self.reply(request, index)
        calls: tuple[ToolCall, ...] = ()
        if isinstance(reply, Calls):
            if not request.tools:
                raise ModelError(f"{self.model_id}: call {index} scripts function calls for a request without tools")
            truncated = reply.tokens > request.max_tokens
            text, used = (truncate_tokens(reply.text, request.max_tokens)[0], request.max_tokens) if truncated else (
                reply.text, reply.tokens
            )  # fmt: skip
            if not truncated:
                calls = tuple(
                    ToolCall(f"scripted_{index}_{i}", name, args) for i, (name, args) in enumerate(reply.calls)
                )
        else:
            text, used, truncated = truncate_tokens(reply, request.max_tokens)
        if self.fixed_prompt_tokens is not None:
            prompt = self.fixed_prompt_tokens
        else:
            prompt = sum(count_tokens(m.get("content") or "") for m in request.messages)
        self.prompt_tokens_total += prompt
        self.completion_tokens_total += used
        return ChatResult(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=used,
            finish_reason="length" if truncated else "stop",
            latency_s=0.0,
            tool_calls=calls,
        )


@dataclass(frozen=True)
class FakeHit:
    """Same fields as ``bcas.retrieval.Hit``."""

    doc_id: str
    chunk_id: str
    title: str
    text: str
    score: float


class FakeRetriever:
    """Word-overlap search over a few ``(doc_id, title, text)`` passages (one chunk each)."""

    def __init__(self, passages: Iterable[tuple[str, str, str]], k: int = 3) -> None:
        self.passages = [(doc_id, title, text, set(_words(f"{title} {text}"))) for doc_id, title, text in passages]
        self.k = k
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def search(self, query: str, k: int | None = None, exclude_ids: Iterable[str] = ()) -> list[FakeHit]:
        excluded = set(exclude_ids)
        self.calls.append((query, tuple(sorted(excluded))))
        words = set(_words(query))
        scored = []
        for doc_id, title, text, vocab in self.passages:
            chunk_id = f"{doc_id}#0"
            if chunk_id in excluded:
                continue
            scored.append((len(words & vocab), doc_id, chunk_id, title, text))
        scored.sort(key=lambda row: (-row[0], row[1]))
        top = scored[: k or self.k]
        return [FakeHit(doc_id, chunk_id, title, text, float(score)) for score, doc_id, chunk_id, title, text in top]


class BrokenRetriever:
    """A retriever whose every search raises (for the ``error`` stop reason)."""

    def search(self, query: str, k: int | None = None, exclude_ids: Iterable[str] = ()) -> list[FakeHit]:
        raise RuntimeError("index file is unreadable")


def _words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"\w+", text)]
