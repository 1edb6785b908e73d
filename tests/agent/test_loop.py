"""The BCAS loop's control flow with a scripted model and an in-memory retriever (BCAS §3.3-§3.4)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bcas.agent import SEARCH_TOOL, STOP_REASONS, run_bcas
from bcas.agent.budget import turn_bound
from bcas.agent.loop import Trajectory
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.llm.base import ChatRequest
from bcas.testing.scripted import BrokenRetriever, FakeRetriever, ScriptedModel

PASSAGES = [
    (
        "d1",
        "Kiss and Tell (1945 film)",
        "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.",
    ),
    ("d2", "Shirley Temple", "Shirley Temple Black served as Chief of Protocol of the United States."),
    ("d3", "Meet Corliss Archer", "Meet Corliss Archer is a radio program from the Golden Age of radio."),
    ("d4", "Janet Waldo", "Janet Waldo voiced Corliss Archer on radio."),
    ("d5", "Lilac Time", "Lilac Time is a 1928 film."),
]
ITEM = Item(
    id="q1",
    question="What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
    answers=("Chief of Protocol",),
    documents=tuple(Document(d, t, x) for d, t, x in PASSAGES),
)


def search(query: str, thought: str = "look it up") -> str:
    return json.dumps({"thought": thought, "action": "search_database", "query": query})


def ready(thought: str = "I know enough") -> str:
    return json.dumps({"thought": thought, "action": "ready_to_answer", "query": ""})


def answer(text: str) -> str:
    return json.dumps({"answer": text})


def run(model: ScriptedModel, retriever: Any = None, **kwargs: Any) -> Trajectory:
    budget = kwargs.pop("budget", Budget(max_searches=3, max_total_tokens=2000))
    agent = AgentConfig(**kwargs)
    config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2), agent=agent)
    retriever = retriever if retriever is not None else FakeRetriever(PASSAGES, k=2)
    return asyncio.run(run_bcas(ITEM, model, retriever, config, keep_requests=True))


def last_user(request: ChatRequest) -> str:
    return request.messages[-1]["content"]


# -- scenarios -------------------------------------------------------------------------


def test_search_then_answer() -> None:
    retriever = FakeRetriever(PASSAGES, k=2)
    model = ScriptedModel(
        [search("Kiss and Tell Corliss Archer"), search("Shirley Temple"), ready(), answer("Chief of Protocol")]
    )
    traj = run(model, retriever, exclude_seen=True)
    assert traj.stop_reason == "answered" and traj.early_stop
    assert traj.prediction == "Chief of Protocol"
    assert [s.kind for s in traj.steps] == ["search", "search", "ready", "answer"]
    assert traj.searches_used == 2
    first, second = traj.steps[0], traj.steps[1]
    assert first.query == "Kiss and Tell Corliss Archer"
    assert first.retrieved == ("d1#0", "d3#0") and first.docs == ("d1", "d3")
    # already-seen chunks are excluded from the second search
    assert retriever.calls[1] == ("Shirley Temple", ("d1#0", "d3#0"))
    assert "d1#0" not in second.retrieved
    # the observation shows ids and titles, and the next prompt carries it with the budget
    prompt = last_user(model.requests[1])
    assert "(id p1) Kiss and Tell (1945 film):" in prompt and "d1#0" not in prompt
    assert "2 of 3 searches left" in prompt
    assert traj.llm_calls == len(model.requests) == 4
    assert traj.tokens_out == model.completion_tokens_total
    assert traj.tokens_in == model.prompt_tokens_total


def test_searches_exhausted_goes_to_answer_without_search_tool() -> None:
    model = ScriptedModel([search("Kiss and Tell"), search("Shirley Temple"), answer("Chief of Protocol")])
    traj = run(model, budget=Budget(max_searches=2, max_total_tokens=2000))
    assert traj.stop_reason == "max_searches" and not traj.early_stop
    assert [s.kind for s in traj.steps] == ["search", "search", "answer"]
    final = model.requests[-1]
    assert SEARCH_TOOL not in last_user(final)
    assert final.json_schema is not None and list(final.json_schema["properties"]) == ["answer"]
    # while searches remained, both tools were offered
    assert model.requests[0].json_schema["properties"]["action"]["enum"] == ["search_database", "ready_to_answer"]


def test_zero_searches_is_closed_book() -> None:
    model = ScriptedModel([answer("Chief of Protocol")])
    traj = run(model, budget=Budget(max_searches=0, max_total_tokens=2000))
    assert traj.stop_reason == "max_searches"
    assert [s.kind for s in traj.steps] == ["answer"]
    assert all(SEARCH_TOOL not in m["content"] for m in model.requests[0].messages)


def test_token_budget_forces_a_flagged_answer() -> None:
    huge = search("x " * 5000)
    model = ScriptedModel([huge, huge, huge, answer("Chief of Protocol")])
    budget = Budget(max_searches=None, max_total_tokens=100, per_turn_max_tokens=60, forced_answer_tokens=12)
    traj = run(model, budget=budget)
    assert traj.stop_reason == "max_total_tokens"
    last = traj.steps[-1]
    assert last.kind == "forced_answer" and last.flag == "over_budget" and last.max_tokens == 12
    assert [r.max_tokens for r in model.requests[:2]] == [60, 40]
    assert traj.tokens_out <= 100 + 12
    assert "output-token budget is used up" in last_user(model.requests[-1])


def test_invalid_turns_get_a_correction_and_a_limit() -> None:
    model = ScriptedModel(["I do not know the format", "still prose", "Action: dance", answer("no idea")])
    traj = run(model, max_invalid_turns=3)
    assert traj.stop_reason == "max_invalid_turns"
    assert [s.kind for s in traj.steps] == ["invalid", "invalid", "invalid", "forced_answer"]
    assert traj.invalid_turns == 3 and traj.valid_turn_rate == 0.0
    assert "could not be used: the reply is not a complete JSON object" in last_user(model.requests[1])
    assert traj.prediction == "no idea"


def test_by_default_nothing_shown_is_left_out_and_a_repeat_is_searched() -> None:
    """BCAS §3.4: a repeated query runs, costs a search and shows its results again."""
    retriever = FakeRetriever(PASSAGES, k=2)
    model = ScriptedModel([search("Shirley Temple"), search("  shirley   TEMPLE "), ready(), answer("x")])
    traj = run(model, retriever)
    assert retriever.calls == [("Shirley Temple", ()), ("shirley   TEMPLE", ())]
    assert traj.searches_used == 2 and traj.repeated_queries == 1
    assert traj.steps[1].flag is None and traj.steps[1].retrieved == traj.steps[0].retrieved
    assert last_user(model.requests[2]).count("Shirley Temple Black") == 1
    assert traj.stop_reason == "answered"


def test_repeated_query_is_flagged_and_not_rerun() -> None:
    retriever = FakeRetriever(PASSAGES, k=2)
    model = ScriptedModel(
        [search("Shirley Temple"), search("  shirley   TEMPLE "), ready(), answer("Chief of Protocol")]
    )
    traj = run(model, retriever, repeated_query="invalid", max_invalid_turns=3)
    assert len(retriever.calls) == 1
    assert traj.steps[1].flag == "repeated_query" and traj.steps[1].retrieved == ()
    assert traj.searches_used == 1 and traj.repeated_queries == 1
    assert 'You already searched for "shirley   TEMPLE"' in last_user(model.requests[2])
    assert traj.stop_reason == "answered"


def test_endless_repeats_end_at_the_invalid_limit() -> None:
    model = ScriptedModel([search("Shirley Temple")])
    traj = run(model, max_invalid_turns=2, max_turns=50, repeated_query="invalid")
    assert traj.stop_reason == "max_invalid_turns"
    assert traj.searches_used == 1 and traj.repeated_queries == 2


def test_turn_cap_terminates_endless_distinct_searches() -> None:
    model = ScriptedModel(
        lambda request, i: (
            search(f"query number {i}")
            if request.json_schema and "action" in request.json_schema["properties"]
            else answer("x")
        )
    )
    traj = run(model, budget=Budget(max_searches=None, max_total_tokens=10**6), max_turns=7)
    assert traj.stop_reason == "max_turns"
    assert traj.action_turns == 7 and traj.searches_used == 7
    assert traj.steps[-1].kind == "forced_answer" and traj.steps[-1].flag is None


def test_model_error_is_recorded_not_raised() -> None:
    model = ScriptedModel([search("Shirley Temple"), ready()], fail_at=1)
    traj = run(model)
    assert traj.stop_reason == "error"
    assert "ModelError" in (traj.error or "") and "scripted failure at call 1" in traj.error
    assert traj.prediction == ""
    record = record_from_trajectory(traj, run_id="r", dataset_name="toy", dataset_hash="h")
    assert record.stop_reason == "error" and record.error == traj.error and not record.correct_em
    assert record.searches_used == 1


def test_retriever_error_is_recorded() -> None:
    traj = run(ScriptedModel([search("Shirley Temple")]), BrokenRetriever())
    assert traj.stop_reason == "error" and "search failed: RuntimeError: index file is unreadable" in traj.error


def test_planning_comes_first_and_stays_in_context() -> None:
    plan = "1. Find who played Corliss Archer in Kiss and Tell. 2. Find her government post."
    model = ScriptedModel([plan, search("Kiss and Tell"), ready(), answer("Chief of Protocol")])
    traj = run(model, planning=True)
    assert [s.kind for s in traj.steps] == ["plan", "search", "ready", "answer"]
    assert traj.plan == plan
    assert "research plan" in last_user(model.requests[0]) and model.requests[0].json_schema is None
    for request in model.requests[1:]:
        assert request.messages[1]["content"].startswith("Question: What government position")
        assert request.messages[2] == {"role": "assistant", "content": plan}
    assert traj.tokens_out == model.completion_tokens_total


def test_reflection_every_n_turns() -> None:
    def script(request: ChatRequest, i: int) -> str:
        if request.json_schema is None:
            return "Progress: found the film, need the actress's career."
        if "action" in request.json_schema["properties"]:
            return search(f"q{i}")
        return answer("x")

    model = ScriptedModel(script)
    traj = run(model, budget=Budget(max_searches=5, max_total_tokens=10**6), reflection=True, reflect_every=2)
    kinds = [s.kind for s in traj.steps]
    assert kinds == ["search", "search", "reflect", "search", "search", "reflect", "search", "answer"]
    assert traj.stop_reason == "max_searches"
    reflect_request = model.requests[2]
    assert "review your progress" in last_user(reflect_request)
    assert "3 of 5 searches left" in last_user(reflect_request)


def test_text_format_without_schema() -> None:
    model = ScriptedModel(
        [
            "Thought: find her\nAction: search_database\nQuery: Shirley Temple",
            "Action: ready_to_answer",
            "Answer: Chief of Protocol",
        ]
    )
    traj = run(model, action_format="text", constrained_answer=False)
    assert traj.stop_reason == "answered" and traj.prediction == "Chief of Protocol"
    assert all(r.json_schema is None for r in model.requests)
    assert model.requests[0].stop is not None
    assert "Action: search_database or ready_to_answer" in last_user(model.requests[0])


def test_json_format_on_a_backend_without_structured_output() -> None:
    model = ScriptedModel(
        ["Sure! " + search("Shirley Temple") + " hope that helps", ready(), "Answer: Chief of Protocol"],
        supports_json_schema=False,
    )
    traj = run(model)
    assert all(r.json_schema is None for r in model.requests)
    assert traj.searches_used == 1 and traj.prediction == "Chief of Protocol"


def test_search_hints_can_be_hidden() -> None:
    model = ScriptedModel([ready(), answer("x")])
    run(model, search_hints=False)
    assert "searches left" not in last_user(model.requests[0])


# -- properties ------------------------------------------------------------------------

WORDS = ["Shirley", "Temple", "Kiss", "Tell", "radio", "film", "protocol"]

reply_kinds = st.one_of(
    st.tuples(st.just("text"), st.text(max_size=60)),
    st.tuples(st.just("search"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)),
    st.tuples(st.just("fresh"), st.just("")),
    st.tuples(st.just("ready"), st.just("")),
    st.tuples(st.just("text_search"), st.sampled_from(WORDS)),
    st.tuples(st.just("text_ready"), st.just("")),
    st.tuples(st.just("broken_json"), st.just('{"thought": "cut')),
    st.tuples(st.just("huge"), st.integers(100, 3000)),
    st.tuples(st.just("empty"), st.just("")),
    st.tuples(st.just("answer"), st.sampled_from(["Chief of Protocol", "", "x " * 200])),
)


def render_reply(kind: str, payload: Any, index: int) -> str:
    if kind == "search":
        return search(payload)
    if kind == "fresh":
        return search(f"fresh query {index}")
    if kind == "ready":
        return ready()
    if kind == "text_search":
        return f"Thought: hm\nAction: search_database\nQuery: {payload} {index}"
    if kind == "text_ready":
        return "Action: ready_to_answer"
    if kind == "huge":
        return "word " * payload
    if kind == "answer":
        return answer(payload)
    return str(payload)


budgets = st.builds(
    Budget,
    max_searches=st.one_of(st.none(), st.integers(0, 4)),
    max_total_tokens=st.integers(1, 3000),
    per_turn_max_tokens=st.one_of(st.none(), st.integers(1, 500)),
    forced_answer_tokens=st.integers(1, 64),
)
agents = st.builds(
    AgentConfig,
    planning=st.booleans(),
    reflection=st.booleans(),
    reflect_every=st.integers(1, 3),
    action_format=st.sampled_from(["json", "text"]),
    max_turns=st.one_of(st.none(), st.integers(1, 10)),
    max_invalid_turns=st.integers(1, 4),
    repeated_query=st.sampled_from(["search", "invalid"]),
    constrained_answer=st.booleans(),
    exclude_seen=st.booleans(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A per-turn cap far below the budget: a turn asking for the whole remaining budget breaks the cap at once.
@example(
    budget=Budget(max_searches=2, max_total_tokens=2000, per_turn_max_tokens=50, forced_answer_tokens=16),
    agent=AgentConfig(planning=True),
    script=[("fresh", ""), ("ready", ""), ("answer", "Chief of Protocol")],
    schema_support=True,
    fail_at=None,
)
@given(
    budget=budgets,
    agent=agents,
    script=st.lists(reply_kinds, min_size=1, max_size=25),
    schema_support=st.booleans(),
    fail_at=st.one_of(st.none(), st.integers(0, 30)),
)
def test_loop_invariants_for_any_budget_and_script(
    budget: Budget, agent: AgentConfig, script: list[tuple[str, Any]], schema_support: bool, fail_at: int | None
) -> None:
    retriever = FakeRetriever(PASSAGES, k=2)
    searches_before: list[int] = []

    def reply(request: ChatRequest, index: int) -> str:
        searches_before.append(len(retriever.calls))
        kind, payload = script[index % len(script)]
        return render_reply(kind, payload, index)

    model = ScriptedModel(reply, supports_json_schema=schema_support, fail_at=fail_at)
    config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2), agent=agent)
    traj = asyncio.run(run_bcas(ITEM, model, retriever, config))

    # terminates within the documented bound of model calls
    turns = turn_bound(budget, agent)
    bound = 1 + turns + turns // agent.reflect_every + 1
    assert len(model.requests) <= bound
    assert traj.action_turns <= turns
    # every trajectory has a documented stop reason
    assert traj.stop_reason in STOP_REASONS
    assert (traj.stop_reason == "error") == (traj.error is not None)
    # the search allowance is a hard limit, and every counted search ran once
    if budget.max_searches is not None:
        assert traj.searches_used <= budget.max_searches
    assert traj.searches_used == len(retriever.calls)
    # completion tokens within the budget plus the forced-answer allowance
    assert traj.tokens_out <= budget.max_total_tokens + budget.forced_answer_tokens
    assert sum(1 for s in traj.steps if s.flag == "over_budget") <= 1
    turn_cap = budget.per_turn_max_tokens or budget.max_total_tokens
    assert all(r.max_tokens <= max(turn_cap, budget.forced_answer_tokens) for r in model.requests)
    # once the searches are spent the search tool is never offered again
    for request, used in zip(model.requests, searches_before, strict=False):
        if budget.max_searches is not None and used >= budget.max_searches:
            assert SEARCH_TOOL not in request.messages[0]["content"]
            assert SEARCH_TOOL not in last_user(request)
            assert SEARCH_TOOL not in json.dumps(request.json_schema)
    # the ledger accounts for every call; its totals are the sums of its steps
    calls_answered = len(model.requests) - (1 if fail_at is not None and fail_at < len(model.requests) else 0)
    assert traj.llm_calls == calls_answered
    assert traj.tokens_out == model.completion_tokens_total
    assert traj.tokens_in == model.prompt_tokens_total
    record = record_from_trajectory(traj, run_id="prop", dataset_name="toy", dataset_hash="h")
    json.dumps(record.to_dict(), allow_nan=False)
    assert record.tokens_out == sum(s["tokens_out"] for s in record.steps)
    assert record.tokens_in == sum(s["tokens_in"] for s in record.steps)
    assert record.llm_calls == len(record.steps)
    counted = [s for s in record.steps if s["kind"] == "search" and s["flag"] not in ("repeated_query", "search_error")]
    assert record.searches_used == len(counted)
    assert record.early_stop == (record.stop_reason == "answered")


@pytest.mark.parametrize("stop", STOP_REASONS)
def test_every_stop_reason_is_reachable(stop: str) -> None:
    budget = Budget(max_searches=3, max_total_tokens=2000)
    kwargs: dict[str, Any] = {}
    retriever = None
    if stop == "answered":
        script: list[str] = [ready(), answer("a")]
    elif stop == "max_searches":
        script = [search("a"), search("b"), search("c"), answer("a")]
    elif stop == "max_total_tokens":
        script = ["word " * 1000]
        budget = Budget(max_searches=3, max_total_tokens=50, per_turn_max_tokens=50, forced_answer_tokens=5)
    elif stop == "max_invalid_turns":
        script = ["??"]
        kwargs = {"max_invalid_turns": 3}
    elif stop == "max_turns":
        script = [search("a"), search("b"), answer("a")]
        kwargs = {"max_turns": 2}
    elif stop == "context_window":
        script = [search("a"), search("b"), answer("a")]
    elif stop == "abstained":
        script = [search("a"), json.dumps({"thought": "not found", "action": "abstain", "query": ""})]
        kwargs = {"abstain": True}
    else:
        script = [search("a")]
        retriever = BrokenRetriever()
    model = ScriptedModel(script)
    if stop == "context_window":
        # room for the first turn, not for a second one after the search results
        model.context_window = 900
    traj = run(model, retriever, budget=budget, **kwargs)
    assert traj.stop_reason == stop


# -- dataset runs into the store ---------------------------------------------------------


def test_evaluate_resumes_and_retries_errors(tmp_path: Any) -> None:
    from bcas.agent import evaluate_bcas
    from bcas.data import Dataset, content_hash
    from bcas.records import ResultStore, load_records

    items = tuple(Item(f"q{i}", f"Question {i}?", (f"answer {i}",), ITEM.documents) for i in range(3))
    dataset = Dataset("toy", "toy.jsonl", "factoid", "qa", items, content_hash(items))
    config = RunConfig(budget=Budget(max_searches=1), retrieval=RetrievalConfig(k=2))
    store = ResultStore(tmp_path / "run")

    def script(request: ChatRequest, i: int) -> str:
        if request.json_schema and "answer" in request.json_schema["properties"]:
            question = request.messages[-1]["content"].split("Question ")[1].split("?")[0]
            return answer(f"answer {question}")
        return ready()

    # first run: q1's model call fails, the others are recorded
    first = ScriptedModel(
        lambda r, i: (
            (_ for _ in ()).throw(RuntimeError("down")) if "Question 1?" in r.messages[1]["content"] else script(r, i)
        )
    )
    made = asyncio.run(
        evaluate_bcas(dataset, first, FakeRetriever(PASSAGES), config, run_id="r1", store=store, concurrency=2)
    )
    assert sorted((r.item_id, r.stop_reason) for r in made) == [("q0", "answered"), ("q1", "error"), ("q2", "answered")]
    # rerun: only the failed item runs again; nothing is doubled
    second = ScriptedModel(script)
    again = asyncio.run(evaluate_bcas(dataset, second, FakeRetriever(PASSAGES), config, run_id="r2", store=store))
    assert [r.item_id for r in again] == ["q1"] and again[0].correct_em
    assert len(second.requests) == 2
    final = load_records(store.path)
    assert sorted(r.item_id for r in final) == ["q0", "q1", "q2"] and all(r.correct_em for r in final)
    assert asyncio.run(evaluate_bcas(dataset, second, FakeRetriever(PASSAGES), config, run_id="r3", store=store)) == []
