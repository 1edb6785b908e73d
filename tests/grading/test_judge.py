"""LLMJudge (BCAS §3.6): verdict parsing, retries, repeats, separate usage, judge-EM audit."""

from __future__ import annotations

import asyncio
import json

import pytest

from bcas.grading import JUDGE_SCHEMA, JudgeResult, LLMJudge, judge_agreement, parse_verdict
from bcas.testing.scripted import FakeRetriever, ScriptedModel


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"verdict": "correct"}', True),
        ('{"verdict": "incorrect"}', False),
        ('{"Verdict": "Incorrect."}', False),
        ("Correct.", True),
        ("**Incorrect** - the reference says otherwise", False),
        ("Verdict: correct", True),
        ("The model answer is not correct.", False),
        ("The answer matches the reference, so it is correct.", True),
        ("It is wrong.", False),
        ("yes", True),
        ("The answer is correct in part but incorrect overall", None),
        ("I cannot tell", None),
        ('{"verdict": "incor', None),
        ("", None),
    ],
)
def test_parse_verdict(text: str, verdict: bool | None) -> None:
    assert parse_verdict(text) is verdict


def judge(
    model: ScriptedModel, question: str = "Who wrote Hamlet?", answer: str = "Shakespeare", **kwargs: object
) -> JudgeResult:
    return asyncio.run(LLMJudge(model, **kwargs).judge(question, ["William Shakespeare", "Shakespeare"], answer))  # type: ignore[arg-type]


def test_constrained_verdict_and_prompt() -> None:
    model = ScriptedModel(['{"verdict": "correct"}'], model_id="judge-m")
    result = judge(model, answer="Shakespeare, the playwright")
    assert result.verdict is True and result.verdicts == [True] and result.agreement == 1.0
    (request,) = model.requests
    assert request.json_schema == JUDGE_SCHEMA
    prompt = request.messages[0]["content"]
    assert "Question: Who wrote Hamlet?" in prompt
    assert 'Reference answer(s): "William Shakespeare"; "Shakespeare"' in prompt
    assert "Model answer: Shakespeare, the playwright" in prompt
    assert result.model == "judge-m" and result.llm_calls == 1
    assert result.tokens_out == model.completion_tokens_total and result.tokens_in == model.prompt_tokens_total


def test_free_text_backend_is_parsed_tolerantly() -> None:
    model = ScriptedModel(["Incorrect. The reference is someone else."], supports_json_schema=False)
    result = judge(model, answer="Marlowe")
    assert result.verdict is False
    assert model.requests[0].json_schema is None
    assert "Reply with one word: correct or incorrect." in model.requests[0].messages[0]["content"]


def test_unreadable_verdict_is_retried_then_none_never_wrong() -> None:
    model = ScriptedModel(["hmm, let me think", '{"verdict": "incorrect"}'], supports_json_schema=False)
    result = judge(model, retries=1)
    assert result.verdict is False and result.llm_calls == 2
    retry = model.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": "hmm, let me think"}
    assert "did not contain a verdict" in retry[-1]["content"]

    stubborn = ScriptedModel(["no idea", "still no idea", "really"], supports_json_schema=False)
    result = judge(stubborn, retries=2)
    assert result.verdict is None and result.verdicts == [None]
    assert result.reason == "no readable verdict after 3 attempt(s) per repeat"
    assert result.llm_calls == 3 and result.agreement is None


def test_repeats_record_agreement_and_use_distinct_seeds() -> None:
    model = ScriptedModel(["correct", "incorrect", "correct"], supports_json_schema=False)
    result = judge(model, repeats=3, seed=10)
    assert result.verdicts == [True, False, True]
    assert result.verdict is True and result.agreement == pytest.approx(2 / 3)
    assert [r.seed for r in model.requests] == [10, 11, 12]
    tie = judge(ScriptedModel(["correct", "incorrect"], supports_json_schema=False), repeats=2)
    assert tie.verdict is None and tie.reason == "repeats tie (1 correct, 1 incorrect)" and tie.agreement == 0.5


def test_empty_answer_is_incorrect_without_a_call() -> None:
    model = ScriptedModel(["correct"])
    result = judge(model, answer="  ")
    assert result.verdict is False and model.requests == []
    assert "empty answer" in (result.reason or "")


def test_judge_usage_is_kept_apart_from_the_agent() -> None:
    from bcas.agent import run_bcas
    from bcas.agent.records import record_from_trajectory
    from bcas.config import Budget, RunConfig
    from bcas.data import Document, Item
    from bcas.records import load_price_sheet

    item = Item("q", "Who wrote Hamlet?", ("William Shakespeare",), (Document("d", "Hamlet", "Hamlet by Shakespeare"),))
    agent_model = ScriptedModel(
        [json.dumps({"thought": "t", "action": "ready_to_answer", "query": ""}), '{"answer": "William Shakespeare"}'],
        model_id="gpt-4.1-mini",
    )
    traj = asyncio.run(
        run_bcas(
            item,
            agent_model,
            FakeRetriever([("d", "Hamlet", "Hamlet by Shakespeare")]),
            RunConfig(budget=Budget(max_searches=1)),
        )
    )
    judge_model = ScriptedModel(['{"verdict": "correct"}'], model_id="gpt-4o-mini")
    verdict = asyncio.run(LLMJudge(judge_model).judge(item.question, item.answers, traj.prediction))
    record = record_from_trajectory(
        traj, run_id="r", dataset_name="toy", dataset_hash="h", judge=verdict, prices=load_price_sheet("list")
    )
    assert record.judge_verdict is True and record.correct_em
    assert record.tokens_out == agent_model.completion_tokens_total
    assert record.judge["tokens_out"] == judge_model.completion_tokens_total
    assert record.llm_calls == 2 and record.judge["llm_calls"] == 1
    agent_cost = (agent_model.prompt_tokens_total * 0.40 + agent_model.completion_tokens_total * 1.60) / 1e6
    assert record.cost_usd == pytest.approx(agent_cost)
    judge_cost = (judge_model.prompt_tokens_total * 0.15 + judge_model.completion_tokens_total * 0.60) / 1e6
    assert record.judge["cost_usd"] == pytest.approx(judge_cost)


def test_judge_agreement_audit() -> None:
    rows = [
        {"judge_verdict": True, "correct_em": True, "judge": {"agreement": 1.0, "repeats": 3}},
        {"judge_verdict": True, "correct_em": False, "judge": {"agreement": 2 / 3, "repeats": 3}},
        {"judge_verdict": False, "correct_em": False, "judge": {"agreement": 1.0, "repeats": 3}},
        {"judge_verdict": False, "correct_em": False, "judge": {"agreement": 1.0, "repeats": 3}},
        {"judge_verdict": None, "correct_em": True, "judge": {"agreement": None, "reason": "unreadable"}},
        {"judge_verdict": None, "correct_em": False, "judge": None},
    ]
    audit = judge_agreement(rows)
    assert (audit.n_records, audit.n_judged, audit.n_unreadable) == (6, 4, 1)
    assert audit.agree == 3 and audit.agreement == 0.75
    assert (audit.judge_only_correct, audit.em_only_correct) == (1, 0)
    # kappa by hand: p_o = 0.75; p_judge = 0.5, p_em = 0.25; p_e = 0.5*0.25 + 0.5*0.75 = 0.5
    assert audit.cohen_kappa == pytest.approx(0.5)
    assert audit.judge_accuracy == 0.5 and audit.em_accuracy == 0.25
    assert audit.mean_repeat_agreement == pytest.approx((1 + 2 / 3 + 1 + 1) / 4)
    assert judge_agreement([]).agreement is None


# -- the real embedded model -----------------------------------------------------------------

CASES = [
    ("What government position was held by Shirley Temple?", ["Chief of Protocol"], "Chief of Protocol"),
    ("What government position was held by Shirley Temple?", ["Chief of Protocol"], "Mayor of Paris"),
    ("Which country is Fuding in?", ["China"], "the People's Republic of China"),
    ("Who wrote Hamlet?", ["William Shakespeare"], "Charles Dickens"),
]


@pytest.fixture(scope="module")
def judge_llm(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - yields a ChatModel
    from bcas.llm import load_model

    # one thread: llama.cpp's spinning worker threads slow to a crawl on a shared 2-core box
    cache = tmp_path_factory.mktemp("judge-cache") / "generations.sqlite"
    model = load_model("embedded", n_ctx=2048, n_threads=1, cache=str(cache))
    yield model
    asyncio.run(model.aclose())


def test_real_judge_outputs_parse(judge_llm) -> None:  # noqa: ANN001
    async def go() -> list[JudgeResult]:
        judge_ = LLMJudge(judge_llm, max_tokens=16)
        return [await judge_.judge(q, refs, a) for q, refs, a in CASES]

    results = asyncio.run(go())
    for result in results:
        assert result.verdict is not None, result.outputs  # the constrained reply always parses
        assert json.loads(result.outputs[0])["verdict"] in ("correct", "incorrect")
        assert result.tokens_out > 0 and result.model.startswith("smollm2")
    print("\nreal judge verdicts:", [(a, r.verdict) for (_, _, a), r in zip(CASES, results, strict=True)])
    # the second pass is served by the generation cache that load_model put in front of the model
    again = asyncio.run(LLMJudge(judge_llm, max_tokens=16).judge(*CASES[0]))
    assert again.cached_calls == again.llm_calls == 1 and again.verdict == results[0].verdict


def test_real_judge_free_text_and_repeat_agreement(judge_llm) -> None:  # noqa: ANN001
    """Free text on the real model, and three sampled repeats whose agreement is recomputed
    from their verdicts (catches an agreement that is the share of "correct" verdicts, or
    that counts unreadable repeats, and a majority verdict that disagrees with them)."""

    async def go() -> tuple[JudgeResult, JudgeResult]:
        free = await LLMJudge(judge_llm, max_tokens=24, use_schema=False, retries=1).judge(*CASES[1])
        repeated = await LLMJudge(judge_llm, repeats=3, temperature=0.9, max_tokens=16).judge(*CASES[2])
        return free, repeated

    free, repeated = asyncio.run(go())
    # free text from a 135M model may or may not hold a verdict; either way it is never silently "wrong"
    assert (free.verdict is None) == (free.reason is not None)
    assert free.llm_calls in (1, 2)
    assert len(repeated.verdicts) == 3 and all(v is not None for v in repeated.verdicts)
    # agreement = the majority's share of the readable verdicts, recomputed here; catches
    # a share of "correct" verdicts (yes / n) or a count over unreadable ones.
    yes = repeated.verdicts.count(True)
    assert repeated.agreement == pytest.approx(max(yes, 3 - yes) / 3)
    assert repeated.verdict is (yes >= 2)
    print(
        f"\nfree-text judge: verdict={free.verdict} outputs={free.outputs!r}; repeats={repeated.verdicts} agreement={repeated.agreement:.2f}"
    )


def test_judge_request_is_served_by_the_generation_cache(tmp_path) -> None:  # noqa: ANN001
    """A repeated judge call is answered by the cache, a different answer is not.

    Catches a judge request that varies between identical calls (a per-call seed,
    a timestamp or random text in the prompt: never a cache hit) and a key that leaves
    out the judged answer (a second answer would get the first one's verdict).
    """
    from bcas.llm.cache import CachedModel, GenerationCache

    inner = ScriptedModel(['{"verdict": "correct"}', '{"verdict": "incorrect"}'])
    cached = CachedModel(inner, GenerationCache(tmp_path / "generations.sqlite", enabled=True))
    refs = ["William Shakespeare"]
    first = asyncio.run(LLMJudge(cached).judge("Who wrote Hamlet?", refs, "Shakespeare"))
    again = asyncio.run(LLMJudge(cached).judge("Who wrote Hamlet?", refs, "Shakespeare"))
    other = asyncio.run(LLMJudge(cached).judge("Who wrote Hamlet?", refs, "Marlowe"))
    assert len(inner.requests) == 2  # the repeat never reached the model
    assert (first.cached_calls, again.cached_calls, other.cached_calls) == (0, 1, 0)
    assert first.verdict is True and again.verdict is True and other.verdict is False
    cached.cache.close()


def test_failing_judge_model_gives_none_with_reason() -> None:
    model = ScriptedModel(["correct"], fail_at=0)
    result = judge(model)
    assert result.verdict is None
    assert result.reason == "judge call failed: ModelError: scripted: scripted failure at call 0"
