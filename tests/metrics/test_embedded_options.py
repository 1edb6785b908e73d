"""Citations and the three-way judge with the embedded model (SmolLM2-135M; ``slow``).

What is checked is the machinery, not the model's skill: llama.cpp accepts the bounded
``cite`` grammar and the reply lies inside it, the record carries the cite list, and the
three-way judge's constrained reply reads as one of its three grades.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from bcas.agent import run_bcas
from bcas.agent.protocol import CITE_MAX_ITEMS, answer_schema, parse_answer, parse_cite
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Dataset, load_dataset
from bcas.grading import LLMJudge
from bcas.grading.judge import JUDGE_GRADES
from bcas.llm.base import ChatRequest
from bcas.prompts import prompt_text

pytestmark = pytest.mark.slow
RETRIEVAL = RetrievalConfig(mode="bm25", k=2)


@pytest.fixture(scope="module")
def hotpotqa() -> Dataset:
    return load_dataset("hotpotqa")


@pytest.fixture(scope="module")
def smollm2() -> Iterator[Any]:
    from bcas.llm import load_model

    model = load_model("embedded", n_ctx=4096, n_threads=1)
    yield model
    asyncio.run(model.aclose())


def test_embedded_model_answers_with_citations_under_the_bounded_grammar(hotpotqa: Dataset, smollm2: Any) -> None:
    from bcas.retrieval import build_retriever

    item = hotpotqa.subset(1).items[0]
    retriever = build_retriever(hotpotqa.documents, RETRIEVAL, progress=False)
    # the grammar itself: an answer request listing shown passage ids, decoded by llama.cpp
    hits = retriever.search(item.question, k=2)
    ids = [h.chunk_id for h in hits]
    passages = "\n".join(f"[{i}] (id {h.chunk_id}) {h.title}: {h.text[:300]}" for i, h in enumerate(hits, 1))
    ask = f"{passages}\n\nQuestion: {item.question}\n{prompt_text('bcas.agent', 'options/answer_cite_json')}"
    request = ChatRequest(
        messages=({"role": "user", "content": ask},), max_tokens=64, temperature=0.0, json_schema=answer_schema(64, ids)
    )
    reply = asyncio.run(smollm2.chat(request))
    print(f"\ncite grammar reply: {reply.text} ({reply.completion_tokens} tokens, {reply.finish_reason})")
    obj = json.loads(reply.text)  # the grammar closed the object within the allowance
    assert set(obj) == {"answer", "cite"} and isinstance(obj["answer"], str)
    assert set(obj["cite"]) <= set(ids) and len(obj["cite"]) <= CITE_MAX_ITEMS
    assert parse_cite(reply.text) == list(dict.fromkeys(obj["cite"])) and parse_answer(reply.text) == obj["answer"]
    # the loop: one item, cite on; the record carries the cite list
    budget = Budget(max_searches=1, max_total_tokens=400, per_turn_max_tokens=96, forced_answer_tokens=64)
    config = RunConfig(budget=budget, retrieval=RETRIEVAL, agent=AgentConfig(cite=True, max_turns=2))
    traj = asyncio.run(run_bcas(item, smollm2, retriever, config, keep_requests=True))
    assert traj.stop_reason != "error", traj.error
    record = record_from_trajectory(traj, run_id="real", dataset=hotpotqa.subset(1))
    assert isinstance(record.extra["cite"], list) and isinstance(record.extra["cited_docs"], list)
    assert record.extra["cite_unseen"] == 0  # constrained: only shown passages can be cited
    if traj.searches_used:
        schema = traj.requests[-1].json_schema
        assert schema is not None and "cite" in schema["properties"]
    print(f"loop: stop {traj.stop_reason}, searches {traj.searches_used}, answer {traj.prediction!r}, "
          f"cite {record.extra['cite']} -> {record.extra['cited_docs']}")  # fmt: skip


def test_embedded_model_as_three_way_judge(hotpotqa: Dataset, smollm2: Any) -> None:
    item = hotpotqa.subset(1).items[0]
    judge = LLMJudge(smollm2, three_way=True)
    labels = []
    for answer in (item.answers[0], "I don't know"):
        result = asyncio.run(judge.judge(item.question, list(item.answers), answer))
        assert result.labels and result.label in JUDGE_GRADES, result.to_dict()
        assert result.verdict == (result.label == "correct")
        labels.append(result.label)
    print(f"\nthree-way labels (gold answer, a decline): {labels}")
