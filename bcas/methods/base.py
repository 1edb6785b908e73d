"""What every method beside the BCAS loop shares: one item, one ledger, the same budgets.

A method (:data:`bcas.registry.METHODS`) is ``async def method(run: MethodRun) -> str``:
it asks :class:`MethodRun` to search and to call the model, and returns its stop reason.
:class:`MethodRun` owns what makes the methods comparable with the BCAS loop (BCAS §3.3):

* **The ledger.**  Every search and every model call is a
  :class:`bcas.agent.budget.Step` on the same :class:`~bcas.agent.budget.BudgetLedger`
  the loop keeps, so the record's totals, trajectory, cost and every report view read
  the same fields.  A method's retrieval is a ``search`` step of its own (``calls=0``:
  no model call); an intermediate model call is a ``generate`` step; the call that
  writes the prediction is an ``answer`` step (``forced_answer`` when a budget cut the
  method short).  A re-ranker's model calls (the ``llm`` reranker) are ``rerank`` steps,
  as in the loop.
* **Searches.**  ``max_searches`` is never exceeded: :meth:`MethodRun.search` refuses a
  search beyond it (:class:`~bcas.agent.budget.BudgetError`; a method checks
  :attr:`MethodRun.can_search` first and stops with ``max_searches``).
* **Completion tokens.**  Unlike the loop, a method never spends beyond
  ``max_total_tokens``: ``forced_answer_tokens`` of the budget are held back for the
  final answer.  An intermediate call may ask for the tokens left above that reserve
  (capped by ``per_turn_max_tokens`` when set); once fewer than ``forced_answer_tokens``
  are left above it, :meth:`MethodRun.generate` raises :class:`TokensSpent` and the
  method answers (stop reason ``max_total_tokens``).  The answer call asks for what is
  left, so with a provider that honours ``max_tokens`` a method's completion tokens
  never exceed ``max_total_tokens``.
* **Constrained decoding.**  Where the backend decodes under a JSON schema, every call
  whose reply a method must read (a query, a step, the answer) carries a schema whose
  string caps are constants (:mod:`bcas.agent.protocol`), never grown with a budget.
* **Context window.**  No call asks for more tokens than the model's window leaves
  (:class:`bcas.agent.window.ContextWindow`).

The record is built by the one builder from :func:`answer_of_method`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from bcas.agent.budget import BudgetLedger, Step
from bcas.agent.protocol import answer_schema, find_json_object, parse_answer
from bcas.agent.window import ContextFull, ContextWindow
from bcas.callshape import CallShape
from bcas.config import RunConfig
from bcas.items import Item
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError, split_reasoning
from bcas.llm.usage import metering
from bcas.prompts import prompt_template
from bcas.records import Answer
from bcas.registry import METHODS, RUN_KINDS
from bcas.timing import timed_search

METHOD_STOP_REASONS = ("answered", "max_searches", "max_total_tokens", "max_steps", "context_window", "error")
"""Why a method stopped (each method's docstring says which it uses):

``answered``: it wrote its answer when its own control flow said so (one pass, or the
model said it was done); ``max_searches``: it would have searched again but the search
budget was spent (for Iter-RetGen: its rounds, one search each, are done);
``max_total_tokens``: fewer than ``forced_answer_tokens`` were left above the answer's
reserve; ``max_steps``: the step cap of a method run with unlimited searches;
``context_window``: the prompt no longer fit the model's window; ``error``: the model or
the retriever raised."""

Method = Callable[["MethodRun"], Awaitable[str]]
SHARED_PROMPTS = "methods/prompts"  # the templates every method shares (system prompt, answer format)


class Retriever(Protocol):
    """What a method needs of a retriever (``bcas.retrieval``)."""

    def search(self, query: str, k: int | None = None, exclude_ids: Any = ()) -> list[Any]: ...


class TokensSpent(Exception):
    """Fewer than ``forced_answer_tokens`` are left for an intermediate call: the method must answer now."""


class MethodError(Exception):
    """The model or the retriever failed; the method ends with stop reason ``error``."""


class MethodRun:
    """One item answered by one method: the ledger, the calls and the prediction."""

    def __init__(self, name: str, item: Item, model: ChatModel, retriever: Retriever | None, config: RunConfig):
        self.name = name
        self.item = item
        self.model = model
        self.retriever = retriever
        self.config = config
        self.ledger = BudgetLedger(config.budget)
        self.window = ContextWindow.of(model)
        self.schema = bool(getattr(model, "supports_json_schema", False))
        self.prediction = ""
        self.notes: dict[str, Any] = {}
        self.requests: list[ChatRequest] = []

    # -- budgets --------------------------------------------------------------------------

    def step_bound(self, unlimited: int) -> int:
        """How many steps a stepwise method may take: ``unlimited`` when searches are, else one
        more than its searches (each step searches once at most, so the searches end it first,
        stop reason ``max_searches``)."""
        limit = self.config.budget.max_searches
        return unlimited if limit is None else int(limit) + 1

    @property
    def can_search(self) -> bool:
        return self.ledger.can_search

    @property
    def reserve(self) -> int:
        """Completion tokens held back for the final answer."""
        return min(self.config.budget.forced_answer_tokens, self.config.budget.max_total_tokens)

    def step_allowance(self) -> int:
        """``max_tokens`` of the next intermediate call; :class:`TokensSpent` when too few are left."""
        room = self.ledger.tokens_left - self.reserve
        if room < self.config.budget.forced_answer_tokens:
            raise TokensSpent(f"{room} tokens left above the answer's reserve of {self.reserve}")
        cap = self.config.budget.per_turn_max_tokens
        return room if cap is None else min(cap, room)

    def answer_allowance(self) -> int:
        cap = self.config.budget.per_turn_max_tokens
        left = self.ledger.tokens_left
        return left if cap is None else min(cap, left)

    # -- prompts ----------------------------------------------------------------------------

    def render(self, template: str, **values: Any) -> str:
        """``bcas/methods/prompts/<method>/<template>.txt`` filled with ``values``."""
        return prompt_template("bcas.methods", f"{self.name}/{template}").substitute(**values)

    @staticmethod
    def passages(hits: Sequence[Any]) -> str:
        """Passages as numbered lines (``[1] Title: text``)."""
        return "\n".join(f"[{i}] {h.title}: {h.text}" for i, h in enumerate(hits, 1)) or "(no passages)"

    # -- the two actions: search and call --------------------------------------------------

    async def search(self, query: str, exclude: Sequence[str] = ()) -> list[Any]:
        """Retrieve ``config.retrieval.k`` passages for ``query`` (a ``search`` step; counts one search)."""
        if self.retriever is None:
            raise MethodError(f"{self.name} needs a retriever")
        if not self.can_search:  # the ledger would refuse it too: say which method asked
            raise MethodError(f"{self.name} asked for search #{self.ledger.searches_used + 1} beyond max_searches")
        query = " ".join(query.split()) or " ".join(self.item.question.split())
        try:
            with metering() as meter, timed_search():  # timed as the loop's searches; a reranker's calls are model time
                asearch = getattr(self.retriever, "asearch", None)
                if asearch is not None:
                    hits = list(await asearch(query, k=None, exclude_ids=tuple(exclude)))
                else:
                    hits = list(self.retriever.search(query, k=None, exclude_ids=tuple(exclude)))
        except Exception as exc:  # a broken index ends the method like a broken model
            raise MethodError(f"search failed: {type(exc).__name__}: {exc}") from exc
        self.ledger.record_search(query, hits, meter)
        return hits

    async def call(
        self,
        kind: str,
        messages: list[dict[str, Any]],
        max_tokens: int,
        schema: dict[str, Any] | None = None,
        stop: tuple[str, ...] | None = None,
        note: str = "",
    ) -> ChatResult:
        """One model call recorded as a ``kind`` step; its text has any reasoning split off."""
        try:
            max_tokens = self.window.clamp(messages, max_tokens)
        except ContextFull as exc:
            raise MethodError(f"context_window: {exc}") from exc
        request = ChatRequest(
            messages=tuple(messages), max_tokens=max_tokens, temperature=0.0, stop=stop,
            seed=self.config.seed, json_schema=schema,
        )  # fmt: skip
        self.requests.append(request)
        try:
            result = await self.model.chat(request)
        except ContextWindowError as exc:
            raise MethodError(f"context_window: {exc}") from exc
        except Exception as exc:  # any backend failure ends the method, recorded as an error
            raise MethodError(f"{kind} call failed: {type(exc).__name__}: {exc}") from exc
        if not result.cached:
            self.window.observe(messages, int(result.prompt_tokens))
        inline, text = split_reasoning(result.text)
        if inline:
            result = dataclasses.replace(
                result, text=text, reasoning="\n".join(p for p in (result.reasoning, inline) if p)
            )
        self.ledger.record(
            Step(kind=kind, output=result.text, tokens_in=int(result.prompt_tokens),
                 tokens_out=int(result.completion_tokens), max_tokens=max_tokens, cached=bool(result.cached),
                 latency_s=float(result.latency_s), finish_reason=result.finish_reason, note=note,
                 reasoning=result.reasoning, tokens_reasoning=int(result.reasoning_tokens or 0))
        )  # fmt: skip
        return result

    async def generate(
        self, prompt: str, schema: dict[str, Any] | None = None, stop: tuple[str, ...] | None = None, note: str = ""
    ) -> ChatResult:
        """An intermediate call (a ``generate`` step) within the tokens left above the answer's reserve."""
        max_tokens = self.step_allowance()
        return await self.call(
            "generate", self.messages(prompt), max_tokens, schema if self.schema else None, stop, note
        )

    async def answer(self, prompt: str, forced: bool = False) -> str:
        """The final answer call (an ``answer`` step, ``forced_answer`` when a budget cut the method short);
        sets and returns the prediction.  Under a JSON schema the answer is ``{"answer": "..."}``."""
        max_tokens = self.answer_allowance()
        if max_tokens <= 0:  # a provider reported more tokens than it was allowed: nothing is left to answer with
            self.prediction = ""
            return ""
        fmt = self.render_shared("answer_format_json" if self.schema else "answer_format_text")
        messages = self.messages(f"{prompt}\n{fmt}".strip())
        schema = answer_schema(max_tokens) if self.schema else None
        result = await self.call("forced_answer" if forced else "answer", messages, max_tokens, schema)
        self.prediction = parse_answer(result.text)
        return self.prediction

    def messages(self, prompt: str) -> list[dict[str, Any]]:
        """The shared system prompt, then ``prompt`` as the one user message."""
        return [{"role": "system", "content": self.render_shared("system")}, {"role": "user", "content": prompt}]

    @staticmethod
    def render_shared(name: str, **values: Any) -> str:
        """A template every method shares: ``bcas/methods/prompts/<name>.txt``."""
        return prompt_template("bcas.methods", name).substitute(**values)

    @staticmethod
    def read_field(text: str, name: str) -> str | None:
        """Field ``name`` of a JSON reply (constrained, or embedded in free text), else ``None``."""
        obj = find_json_object(text)
        value = None if obj is None else obj.get(name)
        return value.strip() if isinstance(value, str) else None

    # -- the run ----------------------------------------------------------------------------

    async def run(self, method: Method) -> Answer:
        start = time.perf_counter()
        error = None
        try:
            stop = await method(self)
        except MethodError as exc:
            message = str(exc)
            stop = "context_window" if message.startswith("context_window: ") else "error"
            if stop == "error":
                error, self.prediction = message, ""
            else:
                self.notes["context_window"] = message
        return answer_of_method(self, stop, error, time.perf_counter() - start)


def answer_of_method(run: MethodRun, stop_reason: str, error: str | None, latency_s: float) -> Answer:
    """The answer of a method's run: prediction, ledger totals, steps and the budget it ran under."""
    ledger = run.ledger
    steps = ledger.steps
    return Answer(
        prediction=run.prediction,
        method=run.name,
        model=getattr(run.model, "model_id", "unknown"),
        label=run.config.label,
        searches_used=ledger.searches_used,
        tokens_in=ledger.tokens_in,
        tokens_out=ledger.tokens_out,
        tokens_reasoning=ledger.tokens_reasoning,
        llm_calls=ledger.llm_calls,
        early_stop=stop_reason == "answered",
        stop_reason=stop_reason,
        latency_s=round(latency_s, 6),
        error=error,
        steps=[s.to_dict() for s in steps],
        extra={
            **run.notes,
            "budget": dataclasses.asdict(run.config.budget),
            "agent_tokens_out": ledger.agent_tokens_out,
            "forced_answer": any(s.kind == "forced_answer" for s in steps),
            "paper": METHODS.meta(run.name, "paper", "") if run.name in METHODS else "",
        },
    )


async def run_method(
    name: str, item: Item, model: ChatModel, retriever: Retriever | None, config: RunConfig
) -> tuple[Answer, MethodRun]:
    """Answer ``item`` with the registered method ``name``; returns the answer and the run (its requests)."""
    method: Method = METHODS.get(name)
    run = MethodRun(name, item, model, retriever, config)
    return await run.run(method), run


def register_method(
    name: str,
    method: Method | str | None = None,
    *,
    paper: str = "",
    searches: str = "budget",
    prompts: tuple[str, ...] = (),
    shape: Callable[[RunConfig], CallShape] | str | None = None,
) -> Any:
    """Register a method and its run kind of the same name (one call; a decorator without ``method``).

    ``prompts``: the folders of its own prompt templates (absolute, or relative to the bcas
    package), hashed into its answers' identity with the shared ones (``SHARED_PROMPTS``); ``paper``: its citation; ``searches``:
    ``"none"``, ``"one"`` or ``"budget"``; ``shape``: its call structure for ``--bcas-estimate``
    (``RunConfig -> CallShape``, :func:`method_shape`; without one the estimate assumes the budget's bound).
    """
    if method is None:

        def decorate(fn: Method) -> Method:
            register_method(name, fn, paper=paper, searches=searches, prompts=prompts, shape=shape)
            return fn

        return decorate
    METHODS.register(name, method, paper=paper, searches=searches, shape=shape)
    RUN_KINDS.register(
        name,
        "bcas.run.pipelines:METHOD",
        per_item=True,
        prompts=(SHARED_PROMPTS, *prompts),
        label=f"{name}/{{config.label}}",
        budgeted=searches == "budget",
    )
    return method


ASSUMED_SEARCHES = 3
"""Searches an item of a method that declares no call structure is assumed to make under
unlimited searches (a stated assumption of the estimate)."""


def method_shape(name: str, config: RunConfig) -> CallShape:
    """The call structure of method ``name`` under ``config`` (its registered ``shape``); a method
    registered without one is assumed to search as its ``searches`` metadata says and answer once."""
    declared = METHODS.meta(name, "shape") if name in METHODS else None
    if isinstance(declared, str):
        import importlib

        module, _, attr = declared.partition(":")
        declared = getattr(importlib.import_module(module), attr)
    if callable(declared):
        shape: CallShape = declared(config)
        return shape
    kind = METHODS.meta(name, "searches", "budget") if name in METHODS else "budget"
    limit = config.budget.max_searches
    searches = (
        0 if kind == "none" or limit == 0 else 1 if kind == "one" else ASSUMED_SEARCHES if limit is None else limit
    )
    return CallShape(
        calls=float(searches) + 1, calls_min=1, searches=float(searches), searches_min=0,
        out_tokens=float(config.budget.max_total_tokens), passages=float(searches * config.retrieval.k),
        note=f"{name} declares no call structure: one call per search and the answer assumed",
    )  # fmt: skip
