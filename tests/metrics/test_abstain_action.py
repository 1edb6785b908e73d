"""Abstention: the explicit ``abstain`` action (``AgentConfig.abstain``) and the three-way LLM judge
(SimpleQA's correct / incorrect / not attempted), with scripted models."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bcas.agent import run_bcas
from bcas.agent.protocol import ABSTAIN_TOOL, ABSTAINED, action_schema, parse_action, tool_definitions
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.grading import LLMJudge, grade_record, parse_grade
from bcas.grading.abstention import simpleqa_scores
from bcas.grading.outcomes import outcome
from bcas.identity import JUDGE_READING, grade_id, judge_prompt_hash
from bcas.llm.base import ChatRequest
from bcas.metrics import metric_columns
from bcas.testing.scripted import FakeRetriever, ScriptedModel

PASSAGES = [(f"d{i}", f"Code {i}", f"The code name of item {i} is C{i}.") for i in range(6)]
ITEMS = [
    Item(f"q{i}", f"What is the code name of item {i}?", (f"C{i}",), tuple(Document(*p) for p in PASSAGES))
    for i in range(6)
]
CONFIG = RunConfig(
    budget=Budget(max_searches=2, max_total_tokens=2000),
    retrieval=RetrievalConfig(k=2),
    agent=AgentConfig(abstain=True),
)


def item_of(request: ChatRequest) -> int:
    text = " ".join(str(m.get("content")) for m in request.messages)
    return int(text.split("code name of item ")[1][0])


def decliner(request: ChatRequest, i: int) -> str:
    """Items 0 and 3 abstain after one search; 1 and 4 answer wrongly; 2 and 5 answer right."""
    n = item_of(request)
    if request.json_schema and "answer" in request.json_schema["properties"]:
        return json.dumps({"answer": f"C{n}" if n % 3 == 2 else "C9"})
    searched = any(
        "Search results" in str(m.get("content")) or "[1]" in str(m.get("content")) for m in request.messages
    )
    if not searched:
        return json.dumps({"thought": "look", "action": "search_database", "query": f"code name item {n}"})
    action = ABSTAIN_TOOL if n % 3 == 0 else "ready_to_answer"
    return json.dumps({"thought": "decide", "action": action, "query": ""})


def records(model: ScriptedModel, config: RunConfig = CONFIG) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        out = []
        for item in ITEMS:
            traj = await run_bcas(item, model, FakeRetriever(PASSAGES, k=2), config, keep_requests=True)
            out.append(record_from_trajectory(traj, run_id="t", dataset_name="codes", dataset_hash="h").to_dict())
        return out

    return asyncio.run(go())


def test_a_model_that_abstains_on_some_items_gives_the_three_way_counts_and_f_score() -> None:
    model = ScriptedModel(decliner)
    recs = records(model)
    stops = [r["stop_reason"] for r in recs]
    assert stops == ["abstained", "answered", "answered", "abstained", "answered", "answered"]
    for r in recs[::3]:
        assert r["prediction"] == ABSTAINED and r["steps"][-1]["kind"] == "abstain"
        assert not any(s["kind"] in ("answer", "forced_answer") for s in r["steps"])  # no answer turn follows
        assert outcome(r, "attempted") is False and outcome(r, "em_given_attempted") is None
    # the abstain tool was offered in every action turn of this configuration
    action_requests = [q for q in model.requests if q.json_schema and "action" in q.json_schema["properties"]]
    assert action_requests and all(
        ABSTAIN_TOOL in q.json_schema["properties"]["action"]["enum"] for q in action_requests
    )
    assert all("- abstain:" in q.messages[-1]["content"] for q in action_requests)
    cols = metric_columns(recs)
    assert (cols.n_correct, cols.n_incorrect, cols.n_not_attempted) == (2, 2, 2)
    overall, given = 2 / 6, 2 / 4
    assert cols.accuracy_given_attempted == given
    assert cols.f_score == pytest.approx(2 * overall * given / (overall + given))  # 0.4
    assert cols.f_score == simpleqa_scores(2, 2, 2)["f_score"]


def test_abstain_is_offered_only_where_the_configuration_asks() -> None:
    model = ScriptedModel(decliner)
    plain = RunConfig(budget=CONFIG.budget, retrieval=CONFIG.retrieval)
    recs = records(model, plain)
    assert all(r["stop_reason"] != "abstained" for r in recs)
    for q in model.requests:
        assert ABSTAIN_TOOL not in json.dumps(q.json_schema or {}) and "- abstain:" not in q.messages[-1]["content"]
    # an abstain the configuration did not offer is an invalid turn
    assert sum(r["extra"]["invalid_turns"] for r in recs[::3]) >= 2
    assert CONFIG.label.endswith("/abstain") and "abstain" not in plain.to_dict()["agent"]


def test_a_model_out_of_searches_can_still_abstain_at_its_answer_turn() -> None:
    """Once the searches are used up no action turn is left: the answer turn offers the decline."""

    def searcher(request: ChatRequest, i: int) -> str:
        n = item_of(request)
        if request.json_schema and "answer" in request.json_schema["properties"]:
            return json.dumps({"answer": "abstain" if n % 2 == 0 else f"C{n}"})
        return json.dumps({"thought": "look", "action": "search_database", "query": f"code name item {n}"})

    one_search = Budget(max_searches=1, max_total_tokens=2000)
    offered = 'give the answer "abstain" instead of guessing'
    model = ScriptedModel(searcher)
    recs = records(model, RunConfig(budget=one_search, retrieval=CONFIG.retrieval, agent=AgentConfig(abstain=True)))
    assert [r["stop_reason"] for r in recs] == ["abstained", "max_searches"] * 3
    for r in recs[::2]:
        assert r["prediction"] == ABSTAINED and r["steps"][-1]["kind"] == "answer" and r["searches_used"] == 1
        assert outcome(r, "attempted") is False
    answer_requests = [q for q in model.requests if q.json_schema and "answer" in q.json_schema["properties"]]
    assert len(answer_requests) == 6 and all(offered in q.messages[-1]["content"] for q in answer_requests)
    cols = metric_columns(recs)
    assert (cols.n_correct, cols.n_incorrect, cols.n_not_attempted) == (3, 0, 3)

    # Without the option the answer turn does not offer it, and the stop reason stays.
    model = ScriptedModel(searcher)
    plain = records(model, RunConfig(budget=one_search, retrieval=CONFIG.retrieval))
    assert [r["stop_reason"] for r in plain] == ["max_searches"] * 6
    assert not any(offered in q.messages[-1]["content"] for q in model.requests)


def test_abstain_parses_in_every_action_format() -> None:
    tools = ["search_database", "ready_to_answer", ABSTAIN_TOOL]
    assert parse_action('{"thought": "", "action": "abstain", "query": ""}', tools, "json").tool == ABSTAIN_TOOL
    assert parse_action("Thought: no idea\nAction: abstain", tools, "text").tool == ABSTAIN_TOOL
    assert action_schema(tools)["properties"]["action"]["enum"] == tools
    (fn,) = [d for d in tool_definitions({ABSTAIN_TOOL: "- abstain: give no answer"}) if "abstain" in json.dumps(d)]
    assert "give no answer" in json.dumps(fn)


# -- the three-way judge -------------------------------------------------------------------


def test_parse_grade_reads_three_labels() -> None:
    assert parse_grade('{"grade": "not_attempted"}') == "not_attempted"
    assert parse_grade('{"grade": "correct"}') == "correct"
    assert parse_grade("Incorrect.") == "incorrect"
    assert parse_grade("Not attempted: the model says it does not know.") == "not_attempted"
    assert parse_grade("not correct") == "incorrect"  # "not" alone never means not attempted
    assert parse_grade("incorrect, or maybe not attempted") is None  # two grades: unreadable
    assert parse_grade("hmm") is None


def judge_script(request: ChatRequest, i: int) -> str:
    prompt = request.messages[-1]["content"]
    answer = prompt.split("Model answer: ")[1].splitlines()[0]
    if answer == "abstain":
        return '{"grade": "not_attempted"}'
    return '{"grade": "correct"}' if answer.startswith("C") and answer != "C9" else '{"grade": "incorrect"}'


def test_the_three_way_judge_grades_and_the_summary_counts_its_labels() -> None:
    recs = records(ScriptedModel(decliner))
    judge_model = ScriptedModel(judge_script, model_id="judge")
    judge = LLMJudge(judge_model, three_way=True)
    gid = grade_id("model:judge", 1, three_way=True)
    from bcas.records import Record

    graded = [asyncio.run(grade_record(Record.from_dict(r), judge, gid)).to_dict() for r in recs]
    asked = judge_model.requests[0]
    assert "not attempted" in asked.messages[-1]["content"].lower()
    assert asked.json_schema is not None and asked.json_schema["properties"]["grade"]["enum"] == [
        "correct", "incorrect", "not_attempted",
    ]  # fmt: skip
    labels = [g["judge"]["label"] for g in graded]
    assert labels == ["not_attempted", "incorrect", "correct"] * 2
    assert [g["judge_verdict"] for g in graded] == [False, False, True] * 2
    cols = metric_columns(graded, "judge_verdict")
    assert (cols.n_correct, cols.n_incorrect, cols.n_not_attempted) == (2, 2, 2)


def test_a_judge_labelled_not_attempted_answer_is_not_attempted_whatever_its_text() -> None:
    rec = {"item_id": "a", "prediction": "Paris maybe", "answers": ["Rome"], "correct_em": False}
    judged = {**rec, "judge_verdict": False, "judge": {"verdict": False, "label": "not_attempted"}}
    assert outcome(rec, "attempted") is True and outcome(judged, "attempted") is False
    cols = metric_columns([judged], "judge_verdict")
    assert (cols.n_correct, cols.n_incorrect, cols.n_not_attempted) == (0, 0, 1)


def test_the_three_way_grade_has_its_own_identity_and_the_binary_one_is_unchanged() -> None:
    binary = grade_id("model:j", 1)
    assert binary == f"model:j|prompt:{judge_prompt_hash()}|x1|read{JUDGE_READING}"
    three = grade_id("model:j", 1, three_way=True)
    assert three != binary and three.endswith("|3way") and judge_prompt_hash(True) != judge_prompt_hash()
    result = asyncio.run(LLMJudge(ScriptedModel(['{"verdict": "correct"}'])).judge("q", ["a"], "a"))
    assert "label" not in result.to_dict()  # the binary judge's records keep their fields


def test_three_way_repeats_vote_and_tie() -> None:
    replies = iter(['{"grade": "not_attempted"}', '{"grade": "not_attempted"}', '{"grade": "incorrect"}'])
    judge = LLMJudge(ScriptedModel(lambda r, i: next(replies)), repeats=3, three_way=True)
    result = asyncio.run(judge.judge("q", ["a"], "no idea"))
    assert result.label == "not_attempted" and result.verdict is False and result.agreement == pytest.approx(2 / 3)
    tie = iter(['{"grade": "correct"}', '{"grade": "incorrect"}'])
    result = asyncio.run(
        LLMJudge(ScriptedModel(lambda r, i: next(tie)), repeats=2, three_way=True).judge("q", ["a"], "b")
    )
    assert result.label is None and result.verdict is None and "tie" in (result.reason or "")
