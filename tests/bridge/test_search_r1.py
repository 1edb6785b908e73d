"""The built-in Search-R1-style agent (bcas.bridge.search_r1): the paper's prompt and the
<search>/<information>/<answer> protocol, through the bridge's retriever API and chat endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

from bcas.bridge import open_bridge
from bcas.bridge.runner import AgentOutcome, run_agent
from bcas.bridge.search_r1 import MAX_TURNS, read_action, untagged
from bcas.config import BridgedAgent, Budget, RetrievalConfig, RunConfig
from bcas.items import Item
from bcas.llm.base import ChatRequest
from bcas.testing.scripted import FakeRetriever, ScriptedModel

ITEM = Item(id="q1", question="Where was the author of Hamlet born", answers=("Stratford",), documents=())
PASSAGES = [
    ("d1", "Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
    ("d2", "William Shakespeare", "William Shakespeare was born in Stratford-upon-Avon."),
]


def run(model: ScriptedModel, searches: int = 3, tokens: int = 4000) -> tuple[Any, AgentOutcome]:
    cfg = RunConfig(budget=Budget(max_searches=searches, max_total_tokens=tokens), retrieval=RetrievalConfig(k=3))

    async def main() -> tuple[Any, AgentOutcome]:
        async with open_bridge(ITEM, model, FakeRetriever(PASSAGES, k=3), cfg, ("openai", "retriever")) as (b, ep):
            outcome = await run_agent(BridgedAgent(callable="search_r1"), ITEM.question, ep)
        return b, outcome

    return asyncio.run(main())


def test_search_r1_searches_reads_the_information_and_answers_in_its_tags() -> None:
    model = ScriptedModel([
        "<think>I need the author.</think>\n<search> Hamlet author birthplace </search>",
        "<think>Shakespeare, born in Stratford.</think>\n<answer> Stratford-upon-Avon </answer>",
    ])  # fmt: skip
    bridge, outcome = run(model)
    assert outcome == AgentOutcome(answer="Stratford-upon-Avon")
    first, second = model.requests
    prompt = first.messages[0]["content"]
    assert prompt.startswith("Answer the given question. You must conduct reasoning inside <think> and </think>")
    assert prompt.endswith("Question: Where was the author of Hamlet born?")  # the '?' infer.py adds
    assert first.stop == ("</search>",)
    assert second.messages[-1]["content"].startswith("<information>Doc 1(Title: Hamlet) Hamlet is a tragedy")
    assert "Doc 2(Title: William Shakespeare) William Shakespeare was born" in second.messages[-1]["content"]
    assert [(s.kind, s.query) for s in bridge.ledger.steps] == [
        ("generate", None), ("search", "Hamlet author birthplace"), ("generate", None)
    ]  # fmt: skip


def test_past_its_budget_search_r1_reads_the_refusal_and_without_an_answer_gives_none() -> None:
    model = ScriptedModel(lambda request, index: f"<search> query {index} </search>")
    bridge, outcome = run(model, searches=1)
    assert outcome.error == "no answer: the agent returned nothing"
    assert bridge.ledger.searches_used == 1 and len(bridge.refused_searches) == MAX_TURNS - 1
    last: ChatRequest = model.requests[-1]  # the turn that asks for the answer, after the last refusal
    assert "search budget is spent" in last.messages[-2]["content"]
    assert "Shakespeare" not in last.messages[-2]["content"]


def test_a_reply_with_neither_tag_gets_the_repositorys_invalid_action_note() -> None:
    model = ScriptedModel(["I am not sure.", "<answer> Stratford </answer>"])
    _, outcome = run(model)
    assert outcome.answer == "Stratford"
    assert model.requests[1].messages[-1]["content"].startswith("My previous action is invalid.")


def test_after_its_turns_without_an_answer_it_asks_once_more_and_takes_an_untagged_reply_as_the_answer() -> None:
    def script(request: ChatRequest, index: int) -> str:
        asked = "final answer" in request.messages[-1]["content"]
        return "<think>It is Stratford.</think> Stratford-upon-Avon" if asked else "Let me think."

    model = ScriptedModel(script)
    _, outcome = run(model)
    assert outcome.answer == "Stratford-upon-Avon"
    assert len(model.requests) == MAX_TURNS + 1
    assert model.requests[-1].messages[-1]["content"].startswith("Now give your final answer to the question inside")


def test_the_answer_tag_wins_and_a_cut_off_search_is_read() -> None:
    assert read_action("<search> a </search> <answer> b </answer>") == ("answer", "b")
    assert read_action("<think>x</think><search> who wrote Hamlet") == ("search", "who wrote Hamlet")
    assert read_action("no tags") == ("invalid", "")
    assert untagged("<think>hm</think> Paris <search> capital") == "Paris"


def test_a_spent_token_budget_stops_the_agent_without_an_answer() -> None:
    model = ScriptedModel(["<search> " + "word " * 30 + "</search>"])
    bridge, outcome = run(model, tokens=20)
    assert outcome.error is not None and outcome.error.startswith("no answer")
    assert bridge.ledger.tokens_out == 20 and bridge.refused_calls == 1
