"""The methods beside the BCAS loop (bcas.methods) on scripted models: what each spends of its
budgets, the sequence of calls each documents, its stop reasons, and that its prompts never
depend on the gold answer."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.items import Item
from bcas.llm.base import ChatRequest
from bcas.methods import METHOD_STOP_REASONS, run_method
from bcas.methods.base import method_shape
from bcas.methods.builtin import IRCOT_MAX_PASSAGES, MAX_STEPS, UNLIMITED_ROUNDS
from bcas.records import Answer
from bcas.registry import METHODS, RUN_KINDS
from bcas.testing.scripted import FakeRetriever, ScriptedModel

ITEM = Item(id="q1", question="Which country is the birthplace of the author of Hamlet?", answers=("England",),
            documents=())  # fmt: skip
PASSAGES = [
    ("d1", "Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
    ("d2", "William Shakespeare", "William Shakespeare was born in Stratford-upon-Avon, England."),
    ("d3", "Stratford", "Stratford-upon-Avon is a market town in England."),
    ("d4", "Paris", "Paris is the capital of France."),
    ("d5", "Denmark", "Hamlet is set in Denmark."),
]
BUILTIN = ("closed_book", "retrieve_read", "iter_retgen", "ircot", "self_ask")
# A reply that keeps every iterative method going: no "answer is", always a follow-up.
KEEP_GOING = json.dumps({
    "answer": "England", "reasoning": "Hamlet was written by Shakespeare.", "sentence": "Shakespeare wrote Hamlet.",
    "next": "follow_up", "text": "Where was Shakespeare born?", "intermediate_answer": "Stratford",
})  # fmt: skip


def config(searches: int | None = 3, tokens: int = 2000, per_turn: int | None = None) -> RunConfig:
    budget = Budget(max_searches=searches, max_total_tokens=tokens, per_turn_max_tokens=per_turn)
    return RunConfig(budget=budget, retrieval=RetrievalConfig(mode="bm25", k=2))


def answer(name: str, model: ScriptedModel, cfg: RunConfig, item: Item = ITEM) -> Answer:
    result, _ = asyncio.run(run_method(name, item, model, FakeRetriever(PASSAGES, k=2), cfg))
    return result


def kinds(a: Answer) -> list[str]:
    return [s["kind"] for s in a.steps]


def always(text: str) -> ScriptedModel:
    return ScriptedModel(lambda request, index: text)


def test_every_builtin_method_is_one_registration_with_its_paper_and_run_kind() -> None:
    for name in BUILTIN:
        assert name in METHODS and name in RUN_KINDS
        assert METHODS.meta(name, "paper")  # cited
        prompts = RUN_KINDS.meta(name, "prompts")
        assert f"methods/prompts/{name}" in prompts and "methods/prompts" in prompts


@pytest.mark.parametrize("searches", [0, 1, 3, None])
def test_closed_book_never_searches_and_retrieve_read_searches_once(searches: int | None) -> None:
    closed = answer("closed_book", always(KEEP_GOING), config(searches))
    assert closed.searches_used == 0 and kinds(closed) == ["answer"] and closed.llm_calls == 1
    assert closed.prediction == "England" and closed.stop_reason == "answered"
    read = answer("retrieve_read", always(KEEP_GOING), config(searches))
    if searches == 0:  # nothing to retrieve with: it reads no passage and says why
        assert read.searches_used == 0 and kinds(read) == ["answer"] and read.stop_reason == "max_searches"
    else:
        assert read.searches_used == 1 and kinds(read) == ["search", "answer"] and read.stop_reason == "answered"
        assert read.steps[0]["query"] == ITEM.question  # the question is the query


def test_iter_retgen_runs_one_round_per_search_and_queries_with_the_last_output() -> None:
    model = always(KEEP_GOING)
    a = answer("iter_retgen", model, config(3))
    assert kinds(a) == ["search", "generate", "search", "generate", "search", "answer"]
    assert a.searches_used == 3 and a.stop_reason == "max_searches" and a.prediction == "England"
    queries = [s["query"] for s in a.steps if s["kind"] == "search"]
    assert queries[0] == ITEM.question
    # rounds 2 and 3: the question joined to the previous round's output (Shao et al. 2023 §3)
    assert all(q.startswith(ITEM.question) and "Shakespeare" in q and "England" in q for q in queries[1:])
    unlimited = answer("iter_retgen", always(KEEP_GOING), config(None))
    assert unlimited.searches_used == UNLIMITED_ROUNDS


def test_ircot_reasons_one_sentence_per_search_and_stops_at_answer_is() -> None:
    a = answer("ircot", always(KEEP_GOING), config(3))
    assert kinds(a) == ["search", "generate", "search", "generate", "search", "answer"]
    assert a.stop_reason == "max_searches" and a.searches_used == 3
    searches = [s for s in a.steps if s["kind"] == "search"]
    assert searches[0]["query"] == ITEM.question and searches[1]["query"] == "Shakespeare wrote Hamlet."
    # collected paragraphs are not retrieved again
    seen = [c for s in searches for c in s["retrieved"]]
    assert len(seen) == len(set(seen))

    def script(request: ChatRequest, index: int) -> str:
        if request.json_schema and "sentence" in request.json_schema["properties"]:
            return json.dumps({"sentence": "Shakespeare was born in England, so the answer is England."})
        return json.dumps({"answer": "England"})

    done = answer("ircot", ScriptedModel(script), config(3))
    assert kinds(done) == ["search", "generate", "answer"] and done.stop_reason == "answered"
    assert done.searches_used == 1 and done.prediction == "England" and done.early_stop
    # the reader sees the chain of thought
    model = ScriptedModel(script)
    asyncio.run(run_method("ircot", ITEM, model, FakeRetriever(PASSAGES, k=2), config(3)))
    assert "so the answer is England" in model.requests[-1].messages[-1]["content"]
    assert IRCOT_MAX_PASSAGES == 15 and MAX_STEPS >= 3


def test_self_ask_follows_up_through_the_search_tool_then_answers() -> None:
    a = answer("self_ask", always(KEEP_GOING), config(2))
    assert kinds(a) == ["generate", "search", "generate"] * 2 + ["answer"]
    assert a.stop_reason == "max_searches" and a.searches_used == 2
    assert [s["query"] for s in a.steps if s["kind"] == "search"] == ["Where was Shakespeare born?"] * 2

    replies = iter([
        json.dumps({"next": "follow_up", "text": "Who wrote Hamlet?"}),
        json.dumps({"intermediate_answer": "William Shakespeare"}),
        json.dumps({"next": "final_answer", "text": "England"}),
    ])  # fmt: skip
    model = ScriptedModel(lambda request, index: next(replies))
    done = answer("self_ask", model, config(3))
    assert kinds(done) == ["generate", "search", "generate", "answer"]
    assert done.stop_reason == "answered" and done.prediction == "England" and done.searches_used == 1
    # the step prompt carries the follow-up and its intermediate answer (Press et al. 2023's format)
    last = model.requests[-1].messages[-1]["content"]
    assert "Follow up: Who wrote Hamlet?" in last and "Intermediate answer: William Shakespeare" in last


def test_self_ask_lets_the_model_say_whether_follow_ups_are_needed() -> None:
    """Press et al. 2023 (Figure 3): the prompt ends "Are follow up questions needed here:" and the
    model writes Yes or No; a No answers at once, with no search."""
    no = ScriptedModel(lambda request, index: json.dumps({"follow_ups_needed": "No", "text": "England"}))
    a = answer("self_ask", no, config(3))
    assert kinds(a) == ["answer"] and a.searches_used == 0 and a.prediction == "England"
    assert a.stop_reason == "answered" and a.extra["follow_ups_needed"] == "No"
    first = no.requests[0].messages[-1]["content"]
    assert "Are follow up questions needed here:\n" in first and "here: Yes" not in first
    text_no = ScriptedModel(lambda request, index: "No.\nSo the final answer is: England", supports_json_schema=False)
    b = answer("self_ask", text_no, config(3))
    assert b.prediction == "England" and b.searches_used == 0 and b.extra["follow_ups_needed"] == "No"
    # a Yes is the model's own word, carried into the later steps' prompts
    replies = iter(["Yes.\nFollow up: Who wrote Hamlet?", "Intermediate answer: Shakespeare",
                    "So the final answer is: England"])  # fmt: skip
    yes = ScriptedModel(lambda request, index: next(replies), supports_json_schema=False)
    c = answer("self_ask", yes, config(3))
    assert c.searches_used == 1 and c.prediction == "England" and c.extra["follow_ups_needed"] == "Yes"
    assert "Are follow up questions needed here: Yes." in yes.requests[-1].messages[-1]["content"]


def test_text_format_without_a_schema_is_read_too() -> None:
    model = ScriptedModel(
        lambda request, index: "Follow up: Who wrote Hamlet?" if index == 0 else "So the final answer is: England",
        supports_json_schema=False,
    )
    a = answer("self_ask", model, config(3))
    assert a.prediction == "England" and a.stop_reason == "answered"
    assert all(r.json_schema is None for r in model.requests)


def test_a_token_budget_too_small_for_a_step_goes_straight_to_a_forced_answer() -> None:
    # 100 tokens: 48 held back for the answer, 52 left, a step needs 48 -> one step then the answer
    a = answer("ircot", always(KEEP_GOING + " pad" * 200), config(3, tokens=100))
    assert a.stop_reason == "max_total_tokens" and kinds(a)[-1] == "forced_answer"
    assert a.tokens_out <= 100
    b = answer("self_ask", always(KEEP_GOING), config(3, tokens=60))
    assert b.stop_reason == "max_total_tokens" and kinds(b) == ["forced_answer"] and b.tokens_out <= 60


def test_errors_are_recorded_not_raised() -> None:
    broken = ScriptedModel([KEEP_GOING], fail_at=1)
    a = answer("iter_retgen", broken, config(3))
    assert a.stop_reason == "error" and a.prediction == "" and "scripted failure" in (a.error or "")
    assert kinds(a) == ["search", "generate", "search"]  # the ledger up to the failure is kept


def test_prompts_never_depend_on_the_gold_answer() -> None:
    """Permute the gold answers: every request of every method stays byte-identical."""
    for name in BUILTIN:
        sent = []
        for gold in (("England",), ("Denmark", "x")):
            model = always(KEEP_GOING)
            asyncio.run(run_method(name, replace(ITEM, answers=gold), model, FakeRetriever(PASSAGES, k=2), config(3)))
            sent.append([(r.messages, r.max_tokens, json.dumps(r.json_schema)) for r in model.requests])
        assert sent[0] == sent[1], name


def test_every_schema_is_bounded_whatever_the_budget() -> None:
    """No string in any schema grows with the budget (llama.cpp compiles maxLength into rules)."""

    def caps(schema: Any) -> list[int]:
        if isinstance(schema, dict):
            own = [schema["maxLength"]] if "maxLength" in schema else []
            return own + [c for v in schema.values() for c in caps(v)]
        return [c for v in schema for c in caps(v)] if isinstance(schema, list) else []

    for name in BUILTIN:
        seen = []
        for tokens in (2000, 16000, 128000):
            model = always(KEEP_GOING)
            asyncio.run(run_method(name, ITEM, model, FakeRetriever(PASSAGES, k=2), config(3, tokens)))
            seen.append([caps(r.json_schema) for r in model.requests if r.json_schema])
        assert seen[0] == seen[1] == seen[2], name
        assert all(c <= 600 for calls in seen for cs in calls for c in cs)


REPLIES = st.one_of(
    st.just(KEEP_GOING),
    st.text(max_size=60),
    st.builds(
        json.dumps,
        st.fixed_dictionaries({
            "next": st.sampled_from(["follow_up", "final_answer", "other"]),
            "text": st.text(max_size=30),
            "sentence": st.sampled_from(["So the answer is X.", "Shakespeare wrote it.", ""]),
            "answer": st.text(max_size=10),
            "reasoning": st.text(max_size=40),
        }),
    ),
    st.integers(1, 400).map(lambda n: "word " * n),
)  # fmt: skip


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(BUILTIN),
    searches=st.one_of(st.none(), st.integers(0, 5)),
    tokens=st.integers(1, 3000),
    per_turn=st.one_of(st.none(), st.integers(1, 400)),
    replies=st.lists(REPLIES, min_size=1, max_size=6),
)
def test_no_method_spends_more_than_its_budgets(
    name: str, searches: int | None, tokens: int, per_turn: int | None, replies: list[str]
) -> None:
    cfg = config(searches, tokens, per_turn)
    model = ScriptedModel(replies)
    a = answer(name, model, cfg)
    assert a.stop_reason in METHOD_STOP_REASONS and a.stop_reason != "error", a.error
    if searches is not None:
        assert a.searches_used <= searches
    assert a.tokens_out <= tokens
    assert model.completion_tokens_total == a.tokens_out  # every call is on the ledger
    assert a.llm_calls == len(model.requests)
    assert a.searches_used == sum(1 for s in a.steps if s["kind"] == "search")
    if name == "closed_book":
        assert a.searches_used == 0
    if name == "retrieve_read":
        assert a.searches_used == (0 if searches == 0 else 1)
    assert all(r.max_tokens >= 1 for r in model.requests)


@pytest.mark.parametrize("name", ["ircot", "self_ask"])
def test_a_stepwise_method_takes_every_search_its_budget_gives_and_the_step_cap_only_when_unlimited(
    name: str,
) -> None:
    """IRCoT and Self-Ask step until their searches run out; ``MAX_STEPS`` bounds them only under
    unlimited searches (docs/methods.md, docs/fidelity.md)."""
    many = MAX_STEPS + 3
    a = answer(name, always(KEEP_GOING), config(many, tokens=20000))
    assert a.stop_reason == "max_searches" and a.searches_used == many
    unlimited = answer(name, always(KEEP_GOING), config(None, tokens=20000))
    assert unlimited.stop_reason == "max_steps"
    assert unlimited.searches_used == MAX_STEPS + (1 if name == "ircot" else 0)  # IRCoT first searches the question


@pytest.mark.parametrize("name", BUILTIN)
@pytest.mark.parametrize("searches", [0, 1, 3, None])
def test_each_methods_declared_call_structure_is_the_calls_it_makes(name: str, searches: int | None) -> None:
    """The estimate's structure (``method_shape``, ``--bcas-estimate``) against runs: a model that
    keeps going makes the structure's ``calls`` and ``searches`` (the budgets' bound); one that stops
    at its first chance, at least ``calls_min``.  A method whose calls change without its declared
    structure fails here."""
    cfg = config(searches, tokens=20000)
    shape = method_shape(name, cfg)
    going = answer(name, always(KEEP_GOING), cfg)
    assert (going.llm_calls, going.searches_used) == (shape.calls, shape.searches), (name, searches)
    done = json.dumps({"answer": "England", "sentence": "So the answer is England.", "next": "final_answer",
                       "follow_ups_needed": "No", "text": "England", "reasoning": "r"})  # fmt: skip
    early = answer(name, always(done), cfg)
    assert shape.low <= early.llm_calls <= shape.calls, (name, searches, early.llm_calls)
    assert early.searches_used <= shape.searches
