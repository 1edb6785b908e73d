"""What a judged run loses when the judge is read, asked or audited wrongly (BCAS §3.6; SimpleQA §2).

Every test here uses a scripted judge model, so each reply, request and usage figure is
known; what is checked is what lands in a record, a verdict or the judge-EM audit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from bcas.grading import JUDGE_SCHEMA, LLMJudge, grade_record, judge_agreement, parse_grade, parse_verdict
from bcas.grading.judge import THREE_WAY_SCHEMA, JudgeResult
from bcas.llm.base import ChatRequest, ChatResult
from bcas.records import Record
from bcas.testing.scripted import ScriptedModel
from tests.support.reports import make_record


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"verdict": true}', True),
        ('{"label": false}', False),
        ('{"grade": "incorrect"}', False),
        ('{"judgement": "wrong"}', False),
        ('{"judgment": "right"}', True),
        ('{"Result": "Correct"}', True),
        ('{"verdict": "unsure", "label": "correct"}', True),
        ('{"verdict": "{\\"nested\\": 1}", "result": "incorrect"}', False),
        ("Grade: no", False),
        ("Label: yes", True),
        ("Not right.", False),
        ("No", False),
        ("No idea what the reference means", None),
        ("Yes and no", None),
        ("False", False),
        ("True.", True),
        ("Acceptable", True),
        ("Inaccurate.", False),
        ("The answer was given correctly", True),
        ("The answer is answered incorrectly", False),
        ("The answer isnt correct", False),
        ("The answer is not accurate", False),
        ("The model's answer is accurate", True),
        ("} correct {", True),
        ("...", None),
        # each key is read from the object, not from its text (which names both verdicts here)
        ('{"reason": "the correct city is Paris", "verdict": "incorrect"}', False),
        ('{"reason": "the correct city is Paris", "label": "incorrect"}', False),
        ('{"reason": "the correct city is Paris", "grade": "incorrect"}', False),
        ('{"reason": "the correct city is Paris", "judgement": "incorrect"}', False),
        ('{"reason": "the correct city is Paris", "result": "incorrect"}', False),
        ('\n{"reason": "the correct city is Paris", "verdict": "incorrect"}', False),  # after a line break
        ('{"reason": "the correct city is Paris", "verdict": "incorrect"}.', False),  # text after the object
        ('{"verdict": "{\\"verdict\\": false}", "note": "correct"}', True),  # a field holding JSON text is no verdict
        ("Verdict: yes", True),
        ("Answer: no", False),
        ("Verdict.", None),
        ("Not.", None),
        ("Not sure, but correct", True),
        ("Not correct; the correct answer is Paris", False),
        ("Not accurate; the accurate figure is 12", False),
        ("The answer is inaccurate.", False),
        # contractions and a negation two words back (a judge's plain English)
        ("The answer isn't correct.", False),
        ("The answer isn\u2019t correct.", False),
        ("Isnt correct", False),
        ("The response doesn't look correct", False),
        ("It is not really accurate", False),
        ("Not only is it correct, it is complete", True),  # the negation is three words back
    ],
)
def test_a_judge_reply_in_any_accepted_form_gives_its_verdict(reply: str, verdict: bool | None) -> None:
    """A verdict written in another accepted form must not be lost (``None``) or read the other way."""
    assert parse_verdict(reply) is verdict


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        ('{"grade": "not_attempted"}', "not_attempted"),
        ('{"verdict": "incorrect"}', "incorrect"),
        ('{"label": "correct"}', "correct"),
        ('{"result": "not attempted"}', "not_attempted"),
        ('{"grade": "maybe", "label": "correct"}', "correct"),
        ('{"grade": "{\\"x\\": 1}", "result": "incorrect"}', "incorrect"),
        ('{"grade": "{\\"grade\\": \\"correct\\"}", "result": "incorrect"}', "incorrect"),  # a string, not an object
        ("NOT ATTEMPTED", "not_attempted"),
        ("not-attempted: the answer declines", "not_attempted"),
        ("notattempted", "not_attempted"),
        ("not attempted, and correct", None),
        ("not attempted'correct", None),  # joined by an apostrophe: still two verdicts
        ("correct", "correct"),
        ("Wrong.", "incorrect"),
        ("no idea", None),
    ],
)
def test_a_three_way_reply_gives_its_grade(reply: str, grade: str | None) -> None:
    """SimpleQA's three grades: a decline must not become "incorrect" and a mixed reply no grade at all."""
    assert parse_grade(reply) == grade


def test_the_default_judge_asks_once_greedily_under_the_verdict_schema() -> None:
    """The documented defaults (one repeat, 16 tokens, temperature 0, seed 0) are what the judge model receives."""
    model = ScriptedModel(['{"verdict": "correct"}'])
    result = asyncio.run(LLMJudge(model).judge("q", ["a"], "a"))
    (request,) = model.requests
    assert (request.max_tokens, request.temperature, request.seed) == (16, 0.0, 0)
    assert request.json_schema == JUDGE_SCHEMA and result.verdicts == [True]


def test_a_three_way_judge_has_room_for_its_longest_grade_and_its_own_schema() -> None:
    """'{"grade": "not_attempted"}' must fit: a three-way judge asks for at least 24 tokens."""
    model = ScriptedModel(['{"grade": "not_attempted"}'])
    result = asyncio.run(LLMJudge(model, three_way=True).judge("q", ["a"], "no idea"))
    (request,) = model.requests
    assert request.max_tokens == 24 and request.json_schema == THREE_WAY_SCHEMA
    assert result.label == "not_attempted" and result.verdict is False and result.labels == ["not_attempted"]
    bigger = ScriptedModel(['{"grade": "correct"}'])
    asyncio.run(LLMJudge(bigger, max_tokens=40, three_way=True).judge("q", ["a"], "a"))
    assert bigger.requests[0].max_tokens == 40
    free = ScriptedModel(["not attempted"], supports_json_schema=False)
    asyncio.run(LLMJudge(free, three_way=True).judge("q", ["a"], "no idea"))
    assert free.requests[0].json_schema is None
    assert "Reply with one of: correct, incorrect, not attempted." in free.requests[0].messages[0]["content"]


def test_a_schema_is_sent_only_to_a_backend_that_supports_it() -> None:
    """Forcing a schema on a backend without structured output would break its decoding; turning it off is honoured."""
    plain = ScriptedModel(["correct"], supports_json_schema=False)
    asyncio.run(LLMJudge(plain, use_schema=True).judge("q", ["a"], "a"))
    assert plain.requests[0].json_schema is None
    capable = ScriptedModel(["correct"])
    asyncio.run(LLMJudge(capable, use_schema=False).judge("q", ["a"], "a"))
    assert capable.requests[0].json_schema is None
    assert "Reply with one word: correct or incorrect." in capable.requests[0].messages[0]["content"]


@pytest.mark.parametrize("three_way", [False, True])
def test_a_judge_decoding_under_a_schema_is_asked_for_the_json_the_schema_allows(three_way: bool) -> None:
    """Constrained to a JSON schema, a judge told to reply in one word is forced against its
    instructions; the prompt must ask for the object the schema allows."""
    capable = ScriptedModel(['{"verdict": "correct", "grade": "correct"}'])
    asyncio.run(LLMJudge(capable, three_way=three_way).judge("q", ["a"], "a"))
    (request,) = capable.requests
    assert request.json_schema == (THREE_WAY_SCHEMA if three_way else JUDGE_SCHEMA)
    key = "grade" if three_way else "verdict"
    assert f'Reply with one JSON object: {{"{key}": "correct"}}' in request.messages[0]["content"]


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"retries": -1}, {"max_tokens": 0}])
def test_a_judge_that_could_never_answer_is_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="^repeats and max_tokens must be >= 1 and retries >= 0$"):
        LLMJudge(ScriptedModel(["correct"]), **kwargs)  # type: ignore[arg-type]


def test_the_smallest_valid_judge_asks_exactly_once() -> None:
    model = ScriptedModel(["hmm"], supports_json_schema=False)
    result = asyncio.run(LLMJudge(model, repeats=1, retries=0, max_tokens=1).judge("q", ["a"], "a"))
    assert len(model.requests) == 1 and model.requests[0].max_tokens == 1
    assert result.verdict is None and result.reason == "no readable verdict after 1 attempt(s) per repeat"


@dataclass
class CachedModel:
    """A judge backend whose every reply comes from a cache, with fixed usage."""

    model_id: str = "cached-judge"
    supports_json_schema: bool = False
    calls: int = 0

    async def chat(self, request: ChatRequest) -> ChatResult:
        self.calls += 1
        return ChatResult(
            "correct", prompt_tokens=7, completion_tokens=2, finish_reason="stop", latency_s=0.0, cached=True
        )


def test_the_judge_s_usage_and_cached_calls_are_summed_over_repeats() -> None:
    """The judge's cost is reported apart from the agent's: every repeat's tokens and cache hits must be in it."""
    model = CachedModel()
    result = asyncio.run(LLMJudge(model, repeats=3).judge("q", ["a"], "a"))
    assert (result.tokens_in, result.tokens_out, result.llm_calls, result.cached_calls) == (21, 6, 3, 3)
    assert result.model == "cached-judge" and result.agreement == 1.0
    nameless = ScriptedModel(["correct"])
    del nameless.model_id
    assert LLMJudge(nameless).model_id == "unknown"


def test_a_retry_shows_the_model_its_reply_and_the_reminder_then_stops_at_a_verdict() -> None:
    model = ScriptedModel(["hmm", "still thinking", "correct", "incorrect"], supports_json_schema=False)
    result = asyncio.run(LLMJudge(model, retries=3).judge("q", ["a"], "a"))
    assert result.verdict is True and result.llm_calls == 3 and result.outputs == ["correct"]
    third = model.requests[2].messages
    assert third[1] == {"role": "assistant", "content": "still thinking"} and len(third) == 3
    assert third[2]["content"].startswith("Your reply did not contain a verdict.")
    assert [r.seed for r in model.requests] == [0, 0, 0]


def test_three_way_repeats_keep_every_grade_and_explain_what_they_could_not_decide() -> None:
    replies = iter(["not attempted", "correct", "correct", "hmm"])
    model = ScriptedModel(lambda r, i: next(replies), supports_json_schema=False)
    result = asyncio.run(LLMJudge(model, repeats=3, retries=0, three_way=True).judge("q", ["a"], "a"))
    assert result.labels == ["not_attempted", "correct", "correct"]
    assert result.label == "correct" and result.verdict is True and result.agreement == pytest.approx(2 / 3)
    tie = iter(["not attempted", "incorrect", "hmm"])
    tied = LLMJudge(
        ScriptedModel(lambda r, i: next(tie), supports_json_schema=False), repeats=3, retries=0, three_way=True
    )
    result = asyncio.run(tied.judge("q", ["a"], "a"))
    assert result.labels == ["not_attempted", "incorrect", None] and result.agreement == 0.5
    assert result.label is None and result.verdict is None
    assert result.reason == "repeats tie (1 not_attempted, 1 incorrect)"
    never = LLMJudge(ScriptedModel(["hmm"], supports_json_schema=False), repeats=2, retries=1, three_way=True)
    result = asyncio.run(never.judge("q", ["a"], "a"))
    assert result.label is None and result.agreement is None and result.labels == [None, None]
    assert result.reason == "no readable grade after 2 attempt(s) per repeat"
    broken = LLMJudge(ScriptedModel(["correct"], fail_at=0), three_way=True)
    result = asyncio.run(broken.judge("q", ["a"], "a"))
    assert result.reason == "judge call failed: ModelError: scripted: scripted failure at call 0"


def test_an_empty_answer_is_incorrect_for_the_three_way_judge_too() -> None:
    model = ScriptedModel(['{"grade": "correct"}'])
    result = asyncio.run(LLMJudge(model, three_way=True).judge("q", ["a"], "   "))
    assert model.requests == []
    assert (result.label, result.labels, result.verdict, result.agreement) == ("incorrect", ["incorrect"], False, 1.0)
    assert result.to_dict()["label"] == "incorrect"


def test_the_judge_s_fields_in_a_record_are_all_kept() -> None:
    """A record's ``judge`` dict is what the report and the audit read: every field must be there, named as documented."""
    binary = JudgeResult(True, [True, None], "m", 1.0, "r", ["correct", "?"], 5, 2, 2, 1)
    assert binary.to_dict() == {
        "verdict": True,
        "verdicts": [True, None],
        "model": "m",
        "repeats": 2,
        "agreement": 1.0,
        "reason": "r",
        "outputs": ["correct", "?"],
        "tokens_in": 5,
        "tokens_out": 2,
        "llm_calls": 2,
        "cached_calls": 1,
    }
    three = JudgeResult(False, [False], "m", label="not_attempted", labels=["not_attempted"])
    assert three.to_dict()["label"] == "not_attempted" and three.to_dict()["labels"] == ["not_attempted"]


def _record(**fields: Any) -> Record:
    return Record.from_dict({**make_record("a", "q1", True, prediction="Paris", answers=["Paris"]), **fields})


def test_a_grade_is_added_beside_the_earlier_ones_and_shown_as_the_newest() -> None:
    """Another judge adds a grade instead of replacing the answer or the earlier grade (BCAS §3.6)."""
    first = asyncio.run(grade_record(_record(), LLMJudge(ScriptedModel(["correct"], model_id="j1")), "g1"))
    second = asyncio.run(grade_record(first, LLMJudge(ScriptedModel(["incorrect"], model_id="j2")), "g2"))
    assert sorted(second.grades) == ["g1", "g2"]
    assert second.grades["g1"]["verdict"] is True and second.grades["g1"]["model"] == "j1"
    assert second.judge_verdict is False and second.judge["grade_id"] == "g2" and second.judge["model"] == "j2"
    assert second.prediction == "Paris"


def test_an_errored_item_is_never_sent_to_the_judge() -> None:
    model = ScriptedModel(["correct"], model_id="judge-x")
    graded = asyncio.run(grade_record(_record(error="boom"), LLMJudge(model), "g"))
    assert model.requests == [] and graded.judge_verdict is None
    assert graded.judge == {
        "verdict": None,
        "reason": "the item ended in error; nothing to judge",
        "model": "judge-x",
        "repeats": 0,
        "grade_id": "g",
    }
    assert graded.grades == {"g": graded.judge}


def _row(judge: bool | None, em: bool | None, **details: Any) -> dict[str, Any]:
    return {"judge_verdict": judge, "correct_em": em, "judge": details or None}


def test_the_audit_s_kappa_agreement_and_counts_on_an_asymmetric_table() -> None:
    """3 both-correct, 1 judge-only, 1 EM-only, 5 both-wrong: p_o = 0.8, p_e = 0.4*0.4 + 0.6*0.6 = 0.52."""
    rows = [_row(True, True)] * 3 + [_row(True, False), _row(False, True)] + [_row(False, False)] * 5
    audit = judge_agreement(rows)
    assert (audit.n_records, audit.n_judged, audit.agree) == (10, 10, 8)
    assert (audit.judge_only_correct, audit.em_only_correct) == (1, 1)
    assert audit.cohen_kappa == pytest.approx((0.8 - 0.52) / 0.48)
    assert audit.judge_accuracy == pytest.approx(0.4) and audit.em_accuracy == pytest.approx(0.4)
    assert audit.to_dict()["cohen_kappa"] == audit.cohen_kappa and audit.to_dict()["n_judged"] == 10


def test_the_audit_of_a_judge_and_em_that_always_agree_on_correct_is_kappa_1() -> None:
    audit = judge_agreement([_row(True, True), _row(True, True)])
    assert audit.cohen_kappa == 1.0 and audit.agreement == 1.0


def test_the_audit_reads_records_as_objects_and_a_missing_em_as_wrong() -> None:
    record = asyncio.run(grade_record(_record(), LLMJudge(ScriptedModel(["correct"])), "g"))
    audit = judge_agreement([record, {"judge_verdict": True, "judge": {"verdict": True}}])
    assert (audit.n_records, audit.n_judged, audit.agree, audit.judge_only_correct) == (2, 2, 1, 1)


def test_the_audit_averages_repeat_agreement_over_repeated_judgements_only() -> None:
    """A single judgement agrees with itself by construction; counting it would hide the judge's variance."""
    rows = [
        _row(True, True, agreement=1.0, repeats=1),
        _row(True, True, agreement=1.0),  # repeats missing: one judgement
        _row(True, True, agreement=0.5, repeats=2),
        _row(True, True, agreement=None, repeats=3),
    ]
    assert judge_agreement(rows).mean_repeat_agreement == 0.5
    assert judge_agreement(rows[:2]).mean_repeat_agreement is None


def test_only_a_judgement_without_a_verdict_counts_as_unreadable() -> None:
    rows = [_row(None, True), {"judge_verdict": None, "correct_em": True, "judge": {}}, _row(None, False, reason="x")]
    audit = judge_agreement([*rows, _row(None, True, reason="y")])
    assert (audit.n_records, audit.n_judged, audit.n_unreadable) == (4, 0, 2)
    assert (audit.agreement, audit.cohen_kappa, audit.judge_accuracy, audit.em_accuracy) == (None, None, None, None)


@pytest.mark.parametrize("key", ["grade", "verdict", "label", "result"])
def test_a_json_grade_wins_over_verdict_words_elsewhere_in_the_reply(key: str) -> None:
    """The grade field is the answer; a stray "correct" in another field must not make the reply unreadable."""
    assert parse_grade(f'{{"{key}": "not_attempted", "note": "correct"}}') == "not_attempted"


def test_the_judge_is_asked_about_the_record_s_own_question() -> None:
    model = ScriptedModel(["correct"], model_id="j")
    asyncio.run(grade_record(_record(question="Where is the Louvre?"), LLMJudge(model), "g"))
    assert "Question: Where is the Louvre?" in model.requests[0].messages[0]["content"]


class BareModel:
    """A judge backend written against the protocol alone: no ``model_id``, no
    ``supports_json_schema`` (not a ``ChatModel`` subclass, so no class defaults either)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        text = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return ChatResult(text, prompt_tokens=3, completion_tokens=1, finish_reason="stop", latency_s=0.0)


def test_a_backend_that_declares_nothing_is_named_unknown_and_gets_no_schema() -> None:
    """A schema sent to a backend that never said it takes one would break its decoding; a
    nameless judge is recorded as unknown, and an errored item's grade names no model."""
    model = BareModel(["correct"])
    judge = LLMJudge(model)
    result = asyncio.run(judge.judge("q", ["a"], "a"))
    assert judge.model_id == "unknown" and result.model == "unknown"
    assert model.requests[0].json_schema is None and result.verdict is True
    graded = asyncio.run(grade_record(_record(error="engine died"), judge, "g"))
    assert graded.judge["model"] == "" and graded.judge_verdict is None


def test_an_empty_answer_is_incorrect_without_asking_the_binary_judge() -> None:
    model = ScriptedModel(["correct"])
    result = asyncio.run(LLMJudge(model).judge("q", ["a"], " \n"))
    assert model.requests == []
    assert (result.verdict, result.verdicts, result.agreement) == (False, [False], 1.0)
    assert result.reason == "empty answer (not sent to the judge)" and result.label is None


def test_an_unreadable_reply_is_retried_once_by_default_with_the_roles_a_chat_api_expects() -> None:
    """One retry by default, for the binary and the three-way judge alike: the model sees its
    reply as the assistant's and the reminder, which restates the reply format, as the user's."""
    model = ScriptedModel(["hmm", "correct"], supports_json_schema=False)
    result = asyncio.run(LLMJudge(model).judge("q", ["a"], "a"))
    assert result.verdict is True and len(model.requests) == 2
    assert [m["role"] for m in model.requests[0].messages] == ["user"]
    retry = model.requests[1].messages
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[2]["content"].rstrip().endswith("Reply with one word: correct or incorrect.")
    never = ScriptedModel(["hmm"], supports_json_schema=False)
    unread = asyncio.run(LLMJudge(never).judge("q", ["a"], "a"))
    assert len(never.requests) == 2 and unread.reason == "no readable verdict after 2 attempt(s) per repeat"
    three = ScriptedModel(["hmm", "not attempted"], supports_json_schema=False)
    graded = asyncio.run(LLMJudge(three, three_way=True).judge("q", ["a"], "a"))
    assert graded.label == "not_attempted" and len(three.requests) == 2
    assert (
        three.requests[1]
        .messages[2]["content"]
        .rstrip()
        .endswith("Reply with one of: correct, incorrect, not attempted.")
    )


def test_a_judge_call_that_fails_leaves_no_made_up_output() -> None:
    result = asyncio.run(LLMJudge(ScriptedModel(["correct"], fail_at=0)).judge("q", ["a"], "a"))
    assert result.verdict is None and result.outputs == [""] and result.verdicts == [None]
    assert result.reason == "judge call failed: ModelError: scripted: scripted failure at call 0"


def test_the_binary_judge_counts_a_refusal_wrong_and_the_three_way_judge_as_not_attempted() -> None:
    """The rubric is what makes a refusal wrong (BCAS §3.6) or not attempted (SimpleQA's three
    grades): each judge gets its own, with the question, references and answer filled in."""
    binary = ScriptedModel(["correct"], supports_json_schema=False)
    asyncio.run(LLMJudge(binary).judge("Who wrote it?", ["Ann", "A. N."], "I do not know"))
    prompt = binary.requests[0].messages[0]["content"]
    assert "refuses, or says it does not know" in prompt and "Not attempted" not in prompt
    assert "Question: Who wrote it?" in prompt and "Model answer: I do not know" in prompt
    three = ScriptedModel(["not attempted"], supports_json_schema=False)
    asyncio.run(LLMJudge(three, three_way=True).judge("Who wrote it?", ["Ann"], "I do not know"))
    rubric = three.requests[0].messages[0]["content"]
    assert "- Not attempted: the model answer states no answer" in rubric and "refuses, or says" not in rubric


def test_a_sampling_judge_gets_its_temperature_and_one_seed_per_repeat() -> None:
    """Repeats at a temperature above 0 are what make the majority vote meaningful: each must
    be sampled at that temperature under its own seed."""
    model = ScriptedModel(["correct"])
    asyncio.run(LLMJudge(model, repeats=3, temperature=0.7, seed=10).judge("q", ["a"], "a"))
    assert [(r.temperature, r.seed) for r in model.requests] == [(0.7, 10), (0.7, 11), (0.7, 12)]
