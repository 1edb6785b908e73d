"""What the bridge does for one item: model calls and searches on the item's ledger, under its budgets.

The bridge puts a user's agent (written on any framework, or none) on the same per-item
ledger and the same budgets as the BCAS loop (BCAS §3.3) and the methods beside it
(:mod:`bcas.methods`).  :class:`BridgeLedger` is the part without a wire: every dialect
(:mod:`bcas.bridge.server`, :mod:`bcas.bridge.mcp`) asks it to call the model or to
search, and it answers from the :class:`~bcas.agent.budget.BudgetLedger` it keeps.

Budgets, whatever the agent does:

* **Searches.**  ``max_searches`` searches are run; every search asked for past it is
  *refused*: the agent gets a tool message saying the search budget is spent (never a
  passage), and the refusal is logged (``refused_searches``), not recorded as a search.
* **Completion tokens.**  Each model call is *capped*: it may produce at most the
  completion tokens left of ``max_total_tokens`` (the agent's own ``max_tokens`` when
  smaller; ``per_turn_max_tokens`` when set).  Once none are left a call is *refused*
  (HTTP 400, error code ``max_total_tokens``) and logged (``refused_calls``); the model is
  not called.  So with a provider that honours ``max_tokens`` the agent's completion
  tokens never exceed ``max_total_tokens`` (no forced-answer allowance: the agent, not
  the bridge, decides when to answer).
* **Context window.**  No call asks for more tokens than the model's window leaves after
  its prompt, the offered tools' schemas counted (:class:`bcas.agent.window.ContextWindow`):
  ``max_tokens`` is cut to that room.  A prompt that alone fills the window (by that estimate,
  or by the backend's own count: its "context exceeded" error) is *refused* as a spent token
  budget is (HTTP 400, error code ``context_window``), logged in ``refused_calls``; no step
  is recorded, since the backend generated nothing.

Every call the bridge makes is a ``generate`` step (tokens, latency, finish reason as the
provider reported them); every search it runs is a ``search`` step (``calls=0``) whose
``note`` names the dialect that asked.  The answer's totals are the sums of the steps.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bcas.agent.budget import BudgetLedger, Step
from bcas.agent.window import ContextFull, ContextWindow
from bcas.config import RunConfig
from bcas.items import Item
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError, ToolCall, split_reasoning
from bcas.llm.usage import metering
from bcas.timing import timed_search

T = TypeVar("T")

DIALECTS = ("openai", "mcp", "retriever")
"""The search tool's dialects: an OpenAI function schema with its call endpoint, an MCP server
(the official ``mcp`` SDK) and the retriever HTTP API of Search-R1 and FlashRAG (``POST /retrieve``)."""
SEARCH_TOOL = "search"
SEARCH_DESCRIPTION = (
    "Search the document collection for passages relevant to a query. Each call spends one search of a "
    "limited budget; the reply says how many are left."
)


class BudgetRefused(Exception):
    """A model call past ``max_total_tokens`` (``code``), or whose prompt fills the context window
    (``code="context_window"``): the bridge refuses it (the model generates nothing)."""

    def __init__(self, message: str, code: str = "max_total_tokens") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SearchReply:
    """What one search asked of the bridge gave: passages, or a refusal (``refused``) or a failure (``error``)."""

    query: str
    passages: tuple[Any, ...] = ()
    refused: bool = False
    error: str = ""
    searches_left: int | None = None

    @property
    def message(self) -> str:
        """The tool message an agent reads: numbered passages (``[1] Title: text``) and the searches left,
        or why there are none."""
        if self.refused:
            return refusal_message()
        if self.error:
            return f"Search failed: {self.error}"
        lines = [f"[{i}] {h.title}: {h.text}" for i, h in enumerate(self.passages, 1)] or ["(no passages found)"]
        return "\n".join(lines) + "\n" + left_line(self.searches_left)


def left_line(left: int | None) -> str:
    return "(searches left: unlimited)" if left is None else f"(searches left: {left})"


def refusal_message() -> str:
    """The tool message a search past ``max_searches`` gets (never passages)."""
    return (
        "Search refused: the search budget is spent (0 searches left). No passages are returned; "
        "answer the question with what you have."
    )


@dataclass
class BridgeLedger:
    """One item's model calls and searches through the bridge (see the module docstring)."""

    item: Item
    model: ChatModel
    retriever: Any
    config: RunConfig
    ledger: BudgetLedger = field(init=False)
    refused_searches: list[dict[str, str]] = field(default_factory=list)
    refused_calls: int = 0
    started: float = field(default_factory=time.perf_counter)
    # The item's context, taken where the bridge opens (inside the executor's timing meter): the
    # server threads run each call and search in it, so its model and search time are metered
    # as the loop's and the methods' are (bcas.timing).
    context: contextvars.Context = field(default_factory=contextvars.copy_context)

    def __post_init__(self) -> None:
        self.ledger = BudgetLedger(self.config.budget)
        self.window = ContextWindow.of(self.model)

    async def in_item_context(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the running loop in the item's context (the server's own threads have another)."""
        return await asyncio.get_running_loop().create_task(coro, context=self.context)

    # -- the budgets ----------------------------------------------------------------------

    @property
    def searches_left(self) -> int | None:
        return self.ledger.searches_left

    @property
    def tokens_left(self) -> int:
        return self.ledger.tokens_left

    def status(self) -> dict[str, Any]:
        """What an agent may ask of its budget (``GET /v1/budget``)."""
        return {**self.ledger.status(), "max_searches": self.config.budget.max_searches,
                "max_total_tokens": self.config.budget.max_total_tokens}  # fmt: skip

    # -- searching ------------------------------------------------------------------------

    async def search(self, query: str, dialect: str, k: int | None = None) -> SearchReply:
        """Run ``query`` if the search budget allows (a ``search`` step), else refuse it (logged)."""
        query = " ".join(str(query).split())
        if not self.ledger.can_search:
            self.refused_searches.append({"dialect": dialect, "query": query})
            return SearchReply(query, refused=True, searches_left=0)
        if self.retriever is None:
            return SearchReply(query, error="no retriever is configured", searches_left=self.searches_left)
        depth = self.config.retrieval.k if k is None else max(1, min(int(k), self.config.retrieval.k))
        try:
            with metering() as meter, timed_search():  # a reranker's model calls, made for this item
                asearch = getattr(self.retriever, "asearch", None)
                if asearch is not None:
                    hits = list(await asearch(query, k=depth))
                else:
                    hits = list(self.retriever.search(query, k=depth))
        except Exception as exc:  # noqa: BLE001 - a broken index is the agent's tool error, not a crash
            message = f"{type(exc).__name__}: {exc}"
            self.ledger.record(
                Step(kind="search", query=query, calls=0, flag="search_error", note=f"{dialect}: {message}")
            )
            return SearchReply(query, error=message, searches_left=self.searches_left)
        hits = hits[:depth]
        self.ledger.record_search(query, hits, meter, note=dialect)
        return SearchReply(query, passages=tuple(hits), searches_left=self.searches_left)

    # -- calling the model ----------------------------------------------------------------

    def allowance(self, requested: int | None) -> int:
        """``max_tokens`` of the next call: what is left, capped by the agent's own request and the
        optional per-call cap; :class:`BudgetRefused` once nothing is left."""
        left = self.ledger.tokens_left
        if left <= 0:
            self.refused_calls += 1
            raise BudgetRefused(
                f"the completion-token budget is spent (max_total_tokens={self.config.budget.max_total_tokens}); "
                "the bridge refuses further model calls"
            )
        cap = self.config.budget.per_turn_max_tokens
        allowed = left if cap is None else min(cap, left)
        return allowed if not requested or requested <= 0 else min(int(requested), allowed)

    async def chat(
        self,
        messages: Sequence[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        stop: Sequence[str] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        temperature: float = 0.0,
    ) -> ChatResult:
        """One model call (a ``generate`` step) within the budget; raises :class:`BudgetRefused` past it."""
        allowed = self.allowance(max_tokens)
        messages = [dict(m) for m in messages]
        try:
            allowed = self.window.clamp(messages, allowed, tools)
        except ContextFull as exc:
            self.refused_calls += 1
            raise BudgetRefused(f"the conversation no longer fits the model's context window: {exc}",
                                "context_window") from exc  # fmt: skip
        request = ChatRequest(
            messages=tuple(messages), max_tokens=allowed, temperature=float(temperature),
            stop=tuple(stop) if stop else None, seed=self.config.seed,
            tools=tuple(tools) if tools else None,
        )  # fmt: skip
        try:
            result = await self.model.chat(request)
        except ContextWindowError as exc:  # the backend counted more prompt tokens than the estimate
            self.refused_calls += 1
            raise BudgetRefused(f"the conversation no longer fits the model's context window: {exc}",
                                "context_window") from exc  # fmt: skip
        if not result.cached:
            self.window.observe(messages, int(result.prompt_tokens), tools)
        reasoning, text = split_reasoning(result.text)
        self.ledger.record(
            Step(kind="generate", output=text, tokens_in=int(result.prompt_tokens),
                 tokens_out=int(result.completion_tokens), max_tokens=allowed, cached=bool(result.cached),
                 latency_s=float(result.latency_s), finish_reason=result.finish_reason, note=_note(result.tool_calls),
                 reasoning="\n".join(p for p in (result.reasoning, reasoning) if p),
                 tokens_reasoning=int(result.reasoning_tokens or 0))
        )  # fmt: skip
        return result


def _note(calls: Sequence[ToolCall]) -> str:
    """A bridged call's step note: the tool calls its reply made, as written (kept, never executed)."""
    made = "; ".join(f"{c.name}({c.arguments})" for c in calls)
    return f"bridge; tool calls: {made}" if made else "bridge"


__all__ = [
    "DIALECTS",
    "SEARCH_DESCRIPTION",
    "SEARCH_TOOL",
    "BridgeLedger",
    "BudgetRefused",
    "SearchReply",
    "left_line",
    "refusal_message",
]
