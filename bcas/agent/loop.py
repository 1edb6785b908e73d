"""The BCAS execution loop (BCAS §3.3-§3.4).

Each action turn the model (1) reasons, writing a short *thought*; (2) selects a tool
from the list generated for *this* turn (``search_database`` only while the search
allowance lasts, plus ``ready_to_answer``); (3) the tool runs and its observation is
appended to the context (in the ``tools`` action format, as the call's ``tool`` result
message; otherwise at the head of the next user message); (4) the :class:`~bcas.agent.budget.BudgetLedger` is updated
from the provider-reported usage.  Every turn's prompt shows the remaining searches
and completion tokens (the paper's "context + search hints"; ``search_hints=False``
hides them).  Optional pre-planning writes a research plan before the first turn and
keeps it in context; optional reflection reviews progress every ``reflect_every``
action turns.  Both are model calls charged to the ledger like any turn.

Termination.  The loop stops choosing actions for exactly one of these reasons
(``Trajectory.stop_reason``), checked in this order before every action turn:

``answered``
    The model chose ``ready_to_answer`` while it could still search and had tokens
    left; the answer turn follows.  This is the only *early stop*
    (``Trajectory.early_stop``): the model answered before a budget forced it to.
``max_total_tokens``
    The completion budget is spent (fewer than ``forced_answer_tokens`` left, see
    :mod:`bcas.agent.budget`) before the model chose to answer.  A forced answer
    turn follows.
``max_searches``
    The search allowance is used up (``searches_used == max_searches``, including
    ``max_searches == 0``).  The search tool is withdrawn, and since the answer
    tool is then the only one left, the loop goes straight to the answer turn
    instead of asking the model to pick from a list of one (BCAS §3.3: "the model
    must answer with the information it has already gathered").
``max_turns``
    The turn bound (:func:`bcas.agent.budget.turn_bound`: ``AgentConfig.max_turns``
    when set, else derived from the budgets so that, in the paper's loop, a budget
    always ends the trajectory first) was reached; a forced answer turn follows.
``max_invalid_turns``
    Only with ``AgentConfig.max_invalid_turns`` set (off by default; not in the
    papers): that many action turns could not be used: their output did not parse
    into an offered action, or (with ``repeated_query="invalid"``) they repeated an
    earlier query.  A forced answer turn follows.
``context_window``
    The conversation no longer fits the model's context window
    (``ChatModel.context_window``): the next action turn would leave fewer than
    ``MIN_TURN_TOKENS`` for its reply, or the backend refused a request for its
    length (:class:`~bcas.llm.base.ContextWindowError`).  A forced answer turn follows,
    on a history shortened to fit (the oldest search results are dropped first).
``abstained``
    Only with ``AgentConfig.abstain``: the model chose the ``abstain`` tool, offered
    beside the others in every action turn.  No answer turn follows; the prediction is
    ``"abstain"`` (a decline: graded *not attempted*, :mod:`bcas.grading.abstention`).
    The answer turn offers it too (its instruction says that the answer ``"abstain"``
    declines), so a model that used up its searches, or was forced to answer, can still
    abstain: an answer that normalises to ``abstain`` ends with this stop reason.
``error``
    The model or the retriever raised.  ``Trajectory.error`` holds the exception
    type and message, the prediction is empty, and the trajectory (hence the
    record) is still produced.

Final answer.  After ``answered`` or ``max_searches`` the answer step has kind
``answer``; after ``max_total_tokens``, ``max_turns``, ``max_invalid_turns`` or
``context_window`` it has kind ``forced_answer``.  Either one may spend the tokens left (capped by the optional
per-turn cap) while the budget is not spent, otherwise the forced-answer allowance
(flag ``over_budget``).  With ``constrained_answer`` (and a backend with structured
output) the answer is decoded under ``{"answer": "<short string>"}``.
With ``AgentConfig.cite`` the answer also lists the ids of the passages it rests on
(``cite``: at most ``CITE_MAX_ITEMS`` of the ids shown, :func:`~bcas.agent.protocol.answer_schema`);
the trajectory keeps them with the documents they belong to (``Trajectory.cite``).

Passage ids.  A passage is shown under an opaque id, ``p1``, ``p2``, ... counting the
item's distinct passages in the order they were first shown, never under the
dataset's id (which names the item and the document's place in it); the record's
``passage_ids`` maps each opaque id back to its chunk, and the steps keep the real
chunk and document ids, so evidence and citation metrics read what they always did.

Invalid turns and repeated queries.  An unparseable turn is answered with a short
correction (counted toward ``max_invalid_turns`` when that option is set); in the
``tools`` format a turn with no call gets it in the next user message, a turn with
calls as each call's result (several calls, an unknown function or bad arguments).  A
reply cut off by its token allowance (``finish_reason`` ``"length"``) before its action
was complete is such a turn, and its note and correction say that it was cut off and
at what allowance.  A query identical (case and spacing aside) to an earlier one is,
by default, a search like any other (BCAS §3.4 skips nothing): it runs, costs a search
and its tokens, the model sees its results, and ``Trajectory.repeated_queries`` counts
it.  With ``AgentConfig.repeated_query="invalid"`` it is flagged ``repeated_query``
and not re-run; it uses a turn but not a search, and counts toward
``max_invalid_turns``.  The turn bound ``T`` limits the action turns, so the loop
always terminates after at most ``1 (plan) + T + T // reflect_every (reflections) +
1 (answer)`` model calls.

Context window.  No call asks for more tokens than the window leaves: its
``max_tokens`` is clamped to ``context_window`` minus the prompt's estimated length
(:mod:`bcas.agent.window`).  A model that declares no window is not clamped.

Reasoning models.  A reply's reasoning, whether the provider returned it apart
(``ChatResult.reasoning``, e.g. ``reasoning_content``) or inline in ``<think>`` tags,
is split from the reply before anything reads it: the action, plan, reflection and
answer come from the rest only, the history sent back to the model holds the rest
only, and the step keeps the reasoning text and the provider's reasoning-token count.
Its tokens are completion tokens, charged to ``max_total_tokens`` like any other.
"""

from __future__ import annotations

import dataclasses
import time
from string import Template
from typing import Any, Protocol

from bcas.agent.assess_tool import AssessToolError, assess_search_hits
from bcas.agent.budget import BudgetLedger, Step, turn_bound
from bcas.agent.protocol import (
    ABSTAIN_TOOL,
    ABSTAINED,
    ANSWER_TOOL,
    SEARCH_TOOL,
    ActionParseError,
    action_schema,
    answer_schema,
    normalize_query,
    parse_action,
    parse_answer,
    parse_cite,
    tool_definitions,
)
from bcas.agent.trajectory import Trajectory
from bcas.agent.window import MIN_TURN_TOKENS, ContextFull, ContextWindow
from bcas.config import RunConfig
from bcas.data import Item
from bcas.grading.metrics import normalize_answer
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError, split_reasoning
from bcas.llm.tool_calls import assistant_message, calls_text, tool_message
from bcas.llm.usage import UsageMeter, metering
from bcas.prompts import prompt_template
from bcas.timing import timed_search

STOP_REASONS = (
    "answered", "max_searches", "max_total_tokens", "max_invalid_turns", "max_turns", "context_window", "abstained",
    "error",
)  # fmt: skip
FORCED_STOPS = ("max_total_tokens", "max_turns", "max_invalid_turns", "context_window")
_DROPPED = "[earlier search results left out to fit the context window]"
# Text-format turns stop before the model writes an observation of its own.
TEXT_STOP = ("\nObservation", "\nSearch results")


# Templates of the optional behaviours (AgentConfig.cite / abstain), outside the hashed
# prompt folder (bcas.identity.OPTION_PROMPTS says why).
_TOOL_TEMPLATES = {ABSTAIN_TOOL: "options/tool_abstain"}
_CITE_JSON, _CITE_TEXT = "options/answer_cite_json", "options/answer_cite_text"
_ANSWER_ABSTAIN = "options/answer_abstain"


def load_template(name: str) -> Template:
    """The prompt template ``bcas/agent/prompts/<name>.txt`` (``$name`` placeholders)."""
    return prompt_template("bcas.agent", name)


def render(name: str, **values: Any) -> str:
    return load_template(name).substitute(**values)


class Retriever(Protocol):
    """What the loop needs from a retriever (``bcas.retrieval.build_retriever``)."""

    def search(self, query: str, k: int | None = None, exclude_ids: Any = ()) -> list[Any]: ...


class _Abort(Exception):
    """The model or retriever failed; the loop ends with stop_reason ``error``."""


class _Run:
    def __init__(
        self,
        item: Item,
        model: ChatModel,
        retriever: Retriever,
        config: RunConfig,
        keep_requests: bool,
        task: str | None,
    ):
        self.item = item
        self.task = task  # the dataset's task: the assessment treatments' generator prompt
        self.model = model
        self.retriever = retriever
        self.config = config
        self.agent = config.agent
        self.keep_requests = keep_requests
        supports_schema = bool(getattr(model, "supports_json_schema", False))
        self.schema_actions = self.agent.action_format == "json" and supports_schema
        self.schema_answer = self.agent.constrained_answer and supports_schema
        self.ledger = BudgetLedger(config.budget)
        self.max_turns = turn_bound(config.budget, config.agent)
        self.traj = Trajectory(
            item=item, config=config, model=getattr(model, "model_id", "unknown"), ledger=self.ledger
        )
        # The system prompt promises a budget line each turn only where one is shown (search_hints).
        self.system = render("system" if self.agent.search_hints else "system_no_hints")
        # Committed (user, reply) pairs; a reply with native tool calls is its messages (the call, the results).
        self.history: list[tuple[str, str | list[dict[str, Any]]]] = []
        self.pending = render("question", question=item.question)
        self.seen_chunks: list[str] = []
        # Every passage shown, by the opaque id it was shown under (p1, p2, ... in order of first
        # appearance): its chunk id and document id.  A dataset's ids name the item and the
        # document's place in it (ConflictQA's ::0 and ::1 are its memory side), so none is shown.
        self.shown: dict[str, tuple[str, str]] = {}
        self.labels: dict[str, str] = {}  # chunk id -> the opaque id it is shown under
        self.queries: set[str] = set()
        self.window = ContextWindow.of(model)
        self.side_calls: UsageMeter | None = None

    # -- prompt pieces ------------------------------------------------------------------

    def status(self) -> str:
        if not self.agent.search_hints:
            return ""
        left = self.ledger.searches_left
        cap = self.config.budget.max_searches
        searches = "unlimited searches" if left is None else f"{left} of {cap} searches left"
        tokens = f"{self.ledger.tokens_left} of {self.config.budget.max_total_tokens} output tokens left"
        return render("status", searches=searches, tokens=tokens)

    def tool_template(self, tool: str) -> str:
        """The template of ``tool``'s line: the search tool promises unseen passages only when
        ``AgentConfig.exclude_seen`` holds them back (the paper grids' searches may repeat them)."""
        if tool == SEARCH_TOOL and self.agent.exclude_seen:
            return f"tool_{tool}_unseen"
        return _TOOL_TEMPLATES.get(tool, f"tool_{tool}")

    def offered_tools(self) -> list[str]:
        tools = [SEARCH_TOOL] if self.ledger.can_search else []
        return [*tools, ANSWER_TOOL, *([ABSTAIN_TOOL] if self.agent.abstain else [])]

    def user_message(self, instruction: str) -> str:
        """This turn's user message: the pending observation, then this turn's instruction."""
        return (f"{self.pending}\n\n{instruction}" if self.pending else instruction).strip()

    def messages(self, instruction: str, history: list[Any] | None = None) -> list[dict[str, Any]]:
        # The history keeps every user message as it was sent, so each request extends
        # the previous one and a backend with prefix caching re-reads nothing.
        msgs: list[dict[str, Any]] = [{"role": "system", "content": self.system}]
        for user, reply in self.history if history is None else history:
            msgs.append({"role": "user", "content": user})
            msgs.extend([{"role": "assistant", "content": reply}] if isinstance(reply, str) else reply)
        msgs.append({"role": "user", "content": self.user_message(instruction)})
        return msgs

    # -- calls ---------------------------------------------------------------------------

    async def call(
        self, kind: str, messages: list[dict[str, Any]], max_tokens: int, schema: dict[str, Any] | None,
        stop: tuple[str, ...] | None = None, tools: tuple[dict[str, Any], ...] | None = None,
    ) -> ChatResult:  # fmt: skip
        request = ChatRequest(
            messages=tuple(messages), max_tokens=max_tokens, temperature=0.0, stop=stop,
            seed=self.config.seed, json_schema=schema, tools=tools,
        )  # fmt: skip
        if self.keep_requests:
            self.traj.requests.append(request)
        try:
            result = await self.model.chat(request)
        except ContextWindowError as exc:
            raise ContextFull(str(exc)) from exc
        except Exception as exc:  # any backend failure ends the trajectory, recorded as an error
            raise _Abort(f"{kind} call failed: {type(exc).__name__}: {exc}") from exc
        self.traj.retries += int(result.retries or 0)
        if not result.cached:
            self.window.observe(messages, int(result.prompt_tokens))
        # Reasoning is kept apart from the reply whatever the backend did with it.
        inline, text = split_reasoning(result.text)
        if inline:
            reasoning = "\n".join(part for part in (result.reasoning, inline) if part)
            result = dataclasses.replace(result, text=text, reasoning=reasoning)
        return result

    # -- the context window -------------------------------------------------------------

    def fitting(self, instruction: str, need: int) -> list[dict[str, Any]]:
        """The messages of a final answer with the oldest search results left out until ``need`` tokens fit."""
        history = list(self.history)
        msgs = self.messages(instruction, history)
        for i in range(len(history)):
            room = self.window.room(msgs)
            if room is None or room >= need:
                break
            user, reply = history[i]
            if not isinstance(reply, str):  # native tool calls: the results are in the tool messages
                reply = [{**m, "content": _DROPPED} if m.get("role") == "tool" else m for m in reply]
            history[i] = (_DROPPED if i or not self.traj.plan else user, reply)
            msgs = self.messages(instruction, history)
        return msgs

    def step(self, kind: str, result: ChatResult, max_tokens: int, **fields: Any) -> Step:
        return self.ledger.record(
            Step(
                kind=kind, output="\n".join(p for p in (result.text, calls_text(result.tool_calls)) if p),
                tokens_in=int(result.prompt_tokens),
                tokens_out=int(result.completion_tokens), max_tokens=max_tokens, cached=bool(result.cached),
                latency_s=float(result.latency_s), finish_reason=result.finish_reason,
                reasoning=result.reasoning, tokens_reasoning=int(result.reasoning_tokens or 0), **fields,
            )
        )  # fmt: skip

    async def search(self, query: str) -> list[Any]:
        exclude = tuple(self.seen_chunks) if self.agent.exclude_seen else ()
        # With a MADARA treatment on the tool, retrieve the assessment pool (n_docs,
        # MADARA §5.5: top-k of 10) and let the treatment keep k.
        k = self.config.assess.n_docs if self.agent.assess != "none" else None
        try:
            with metering() as meter, timed_search():  # a reranker's model calls, made for this item
                asearch = getattr(self.retriever, "asearch", None)
                if asearch is not None:
                    hits = list(await asearch(query, k=k, exclude_ids=exclude))
                else:
                    hits = list(self.retriever.search(query, k=k, exclude_ids=exclude))
        except Exception as exc:  # a broken index ends the trajectory like a broken model
            raise _Abort(f"search failed: {type(exc).__name__}: {exc}") from exc
        self.side_calls = meter
        return hits

    def record_side_calls(self, query: str) -> None:
        """The reranker's calls of the last search as a ``rerank`` step (after the search step)."""
        meter, self.side_calls = self.side_calls, None
        if meter is not None and meter.calls:
            self.ledger.record(
                Step(kind="rerank", query=query, tokens_in=meter.prompt_tokens, tokens_out=meter.completion_tokens,
                     calls=meter.calls, cached=meter.cached == meter.calls,
                     note=f"{meter.calls} re-ranking calls ({meter.cached} from cache)")
            )  # fmt: skip

    async def assess(self, hits: list[Any]) -> tuple[list[Any], str]:
        """The hits a MADARA treatment on the tool keeps (:mod:`bcas.agent.assess_tool`)."""
        try:
            return await assess_search_hits(self.item.question, hits, self.model, self.config, self.ledger, self.task)
        except AssessToolError as exc:
            raise _Abort(str(exc)) from exc

    # -- phases --------------------------------------------------------------------------

    async def plan(self) -> None:
        max_tokens = self.ledger.turn_max_tokens()
        prompt = render("plan", question=self.item.question, status=self.status())
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": prompt}]
        max_tokens = self.window.clamp(messages, max_tokens)
        result = await self.call("plan", messages, max_tokens, None)
        self.step("plan", result, max_tokens)
        self.traj.plan = result.text.strip()
        # The plan request (which states the question) and the plan open the history,
        # so the plan stays in context for every later turn.
        self.history.append((prompt, result.text))
        self.pending = ""

    async def reflect(self) -> None:
        max_tokens = self.ledger.turn_max_tokens()
        instruction = render("reflect", status=self.status()).strip()
        messages = self.messages(instruction)
        max_tokens = self.window.clamp(messages, max_tokens)
        result = await self.call("reflect", messages, max_tokens, None)
        self.step("reflect", result, max_tokens)
        self.history.append((self.user_message(instruction), result.text))
        self.pending = ""

    async def action_turn(self) -> str:
        """One action turn; returns ``"ready"``, ``"abstain"``, ``"search"``, ``"repeated"`` or ``"invalid"``."""
        tools = self.offered_tools()
        fmt = self.agent.action_format
        texts = {t: render(self.tool_template(t), k=self.config.retrieval.k) for t in tools}
        instruction = render(
            f"turn_{fmt}", status=self.status(), tools="\n".join(texts.values()), tool_names=" or ".join(tools)
        ).strip()
        messages = self.messages(instruction)
        max_tokens = self.ledger.turn_max_tokens()
        room = self.window.room(messages)
        if room is not None and room < min(MIN_TURN_TOKENS, max_tokens):
            raise ContextFull(f"{room} tokens of the {self.window.tokens}-token window left for an action turn")
        max_tokens = self.window.clamp(messages, max_tokens)
        schema = action_schema(tools, max_tokens, self.agent.thought_max_chars) if self.schema_actions else None
        stop = TEXT_STOP if fmt == "text" else None
        functions = tool_definitions(texts, max_tokens) if fmt == "tools" else None
        result = await self.call("action", messages, max_tokens, schema, stop, functions)
        self.traj.action_turns += 1
        asked = self.user_message(instruction)
        try:
            action = parse_action(result.text, tools, fmt, result.tool_calls)
        except ActionParseError as exc:
            self.traj.invalid_turns += 1
            reason = exc.reason
            if result.finish_reason == "length":
                reason = f"the reply was cut off at its {max_tokens}-token allowance before its action was complete"
                reason += f" ({exc.reason})"
            self.step("invalid", result, max_tokens, note=reason)
            self.commit(asked, result, render("correction", reason=reason))
            return "invalid"
        if action.tool == ANSWER_TOOL:
            self.step("ready", result, max_tokens, note=action.thought)
            self.commit(asked, result, "", render("tool_ready"))
            return "ready"
        if action.tool == ABSTAIN_TOOL:
            self.step("abstain", result, max_tokens, note=action.thought)
            return "abstain"
        key = normalize_query(action.query)
        if key in self.queries:
            self.traj.repeated_queries += 1
            if self.agent.repeated_query == "invalid":
                self.step("search", result, max_tokens, query=action.query, flag="repeated_query", note=action.thought)
                self.commit(asked, result, render("repeated_query", query=action.query))
                return "repeated"
        self.queries.add(key)
        hits = await self.search(action.query)
        self.step(
            "search", result, max_tokens, query=action.query, note=action.thought,
            retrieved=tuple(h.chunk_id for h in hits), docs=tuple(h.doc_id for h in hits),
        )  # fmt: skip
        self.record_side_calls(action.query)
        hits, extra = await self.assess(hits)
        self.seen_chunks.extend(h.chunk_id for h in hits)
        for h in hits:
            self.shown[self.label(h.chunk_id)] = (h.chunk_id, h.doc_id)
        self.commit(asked, result, self.observation(action.query, hits) + extra)
        return "search"

    def commit(self, asked: str, result: ChatResult, outcome: str, tool_outcome: str | None = None) -> None:
        """Add an action turn to the history; ``outcome`` reaches the model in the next user message,
        or, when the turn made native tool calls, as each call's ``tool`` result (``tool_outcome`` if given)."""
        if result.tool_calls:  # call ids of our own: a provider's are random, and would change every prompt after
            calls = [
                dataclasses.replace(c, id=f"call_{self.traj.action_turns}_{i}") for i, c in enumerate(result.tool_calls)
            ]
            results = [tool_message(call, tool_outcome or outcome) for call in calls]
            self.history.append((asked, [assistant_message(result.text, calls), *results]))
            self.pending = ""
        else:
            self.history.append((asked, result.text))
            self.pending = outcome

    def observation(self, query: str, hits: list[Any]) -> str:
        if not hits:
            return render("observation_empty_unseen" if self.agent.exclude_seen else "observation_empty", query=query)
        lines = [f"[{i}] (id {self.label(h.chunk_id)}) {h.title}: {h.text}" for i, h in enumerate(hits, 1)]
        return render("observation", query=query, results="\n".join(lines))

    async def answer(self, stop_reason: str) -> None:
        forced = stop_reason in FORCED_STOPS
        max_tokens, over_budget = self.ledger.answer_max_tokens()
        fmt = render(
            ("answer_format_json", "answer_format_text", _CITE_JSON, _CITE_TEXT)[
                (0 if self.schema_answer else 1) + (2 if self.agent.cite else 0)
            ]
        )
        if self.agent.abstain:
            fmt = f"{fmt} {render(_ANSWER_ABSTAIN).strip()}"
        if forced:
            why = {
                "max_total_tokens": "Your output-token budget is used up.",
                "max_turns": "You have used all your turns.",
                "max_invalid_turns": "Too many replies could not be used.",
                "context_window": "The conversation has filled your context window.",
            }[stop_reason]
            instruction = render("forced_answer", why=why, question=self.item.question, format=fmt).strip()
        else:
            instruction = render("answer", question=self.item.question, format=fmt).strip()
        need = min(max_tokens, self.config.budget.forced_answer_tokens)
        messages = self.fitting(instruction, need)
        try:
            result, sent_max = await self.answer_call(messages, max_tokens)
        except ContextFull:
            # The window's size was over-estimated: answer from the question alone.
            messages = [messages[0], {"role": "user", "content": self.user_message(instruction)}]
            try:
                result, sent_max = await self.answer_call(messages, max_tokens)
            except ContextFull as exc:
                raise _Abort(f"answer call failed: the context window is too small: {exc}") from exc
        kind = "forced_answer" if forced else "answer"
        self.step(kind, result, sent_max, flag="over_budget" if over_budget else None)
        self.traj.prediction = parse_answer(result.text)
        if self.agent.abstain and normalize_answer(self.traj.prediction) == ABSTAINED:
            self.traj.stop_reason = "abstained"  # declined at the answer turn (module docstring)
            self.traj.prediction = ABSTAINED
        if self.agent.cite:
            self.cite(parse_cite(result.text))

    def label(self, chunk_id: str) -> str:
        """The opaque id ``chunk_id`` is shown under: ``p<n>``, ``n`` counting this item's distinct
        passages in the order they were first shown (the same passage keeps its id)."""
        if chunk_id not in self.labels:
            self.labels[chunk_id] = f"p{len(self.labels) + 1}"
            self.traj.passage_ids[self.labels[chunk_id]] = chunk_id
        return self.labels[chunk_id]

    def cite(self, ids: list[str]) -> None:
        """Keep the cited ids (as written) and the documents they name, mapped back from the opaque
        ids shown; an id of nothing shown is counted as ``cite_unseen`` (it rests on no passage)."""
        found = [self.shown[i][1] if i in self.shown else None for i in ids]
        self.traj.cite = ids
        self.traj.cited_docs = list(dict.fromkeys(d for d in found if d is not None))
        self.traj.cite_unseen = sum(1 for d in found if d is None)

    async def answer_call(self, messages: list[dict[str, Any]], max_tokens: int) -> tuple[ChatResult, int]:
        """The answer call with ``max_tokens`` clamped to the window; returns the result and the cap sent."""
        max_tokens = self.window.clamp(messages, max_tokens)
        cite = list(self.shown) if self.agent.cite else None
        schema = answer_schema(max_tokens, cite) if self.schema_answer else None
        return await self.call("answer", messages, max_tokens, schema), max_tokens

    async def run(self) -> Trajectory:
        start = time.perf_counter()
        try:
            stop = await self.turns()
            self.traj.stop_reason = stop
            if stop == "abstained":
                self.traj.prediction = ABSTAINED
                if self.agent.cite:
                    self.cite([])
            else:
                await self.answer(stop)
        except _Abort as exc:
            self.traj.stop_reason = "error"
            self.traj.error = str(exc)
            self.traj.prediction = ""
        self.traj.latency_s = time.perf_counter() - start
        return self.traj

    def unusable_turns(self) -> int:
        """Action turns that could not be used: invalid ones, and repeats when they are not run."""
        repeats = self.traj.repeated_queries if self.agent.repeated_query == "invalid" else 0
        return self.traj.invalid_turns + repeats

    async def turns(self) -> str:
        """Plan, act and reflect until a stop reason holds; returns it."""
        if self.agent.action_format == "tools" and not getattr(self.model, "supports_tools", False):
            raise _Abort(f"action_format 'tools' needs native tool calling: {getattr(self.model, 'tools_problem', '')}")
        try:
            if self.agent.planning and not self.ledger.tokens_spent:
                await self.plan()
            last_reflection = 0
            while True:
                if self.ledger.tokens_spent:
                    stop = "max_total_tokens"
                    break
                if not self.ledger.can_search:
                    stop = "max_searches"
                    break
                if self.traj.action_turns >= self.max_turns:
                    stop = "max_turns"
                    break
                turns = self.traj.action_turns
                if (
                    self.agent.reflection
                    and turns
                    and turns % self.agent.reflect_every == 0
                    and turns != last_reflection
                ):
                    last_reflection = turns
                    await self.reflect()
                    continue
                outcome = await self.action_turn()
                if outcome in ("ready", "abstain"):
                    stop = "answered" if outcome == "ready" else "abstained"
                    break
                limit = self.agent.max_invalid_turns
                if outcome in ("invalid", "repeated") and limit is not None and self.unusable_turns() >= limit:
                    stop = "max_invalid_turns"
                    break
        except ContextFull as exc:
            self.traj.context_note = str(exc)
            return "context_window"
        return stop


async def run_bcas(
    item: Item,
    model: ChatModel,
    retriever: Retriever,
    config: RunConfig,
    *,
    keep_requests: bool = False,
    task: str | None = None,
) -> Trajectory:
    """Run the BCAS loop on one item and return its trajectory (BCAS §3.4).

    ``keep_requests=True`` keeps every ``ChatRequest`` sent (for inspection and
    tests).  ``task``: the dataset's task (``Dataset.task``), the generator prompt of a
    MADARA treatment on the search tool (``AgentConfig.assess``); never the item's gold.
    See the module docstring for the stop reasons and the answer rules.
    """
    return await _Run(item, model, retriever, config, keep_requests, task).run()
