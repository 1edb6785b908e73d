"""What a method's record shows, on scripted models: the paragraphs IRCoT reads, the
forced-answer flag, and whether a re-ranking step came from the generation cache."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.items import Item
from bcas.llm.base import ChatResult
from bcas.llm.usage import add_usage
from bcas.methods import run_method
from bcas.records import Answer
from bcas.testing.scripted import FakeHit, FakeRetriever, ScriptedModel

ITEM = Item(id="q1", question="Which river flows through the town?", answers=("Avon",), documents=())
# Forty paragraphs that all match the question's words: every search returns a full page.
MANY = [(f"d{i:02d}", f"Town {i}", f"The river Avon flows through town number {i}.") for i in range(40)]
KEEP_GOING = json.dumps({"sentence": "The river flows through the town.", "answer": "Avon"})
PARAGRAPH = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


def config(searches: int | None = 4, tokens: int = 4000, k: int = 8) -> RunConfig:
    return RunConfig(
        budget=Budget(max_searches=searches, max_total_tokens=tokens), retrieval=RetrievalConfig(mode="bm25", k=k)
    )


def run(name: str, model: ScriptedModel, cfg: RunConfig, retriever: Any) -> Answer:
    result, _ = asyncio.run(run_method(name, ITEM, model, retriever, cfg))
    return result


def paragraphs(prompt: str) -> list[int]:
    return [int(n) for n in PARAGRAPH.findall(prompt)]


def test_ircot_reads_at_most_fifteen_paragraphs_however_many_its_searches_return() -> None:
    """IRCoT §3.1: at most 15 paragraphs are collected; the reader and every reasoning step see
    no more, whether the first search alone returns more (k = 20) or the later ones add up past
    it (k = 8, four searches: 32 retrieved)."""
    for k in (8, 20):
        model = ScriptedModel(lambda request, index: KEEP_GOING)
        a = run("ircot", model, config(searches=4, k=k), FakeRetriever(MANY, k=k))
        assert a.searches_used == 4
        retrieved = sum(len(s["retrieved"]) for s in a.steps if s["kind"] == "search")
        assert retrieved > 15  # more were retrieved than the reader may read
        reader = model.requests[-1].messages[-1]["content"]
        assert paragraphs(reader) == list(range(1, 16)), k  # the first 15, numbered as read
        for request in model.requests[:-1]:  # every reasoning step: never more than 15 either
            assert len(paragraphs(request.messages[-1]["content"])) <= 15
        # the paragraphs read are the first ones collected, in the order they were found
        first = [c for s in a.steps if s["kind"] == "search" for c in s["retrieved"]][:15]
        titles = [re.match(r"\[\d+\] (Town \d+):", line) for line in reader.splitlines()]
        shown = [m.group(1) for m in titles if m]
        by_chunk = {f"{doc}#0": title for doc, title, _ in MANY}
        assert shown == [by_chunk[c] for c in first]


def test_the_record_says_whether_a_budget_forced_the_answer() -> None:
    """``extra.forced_answer`` is true exactly when the answer step is a forced one."""
    plenty = run("ircot", ScriptedModel(lambda r, i: KEEP_GOING), config(searches=2), FakeRetriever(MANY, k=2))
    assert [s["kind"] for s in plenty.steps][-1] == "answer"
    assert plenty.extra["forced_answer"] is False
    # 100 tokens: 48 held back for the answer leaves room for one step, then the answer is forced
    short = run(
        "ircot", ScriptedModel(lambda r, i: KEEP_GOING + " pad" * 200), config(tokens=100), FakeRetriever(MANY, k=2)
    )
    assert short.stop_reason == "max_total_tokens" and [s["kind"] for s in short.steps][-1] == "forced_answer"
    assert short.extra["forced_answer"] is True
    closed = run("closed_book", ScriptedModel(lambda r, i: KEEP_GOING), config(), None)
    assert closed.extra["forced_answer"] is False


class RerankingRetriever:
    """A retriever whose search re-ranks with model calls, ``cached`` saying which came from the cache."""

    def __init__(self, cached: list[bool]) -> None:
        self.cached = cached

    def search(self, query: str, k: int | None = None, exclude_ids: Any = ()) -> list[FakeHit]:
        for i, hit in enumerate(self.cached):
            add_usage(ChatResult(text="yes", prompt_tokens=10 + i, completion_tokens=1, finish_reason="stop",
                                 latency_s=0.0, cached=hit))  # fmt: skip
        return [FakeHit("d1", "d1#0", "Avon", "The river Avon.", 1.0)]


def test_a_rerank_step_is_shown_as_cached_only_when_every_call_came_from_the_cache() -> None:
    cases = {(True, True, True): True, (True, False, True): False, (False, True): False, (False, False): False}
    for cached, whole in cases.items():
        a = run("retrieve_read", ScriptedModel(lambda r, i: KEEP_GOING), config(), RerankingRetriever(list(cached)))
        (step,) = [s for s in a.steps if s["kind"] == "rerank"]
        assert step["cached"] is whole, cached
        assert step["calls"] == len(cached)
        assert step["note"] == f"{len(cached)} re-ranking calls ({sum(cached)} from cache)"
        assert step["tokens_in"] == sum(10 + i for i in range(len(cached)))


def test_a_step_is_taken_exactly_when_the_reserve_leaves_a_whole_step() -> None:
    """``forced_answer_tokens`` (48) are held back for the answer and a step needs 48 more: with 96
    tokens a method takes one step of 48 tokens, with 95 it answers at once (forced), both sides
    of the boundary, for IRCoT and Self-Ask."""
    terse = json.dumps({"sentence": "The river flows.", "next": "follow_up", "text": "Which river?", "answer": "Avon"})
    for name in ("ircot", "self_ask"):
        at = run(name, ScriptedModel(lambda r, i: terse), config(searches=4, tokens=96), FakeRetriever(MANY, k=2))
        steps = [s for s in at.steps if s["kind"] == "generate"]
        assert steps and steps[0]["max_tokens"] == 48, name
        below = run(name, ScriptedModel(lambda r, i: terse), config(searches=4, tokens=95), FakeRetriever(MANY, k=2))
        assert not [s for s in below.steps if s["kind"] == "generate"], name
        assert below.stop_reason == "max_total_tokens" and below.extra["forced_answer"] is True, name
