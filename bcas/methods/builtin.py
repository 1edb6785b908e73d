"""The non-agentic and prompted baselines the BCAS paper leaves out (BCAS §6.1, §7).

Each is ``async def <name>(run: MethodRun) -> stop reason`` on the ledger and budgets of
:class:`bcas.methods.base.MethodRun`, registered in :data:`bcas.registry.METHODS` (and as a
run kind of the same name).  The documented sequence of steps of each (the record's
``steps``, by ``kind``) is in its docstring; ``docs/methods.md`` is the user's page and
``docs/fidelity.md`` lists what the papers leave open.
"""

from __future__ import annotations

import re

from bcas.agent.protocol import (
    ANSWER_MAX_CHARS,
    CHARS_PER_TOKEN,
    JSON_OVERHEAD_TOKENS,
    MIN_FIELD_CHARS,
    QUERY_MAX_CHARS,
    parse_answer,
)
from bcas.callshape import CallShape
from bcas.config import RunConfig
from bcas.methods.base import MethodRun, TokensSpent

UNLIMITED_ROUNDS = 3
"""Iter-RetGen rounds under unlimited searches (Shao et al. 2023 §4 report T = 1 to 7; FlashRAG's
default ``iter_num`` is 3).  With a search budget the rounds are ``max_searches``."""
MAX_STEPS = 8
"""IRCoT / Self-Ask steps under unlimited searches (neither paper bounds a run by a search budget;
IRCoT §3.1 stops at "answer is" or a step cap)."""
IRCOT_MAX_PASSAGES = 15
"""IRCoT §3.1 caps the paragraphs it collects (15 in its experiments); the first 15 are kept."""
REASONING_MAX_CHARS = 600
"""A constant cap of Iter-RetGen's ``reasoning`` field under a JSON schema (never grown with a budget)."""
_ANSWER_IS = re.compile(r"answer is", re.IGNORECASE)
_FOLLOW_UP = re.compile(r"follow[ -]?up\s*:\s*(?P<q>.+)", re.IGNORECASE)
_FINAL = re.compile(r"final answer is\s*:?\s*(?P<a>.+)", re.IGNORECASE)
_YES_NO = re.compile(r"\s*(?:are follow up questions needed here\s*:\s*)?\b(yes|no)\b\.?", re.IGNORECASE)
_INTERMEDIATE = re.compile(r"intermediate answer\s*:\s*(?P<a>.+)", re.IGNORECASE)


def _string(max_chars: int) -> dict[str, object]:
    return {"type": "string", "maxLength": max_chars}


def _object(**fields: dict[str, object]) -> dict[str, object]:
    return {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}


def _fit(max_tokens: int, cap: int) -> int:
    """A string field's cap for a reply of ``max_tokens``: at most ``cap`` (a constant), less when the allowance is small."""
    return min(cap, max(MIN_FIELD_CHARS, (max_tokens - JSON_OVERHEAD_TOKENS) * CHARS_PER_TOKEN))


async def closed_book(run: MethodRun) -> str:
    """The model alone: one answer call, no search (FlashRAG's naive generation, Jin et al. 2024 §3).

    Steps: ``answer``.  Stop reason: ``answered``.  Spends 0 searches whatever the budget.
    """
    await run.answer(run.render("answer", question=run.item.question))
    return "answered"


async def retrieve_read(run: MethodRun) -> str:
    """Retrieve once with the question as the query, then read (Lewis et al. 2020, "Retrieval-Augmented
    Generation for Knowledge-Intensive NLP Tasks", §2: retrieve the top passages, generate from them).

    Steps: ``search``, ``answer``.  Stop reason: ``answered``; ``max_searches`` when the
    budget allows no search (the answer then reads no passage).
    """
    if not run.can_search:
        await run.answer(run.render("answer", question=run.item.question, passages="(no passages)"))
        return "max_searches"
    hits = await run.search(run.item.question)
    await run.answer(run.render("answer", question=run.item.question, passages=run.passages(hits)))
    return "answered"


async def iter_retgen(run: MethodRun) -> str:
    """Iter-RetGen (Shao et al. 2023, "Enhancing Retrieval-Augmented Large Language Models with Iterative
    Retrieval-Generation Synergy", §3): T rounds; round t retrieves with the question joined to round
    t-1's output (the question alone in round 1) and generates a chain-of-thought answer from the
    passages; the last round's answer is the prediction.

    T is ``max_searches`` (one search a round; :data:`UNLIMITED_ROUNDS` when unlimited).  Steps:
    (``search``, ``generate``) × (T-1), ``search``, ``answer``.  Stop reasons: ``max_searches``
    (its T rounds are done); ``max_total_tokens`` (fewer than ``forced_answer_tokens`` left above
    the answer's reserve before the last round: a ``forced_answer`` step answers from the last
    round's passages).  With no search allowed it answers once without passages (``max_searches``).
    """
    rounds = run.config.budget.max_searches
    rounds = UNLIMITED_ROUNDS if rounds is None else rounds
    question = run.item.question
    last_output = ""
    passages = "(no passages)"
    fmt = run.render("format_json" if run.schema else "format_text")
    for t in range(rounds):
        query = f"{question} {last_output}".strip()
        hits = await run.search(query)
        passages = run.passages(hits)
        prompt = run.render("generate", passages=passages, question=question, format=fmt)
        final = t == rounds - 1
        try:
            max_tokens = run.answer_allowance() if final else run.step_allowance()
        except TokensSpent:
            await run.answer(run.render("generate", passages=passages, question=question, format="").strip(), True)
            return "max_total_tokens"
        if max_tokens <= 0:  # a provider overran its allowance: nothing is left for the last round
            return "max_total_tokens"
        schema = _object(reasoning=_string(_fit(max_tokens, REASONING_MAX_CHARS)), answer=_string(ANSWER_MAX_CHARS))
        result = await run.call(
            "answer" if final else "generate", run.messages(prompt), max_tokens, schema if run.schema else None
        )
        reasoning = run.read_field(result.text, "reasoning")
        answer = parse_answer(result.text)
        last_output = " ".join(p for p in (reasoning, answer) if p) if reasoning is not None else result.text.strip()
        run.prediction = answer
    if rounds == 0:
        await run.answer(run.render("generate", passages=passages, question=question, format="").strip())
    return "max_searches"


async def ircot(run: MethodRun) -> str:
    """IRCoT (Trivedi et al. 2023, "Interleaving Retrieval with Chain-of-Thought Reasoning for
    Knowledge-Intensive Multi-Step Questions", §3.1): retrieve with the question; then repeat
    *reason* (the next chain-of-thought sentence, from the question, the paragraphs collected so
    far and the sentences so far) and *retrieve* (that sentence as the query, its paragraphs added
    to the collection) until a sentence says "answer is" or the searches run out; then the reader
    answers from the collected paragraphs and the chain of thought (§3.2, a QA reader).

    Steps: ``search``, then (``generate``, ``search``) per further step, then ``answer``; a
    ``generate`` whose sentence says "answer is" goes straight to ``answer``.  Stop reasons:
    ``answered`` (a sentence said "answer is"), ``max_searches``, ``max_total_tokens``,
    ``max_steps`` (:data:`MAX_STEPS` sentences under unlimited searches).  Paragraphs already
    collected are excluded from later searches; the first :data:`IRCOT_MAX_PASSAGES` are kept.
    """
    question = run.item.question
    collected: list[object] = []
    sentences: list[str] = []
    fmt = run.render("format_json" if run.schema else "format_text")

    def reader() -> str:
        cot = " ".join(sentences) or "(none)"
        return run.render("answer", passages=run.passages(collected), cot=cot, question=question)

    if not run.can_search:
        await run.answer(reader())
        return "max_searches"
    collected.extend((await run.search(question))[:IRCOT_MAX_PASSAGES])
    stop = "max_steps"
    for _ in range(run.step_bound(MAX_STEPS)):
        if not run.can_search:
            stop = "max_searches"
            break
        prompt = run.render(
            "reason",
            passages=run.passages(collected),
            question=question,
            cot=" ".join(sentences) or "(none)",
            format=fmt,
        )
        try:
            allowance = run.step_allowance()
        except TokensSpent:
            await run.answer(reader(), forced=True)
            return "max_total_tokens"
        schema = _object(sentence=_string(_fit(allowance, QUERY_MAX_CHARS)))
        result = await run.generate(prompt, schema, stop=None if run.schema else ("\n",), note="reasoning sentence")
        field = run.read_field(result.text, "sentence")
        lines = (field if field is not None else result.text).strip().splitlines()
        text = lines[0].strip() if lines else ""
        if text:
            sentences.append(text)
        if _ANSWER_IS.search(text):
            stop = "answered"
            break
        seen = [h.chunk_id for h in collected]  # type: ignore[attr-defined]
        hits = await run.search(text or question, exclude=seen)
        collected.extend(hits[: max(0, IRCOT_MAX_PASSAGES - len(collected))])
    else:
        stop = "max_steps" if run.can_search else "max_searches"
    await run.answer(reader())
    return stop


async def self_ask(run: MethodRun) -> str:
    """Self-Ask with a search engine (Press et al. 2023, "Measuring and Narrowing the Compositionality
    Gap in Language Models", §3-§4): the prompt ends "Are follow up questions needed here:" and the
    model writes Yes or No (Figure 3); after No it gives the final answer at once; after Yes it asks
    itself follow-up questions, each goes to the search tool and its intermediate answer is added to
    the prompt; it ends with "So the final answer is".  Our search tool returns passages, not an
    answer box, so the model reads the follow-up's passages into its intermediate answer (one more
    call).

    Steps: the first ``generate`` (Yes or No, then the first follow-up; after No the final answer,
    an ``answer`` step), then (``search`` [the follow-up], ``generate`` [its intermediate answer],
    ``generate`` [the next step]) per follow-up, ending with the step that gave the final answer (an
    ``answer`` step) or, when the search budget is spent, an ``answer`` call over the follow-ups.
    Stop reasons: ``answered`` (the model gave the final answer), ``max_searches``,
    ``max_total_tokens``, ``max_steps`` (:data:`MAX_STEPS` follow-ups under unlimited searches).
    The model's Yes or No is kept in the record (``extra.follow_ups_needed``).
    """
    question = run.item.question
    history: list[str] = []
    needed: str | None = None  # the model's own Yes/No, written at the first step
    step_fmt = run.render("format_json" if run.schema else "format_text")
    first_fmt = run.render("first_json" if run.schema else "first_text")
    inter_fmt = run.render("intermediate_json" if run.schema else "intermediate_text")

    def so_far() -> str:
        return "\n".join(([f"Are follow up questions needed here: {needed}."] if needed else []) + history)

    for _ in range(run.step_bound(MAX_STEPS)):
        if not run.can_search and needed is not None:
            await run.answer(run.render("answer", history=so_far(), question=question))
            return "max_searches"
        if needed is None:
            prompt = run.render("step_first", question=question, format=first_fmt)
        else:
            prompt = run.render("step", question=question, needed=needed, history="\n".join(history), format=step_fmt)
        try:
            allowance = run.step_allowance()
        except TokensSpent:
            await run.answer(run.render("answer", history=so_far(), question=question), forced=True)
            return "max_total_tokens"
        text_field = _string(_fit(allowance, QUERY_MAX_CHARS))
        if needed is None:
            schema = _object(follow_ups_needed={"type": "string", "enum": ["Yes", "No"]}, text=text_field)
        else:
            schema = _object(next={"type": "string", "enum": ["follow_up", "final_answer"]}, text=text_field)
        result = await run.generate(prompt, schema, stop=None if run.schema else ("\nIntermediate answer",))
        if needed is None:
            needed, kind, text = _self_ask_first(run, result.text)
            run.notes["follow_ups_needed"] = needed
        else:
            kind, text = _self_ask_step(run, result.text)
        if kind == "final_answer":
            run.ledger.steps[-1].kind = "answer"
            run.prediction = parse_answer(text[: ANSWER_MAX_CHARS * 2]) if text else ""
            return "answered"
        if not run.can_search:  # "Yes", with no search allowed: answer over nothing
            await run.answer(run.render("answer", history=so_far(), question=question))
            return "max_searches"
        history.append(f"Follow up: {text or question}")
        hits = await run.search(text or question)
        try:
            result = await run.generate(
                run.render("intermediate", passages=run.passages(hits), follow_up=text or question, format=inter_fmt),
                _object(intermediate_answer=_string(ANSWER_MAX_CHARS)),
                note="intermediate answer",
            )
        except TokensSpent:
            await run.answer(run.render("answer", history=so_far(), question=question), forced=True)
            return "max_total_tokens"
        found = run.read_field(result.text, "intermediate_answer")
        if found is None:
            match = _INTERMEDIATE.search(result.text)
            found = match.group("a") if match else parse_answer(result.text)
        history.append(f"Intermediate answer: {found.strip()}")
    await run.answer(run.render("answer", history=so_far(), question=question))
    return "max_steps"


def _self_ask_first(run: MethodRun, text: str) -> tuple[str, str, str]:
    """(``Yes`` | ``No``, ``follow_up`` | ``final_answer``, its text) of Self-Ask's first step: the
    model's answer to "Are follow up questions needed here:"; an unreadable one is a Yes."""
    said = run.read_field(text, "follow_ups_needed")
    if said in ("Yes", "No"):
        body = run.read_field(text, "text") or ""
        return said, ("final_answer" if said == "No" else "follow_up"), body
    match = _YES_NO.match(text)
    needed = "No" if match and match.group(1).lower() == "no" else "Yes"
    rest = text[match.end() :] if match else text
    if needed == "No":
        final = _FINAL.search(rest)
        lines = rest.strip().splitlines()
        return needed, "final_answer", (final.group("a").strip() if final else (lines[0].strip() if lines else ""))
    kind, body = _self_ask_step(run, rest)
    return needed, kind, body


def _self_ask_step(run: MethodRun, text: str) -> tuple[str, str]:
    """(``follow_up`` | ``final_answer``, its text) of a Self-Ask step; an unreadable step is a follow-up."""
    kind = run.read_field(text, "next")
    if kind in ("follow_up", "final_answer"):
        return kind, run.read_field(text, "text") or ""
    final = _FINAL.search(text)
    if final:
        return "final_answer", final.group("a").strip()
    follow = _FOLLOW_UP.search(text)
    first = (follow.group("q") if follow else text).strip().splitlines()
    return "follow_up", (first[0].strip()[:QUERY_MAX_CHARS] if first else "")


# -- call structures (the estimate's, bcas.callshape): one function per method, beside its calls --


def _answer_cap(config: RunConfig) -> float:
    b = config.budget
    return float(
        b.max_total_tokens if b.per_turn_max_tokens is None else min(b.per_turn_max_tokens, b.max_total_tokens)
    )


def _budget_cap(config: RunConfig, calls: float) -> float:
    """Completion tokens of ``calls`` calls at most: each its allowance, never beyond ``max_total_tokens``."""
    b = config.budget
    per = b.max_total_tokens if b.per_turn_max_tokens is None else b.per_turn_max_tokens
    return float(min(b.max_total_tokens, per * calls))


def closed_book_shape(config: RunConfig) -> CallShape:
    """:func:`closed_book`: one answer call, no search."""
    return CallShape(calls=1, out_tokens=_answer_cap(config))


def retrieve_read_shape(config: RunConfig) -> CallShape:
    """:func:`retrieve_read`: one search (none when the budget allows none), one answer call."""
    searches = 0 if config.budget.max_searches == 0 else 1
    return CallShape(calls=1, searches=searches, out_tokens=_answer_cap(config), passages=searches * config.retrieval.k)


def iter_retgen_shape(config: RunConfig) -> CallShape:
    """:func:`iter_retgen`: T rounds of one search and one call (one call and no search when T = 0);
    the token budget may cut it to one call (a forced answer)."""
    rounds = config.budget.max_searches
    rounds = UNLIMITED_ROUNDS if rounds is None else int(rounds)
    if rounds == 0:
        return CallShape(calls=1, out_tokens=_answer_cap(config))
    return CallShape(
        calls=rounds, calls_min=1, searches=rounds, searches_min=1, out_tokens=_budget_cap(config, rounds),
        passages=rounds * config.retrieval.k, note="the token budget may end the rounds early",
    )  # fmt: skip


def ircot_shape(config: RunConfig) -> CallShape:
    """:func:`ircot`: a first search, then (sentence, search) until the searches run out or a
    sentence says "answer is" (at least one sentence), then the reader's answer."""
    limit = config.budget.max_searches
    if limit == 0:
        return CallShape(calls=1, out_tokens=_answer_cap(config))
    sentences = MAX_STEPS if limit is None else int(limit) - 1
    k = config.retrieval.k
    shown = sum(min(IRCOT_MAX_PASSAGES, k * (i + 1)) for i in range(sentences)) + min(
        IRCOT_MAX_PASSAGES, k * (sentences + 1)
    )
    return CallShape(
        calls=sentences + 1, calls_min=min(2, sentences + 1), searches=sentences + 1, searches_min=1,
        out_tokens=_budget_cap(config, sentences + 1), passages=shown,
        note='a sentence saying "answer is" ends it after one sentence',
    )  # fmt: skip


def self_ask_shape(config: RunConfig) -> CallShape:
    """:func:`self_ask`: the first step (Yes or No), then per follow-up a search, its intermediate
    answer and the next step, until the searches run out (then one answer call) or the model
    gives the final answer; a No answers at the first step."""
    limit = config.budget.max_searches
    follow_ups = MAX_STEPS if limit is None else int(limit)
    calls = 2 * follow_ups + 1 if follow_ups else 2  # S follow-ups: 2S calls and the answer; no search: step + answer
    return CallShape(
        calls=calls, calls_min=1, searches=follow_ups, searches_min=0, out_tokens=_budget_cap(config, calls),
        passages=follow_ups * config.retrieval.k, note="a No, or the final answer, ends it early",
    )  # fmt: skip


__all__ = [
    "IRCOT_MAX_PASSAGES",
    "MAX_STEPS",
    "UNLIMITED_ROUNDS",
    "closed_book",
    "closed_book_shape",
    "ircot",
    "ircot_shape",
    "iter_retgen",
    "iter_retgen_shape",
    "retrieve_read",
    "retrieve_read_shape",
    "self_ask",
    "self_ask_shape",
]
