"""The ``mock`` backend: every request kind the suite makes is answered validly under its
schema, deterministically; ``gold`` answers gold, ``verbose`` spends its budgets,
``random`` answers seeded spans of what it has seen."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest

from bcas.agent import run_bcas
from bcas.assess import run_madara
from bcas.assess.rsc import probe
from bcas.config import AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Dataset, Document, Item, load_dataset
from bcas.grading import LLMJudge
from bcas.llm import load_model
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ModelError
from bcas.retrieval.rerank import LLMReranker
from bcas.testing.mock import VARIANTS, MockModel, count_tokens
from bcas.testing.scripted import FakeRetriever

PASSAGES = [
    (
        "d1",
        "Kiss and Tell (1945 film)",
        "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.",
    ),
    ("d2", "Shirley Temple", "Shirley Temple Black served as Chief of Protocol of the United States."),
    ("d3", "Meet Corliss Archer", "Meet Corliss Archer is a radio program from the Golden Age of radio."),
    ("d4", "Janet Waldo", "Janet Waldo voiced Corliss Archer on radio."),
]
ITEM = Item(
    id="q1",
    question="What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?",
    answers=("Chief of Protocol",),
    documents=tuple(Document(d, t, x) for d, t, x in PASSAGES),
)
FEVER_ITEM = Item(
    id="f1",
    question="Shirley Temple served as Chief of Protocol.",
    answers=("SUPPORTS",),
    documents=tuple(Document(d, t, x) for d, t, x in PASSAGES[:2]),
)
YESNO_ITEM = Item(
    id="y1",
    question="Did Shirley Temple play Corliss Archer?",
    answers=("yes",),
    documents=tuple(Document(d, t, x) for d, t, x in PASSAGES),
)
AGENT_KINDS = {"plan", "action", "reflect", "answer"}


class Checked(ChatModel):
    """A mock whose every reply is checked: valid under the request's schema, within
    ``max_tokens``, usage equal to the documented count, labelled as a mock."""

    supports_json_schema = True
    supports_logprobs = True

    def __init__(self, inner: MockModel) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.kinds: list[str] = []

    async def chat(self, request: ChatRequest) -> ChatResult:
        result = await self.inner.chat(request)
        assert result.completion_tokens == count_tokens(result.text) <= request.max_tokens
        assert result.extra["mock"] is True and result.extra["variant"] == self.inner.variant
        assert result.extra["kind"] != "generic", request.messages[-1]["content"][:200]
        if request.json_schema is not None:
            jsonschema.validate(json.loads(result.text), request.json_schema)
        if request.top_logprobs:
            assert result.logprobs is not None and len(result.logprobs[0]) == request.top_logprobs
        self.kinds.append(result.extra["kind"])
        return result


def mock(variant: str, *items: Item) -> Checked:
    model = MockModel(variant)
    model.register_items([ITEM, FEVER_ITEM, YESNO_ITEM, *items])
    return Checked(model)


# -- every request kind ---------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ["json", "text"])
@pytest.mark.parametrize("constrained_answer", [True, False])
def test_agent_requests_are_valid(variant: str, fmt: str, constrained_answer: bool) -> None:
    model = mock(variant)
    agent = AgentConfig(planning=True, reflection=True, reflect_every=1, action_format=fmt,
                        constrained_answer=constrained_answer)  # fmt: skip
    config = RunConfig(budget=Budget(max_searches=3, max_total_tokens=3000), agent=agent)
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=2), config))
    assert traj.error is None and traj.invalid_turns == 0
    assert traj.prediction
    assert {"plan", "action", "answer"} <= set(model.kinds) <= AGENT_KINDS
    if traj.action_turns > 1:
        assert "reflect" in model.kinds


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("schema", [True, False])
def test_madara_requests_are_valid(variant: str, schema: bool) -> None:
    model = mock(variant)
    methods = ["nf", "3-agent", "cot", "sda", "atf", "pde", "pde-random", "rrf"]

    async def go() -> list[Any]:
        records = []
        for item in (ITEM, FEVER_ITEM, YESNO_ITEM):
            for method in methods:
                cfg = AssessConfig(method=method, doc_source="item", k=2, json_schema=schema)
                records.append(await run_madara(item, model, None, RunConfig(assess=cfg)))
        cfg = AssessConfig(doc_source="item", json_schema=schema, rsc_bootstrap=10, calibration_n=3)
        await probe(model, [ITEM, FEVER_ITEM, YESNO_ITEM], None, RunConfig(assess=cfg))
        return records

    records = asyncio.run(go())
    assert all(r.error is None and r.prediction for r in records)
    assert {"assess", "generate", "rescore"} <= set(model.kinds)
    if variant == "gold":  # the gold generator answers gold, labels included
        assert all(r.correct_em for r in records)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("schema", [True, False])
def test_judge_verdicts(variant: str, schema: bool) -> None:
    model = mock(variant)
    judge = LLMJudge(model, repeats=3, temperature=0.6, use_schema=schema)
    right = asyncio.run(judge.judge(ITEM.question, ITEM.answers, "chief of protocol"))
    wrong = asyncio.run(judge.judge(ITEM.question, ITEM.answers, "Secretary of State"))
    assert right.verdict is not None or right.reason  # random may tie; a reason is then given
    assert all(v is not None for v in right.verdicts + wrong.verdicts)
    if variant != "random":  # gold and verbose grade by exact match against the references
        assert right.verdict is True and wrong.verdict is False
    assert set(model.kinds) == {"judge"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_reranker_logprobs(variant: str) -> None:
    model = mock(variant)
    reranker = LLMReranker(model, top_logprobs=5)
    scores = asyncio.run(reranker.score(ITEM.question, [text for _, _, text in PASSAGES]))
    assert len(scores) == len(PASSAGES) and set(model.kinds) == {"rerank"}
    if variant == "gold":  # the passage stating the gold answer ranks first
        assert max(range(len(scores)), key=scores.__getitem__) == 1


# -- determinism and labels -------------------------------------------------------------


def _request(seed: int = 0, **fields: Any) -> ChatRequest:
    docs = "\n".join(f"[{i}] {t}: {x}" for i, (_, t, x) in enumerate(PASSAGES, 1))
    user = f"DOCUMENTS:\n{docs}\n\nQUESTION: {ITEM.question}\nANSWER:"
    messages = [
        {"role": "system", "content": "Answer the question using the documents."},
        {"role": "user", "content": user},
    ]
    return ChatRequest(messages=messages, seed=seed, **fields)


@pytest.mark.parametrize("variant", VARIANTS)
def test_replies_are_deterministic(variant: str) -> None:
    first = MockModel(variant)
    second = MockModel(variant)
    for model in (first, second):
        model.register_items([ITEM])
    for seed in range(3):
        a = asyncio.run(first.chat(_request(seed)))
        b = asyncio.run(second.chat(_request(seed)))
        assert (a.text, a.completion_tokens, a.prompt_tokens) == (b.text, b.completion_tokens, b.prompt_tokens)


def test_random_answers_are_seeded_spans_of_seen_documents() -> None:
    model = MockModel("random")
    replies = {asyncio.run(model.chat(_request(seed))).text for seed in range(12)}
    assert len(replies) > 1  # the seed changes the span
    seen = " ".join(f"{t}: {x}" for _, t, x in PASSAGES)
    assert all(reply and reply in seen for reply in replies)


def test_load_model_labels_the_mock_and_does_not_cache(tmp_path: Any) -> None:
    model = load_model("mock", cache=str(tmp_path / "cache.sqlite"))
    assert isinstance(model, MockModel) and model.model_id == "mock:gold"
    assert load_model("mock", "verbose").model_id == "mock:verbose"
    assert not (tmp_path / "cache.sqlite").exists()
    with pytest.raises(ModelError, match="unknown mock variant 'clever'"):
        load_model("mock", "clever")
    with pytest.raises(ModelError, match="takes only the option context_window"):
        load_model("mock", "gold", base_url="http://127.0.0.1:1/v1")


def test_gold_refuses_to_guess_an_unknown_question() -> None:
    stranger = Item("x", "Who wrote an unregistered question?", ("Nobody",), ITEM.documents)
    traj = asyncio.run(run_bcas(stranger, MockModel("gold"), FakeRetriever(PASSAGES, k=2), RunConfig()))
    assert traj.stop_reason == "error" and "register_items" in (traj.error or "")


# -- gold and verbose through the agent loop on a real BM25 index -------------------------


@pytest.fixture(scope="module")
def hotpotqa() -> Dataset:
    return load_dataset("hotpotqa")


@pytest.fixture(scope="module")
def bm25(hotpotqa: Dataset) -> Any:
    from bcas.retrieval import build_retriever

    return build_retriever(hotpotqa.documents, RetrievalConfig(mode="bm25"), progress=False)


def test_gold_answers_gold_through_the_loop(hotpotqa: Dataset, bm25: Any) -> None:
    model = MockModel("gold")
    assert model.register_items(hotpotqa) == len(hotpotqa.items)
    items = list(hotpotqa.items[:5])
    config = RunConfig(budget=Budget(max_searches=None, max_total_tokens=2000))
    trajs = [asyncio.run(run_bcas(item, model, bm25, config)) for item in items]
    for item, traj in zip(items, trajs, strict=True):
        assert traj.prediction == item.answers[0]
        assert traj.searches_used == 1 and traj.stop_reason == "answered"
        assert [s.kind for s in traj.steps] == ["search", "ready", "answer"]


def test_verbose_spends_every_token_and_search(hotpotqa: Dataset, bm25: Any) -> None:
    model = MockModel("verbose")
    item = hotpotqa.items[0]
    limited = RunConfig(budget=Budget(max_searches=3, max_total_tokens=2000))
    traj = asyncio.run(run_bcas(item, model, bm25, limited))
    assert traj.searches_used == 3 and traj.stop_reason == "max_searches"
    unlimited = RunConfig(budget=Budget(max_searches=None, max_total_tokens=2000))
    traj = asyncio.run(run_bcas(item, model, bm25, unlimited))
    assert traj.stop_reason == "max_total_tokens" and traj.searches_used > 12
    assert traj.ledger.budgeted_tokens_out > 2000 - unlimited.budget.forced_answer_tokens
    # a free-text request runs to its max_tokens
    plan = ChatRequest([{"role": "user", "content": f"Question: {item.question}\nwrite a short research plan"}],
                       max_tokens=300)  # fmt: skip
    result = asyncio.run(model.chat(plan))
    assert result.completion_tokens == 300 and result.finish_reason == "length"
