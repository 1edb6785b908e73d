"""Assessment agents: tolerant score parsing, prompts, concurrent scoring (MADARA §4, Appendix N)."""

from __future__ import annotations

import asyncio

import pytest

from bcas.assess.agents import (
    AGENTS,
    AssessDocument,
    assessment_messages,
    load_template,
    parse_score,
    rescore_messages,
    score_documents,
    score_schema,
)
from bcas.config import AssessConfig
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ModelError


@pytest.mark.parametrize(
    ("text", "score", "how"),
    [
        ('{"score": 4, "reason": "mentions the entity"}', 4.0, "json"),
        ('{"score": "3", "reason": "x"}', 3.0, "json"),
        ('Sure! Here is my verdict: {"score": 2, "reason": "weak"} Hope this helps.', 2.0, "json"),
        ('{"reasoning_steps": ["a", "b"], "score": 5, "confidence": 4}', 5.0, "json"),
        ('{"score": 3.5}', 3.5, "json"),
        ('{"score": 4, "reason": "cut off here', 4.0, "fragment"),  # truncated JSON
        ("{'score': 2, 'reason': 'single quotes'}", 2.0, "fragment"),
        ("Score: 3", 3.0, "fragment"),
        ("The relevance score is 1 because the document is off topic.", 1.0, "fragment"),
        ("I would rate it 4/5.", 4.0, "fragment"),
        ("4 out of 5", 4.0, "fragment"),
        ("  5 ", 5.0, "bare-number"),
    ],
)
def test_parse_score_extracts_a_number_from_malformed_output(text, score, how):
    parsed = parse_score(text)
    assert parsed.score == score
    assert parsed.how == how
    assert parsed.missing_reason is None


@pytest.mark.parametrize(
    ("text", "reason_part"),
    [
        ("", "empty output"),
        ("The document talks about Paris in 1999.", "no score found"),
        ('{"reason": "forgot the score"}', "without a numeric 'score'"),
        ('{"score": 9, "reason": "x"}', "outside 0-5"),
        ('{"score": "high"}', "without a numeric"),
    ],
)
def test_unparseable_score_is_missing_with_a_reason_never_zero(text, reason_part):
    parsed = parse_score(text)
    assert parsed.score is None
    assert reason_part in parsed.missing_reason


def test_parse_cot_output_keeps_reasoning_steps_and_confidence():
    text = (
        '{"reasoning_steps": ["Key entity: Paris.", "The document mentions Paris.", "It states the capital.",'
        ' "No dates involved.", "Score 5."], "score": 5, "confidence": 4}'
    )
    p = parse_score(text)
    assert p.score == 5.0 and p.confidence == 4.0
    assert len(p.reasoning_steps) == 5 and p.reasoning_steps[0] == "Key entity: Paris."
    # truncated CoT: steps recovered, score missing
    cut = parse_score('{"reasoning_steps": ["First step.", "Second step", "Thi')
    assert cut.score is None and cut.reasoning_steps[:2] == ["First step.", "Second step"]
    numbered = parse_score("1. Entities: X.\n2. Mentioned.\n3. Direct.\n4. Recent.\n5. Assign.\nScore: 4")
    assert numbered.score == 4.0 and len(numbered.reasoning_steps) == 5


def test_templates_exist_for_every_agent_in_both_variants():
    for agent in AGENTS:
        base = load_template(agent).template
        cot = load_template(f"{agent}_cot").template
        assert '"score"' in base and "reasoning_steps" not in base
        assert "reasoning_steps" in cot and "confidence" in cot
        assert cot.count("\n1. ") + cot.count("\n2. ") + cot.count("\n5. ") == 3  # five numbered steps


DOCS = [
    AssessDocument("d0", "Paris", "Paris is the capital of France. " * 20),
    AssessDocument("d1", "Lyon", "Lyon is a city in France."),
    AssessDocument("d2", "Rome", "Rome is the capital of Italy."),
]


def test_relevance_sees_only_its_document_cross_agents_see_excerpts():
    cfg = AssessConfig(excerpt_chars=40)
    rel = assessment_messages("relevance", "Capital of France?", DOCS, 1, cfg, cot=False)
    con = assessment_messages("consistency", "Capital of France?", DOCS, 1, cfg, cot=False)
    assert "OTHER DOCUMENTS" not in rel[1]["content"]
    assert "OTHER DOCUMENTS" in con[1]["content"]
    assert "Rome is the capital of Italy." in con[1]["content"]
    assert "Lyon is a city" in con[1]["content"]  # its own document in full
    # excerpts are clipped to excerpt_chars
    excerpt_line = next(line for line in con[1]["content"].splitlines() if line.startswith("[1]"))
    assert len(excerpt_line) <= len("[1] ") + 40
    assert "Relevance Assessor" in rel[0]["content"] and "Consistency Verifier" in con[0]["content"]
    cot = assessment_messages("conflict", "q", DOCS, 0, cfg, cot=True)
    assert "five steps" in cot[0]["content"]
    rs = rescore_messages("relevance", "q", DOCS, 0, "Step two. Step one.", cfg)
    assert "REASONING:\nStep two. Step one." in rs[1]["content"]


def test_schemas_keep_their_order_even_when_properties_are_sorted():
    # A backend may sort properties alphabetically, required ones first (llama.cpp grammar
    # of a sort_keys schema): reasoning must still precede the score, and a base reply
    # must start with the score so truncation cannot lose it.
    def emitted_order(schema):
        req = sorted(schema["required"])
        return req + sorted(p for p in schema["properties"] if p not in req)

    cot = score_schema(True, step_chars=40)
    assert list(cot["properties"]) == ["reasoning_steps", "score", "confidence"]  # in order
    sorted_order = emitted_order(cot)  # sorted: the required confidence first, reasoning still before the score
    assert sorted_order == ["confidence", "reasoning_steps", "score"]
    assert sorted_order.index("reasoning_steps") < sorted_order.index("score")
    assert cot["properties"]["reasoning_steps"]["minItems"] == 5
    assert cot["properties"]["reasoning_steps"]["items"]["maxLength"] == 40
    base = score_schema(False)
    assert emitted_order(base) == ["score", "reason"]
    assert base["properties"]["score"]["enum"] == [0, 1, 2, 3, 4, 5]


class ConcurrencyProbe(ChatModel):
    """Scripted replies; records peak concurrency and the requests it saw."""

    model_id = "scripted"

    def __init__(self, supports_schema: bool = True) -> None:
        self.supports_json_schema = supports_schema
        self.in_flight = 0
        self.peak = 0
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        system, user = request.messages[0]["content"], request.messages[1]["content"]
        if "Lyon" in user.split("OTHER DOCUMENTS")[0] and "Relevance" in system:
            raise ModelError("backend fell over")
        if "Rome" in user.split("OTHER DOCUMENTS")[0]:
            text = "I cannot say."
        elif "Conflict" in system:
            text = "Score: 2"
        else:
            text = '{"score": 4, "reason": "ok"}'
        return ChatResult(text, 50, 7, "stop", 0.01)


def test_score_documents_runs_all_calls_concurrently_and_marks_missing():
    model = ConcurrencyProbe()
    a = asyncio.run(score_documents(model, "Capital of France?", DOCS, AssessConfig()))
    assert len(model.requests) == 9
    assert model.peak == 9  # asyncio.gather: every call in flight at once
    assert all(r.json_schema is not None for r in model.requests)
    assert a.matrix == [[4.0, 4.0, 2.0], [None, 4.0, 2.0], [None, None, None]]
    reasons = {(m["doc_index"], m["agent"]): m["reason"] for m in a.missing}
    assert reasons[(1, "relevance")].startswith("model error")
    assert reasons[(2, "conflict")] == "no score found in output"


def test_no_schema_when_the_model_lacks_support_or_config_disables_it():
    model = ConcurrencyProbe(supports_schema=False)
    asyncio.run(score_documents(model, "q", DOCS[:1], AssessConfig()))
    assert all(r.json_schema is None for r in model.requests)
    model2 = ConcurrencyProbe()
    asyncio.run(score_documents(model2, "q", DOCS[:1], AssessConfig(json_schema=False), cot=True))
    assert all(r.json_schema is None for r in model2.requests)
    assert all(r.max_tokens == AssessConfig().max_tokens for r in model2.requests)


# ---------------------------------------------------------------- generator replies


@pytest.mark.parametrize(
    ("text", "task", "answer"),
    [
        ('{"answer": "REFUTES"}', "fact-verification", "REFUTES"),
        ('{ "answer" : "SUPP', "fact-verification", "SUPPORTS"),  # constrained reply cut at max_tokens
        ("The claim is supported.", "fact-verification", "SUPPORTS"),
        ('{"answer": "no"}', "yes-no-conflict", "no"),
        ('{"answer": "y', "yes-no-conflict", "yes"),
        ("Answer: Paris.\nBecause the document says so.", "factoid", "Paris"),
        ('\n\n"The Beatles"', "factoid", "The Beatles"),
        # Wrappers nest: the full stop outside the emphasis, or inside the quotes.
        # Strict EM keeps punctuation, so "Paris**" would grade a right answer wrong.
        ("**Paris**.", "factoid", "Paris"),
        ('Answer: "*Paris.*"', "factoid", "Paris"),
        ("St. Louis.", "factoid", "St. Louis"),
    ],
)
def test_parse_answer(text, task, answer):
    from bcas.assess.generate import parse_answer

    assert parse_answer(text, task) == answer


def test_the_task_is_the_configurations_else_the_datasets_else_factoid():
    from bcas.assess import generate
    from bcas.config import AssessConfig

    assert generate.task_of(AssessConfig(), "yes-no-conflict") == "yes-no-conflict"
    assert generate.task_of(AssessConfig(task="fact-verification"), "yes-no-conflict") == "fact-verification"
    assert generate.task_of(AssessConfig(), None) == "factoid"
    with pytest.raises(ValueError, match="unknown task"):
        generate.task_of(AssessConfig(), "essay")
    assert not hasattr(generate, "infer_task")  # no task from an item's gold answers
