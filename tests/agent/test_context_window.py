"""The context window: no call asks for more than the window leaves, and a full window
ends the loop with its forced answer (stop reason ``context_window``), never an error.

The paper grids' unlimited-search cases grow the conversation past any small model's
window; with ``mock:verbose`` (which spends every search and token it is allowed) and a
window the mock enforces like a server, every trajectory must finish with a recorded
answer and every request must fit.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from bcas.agent import run_bcas
from bcas.agent.loop import STOP_REASONS, Trajectory
from bcas.agent.records import record_from_trajectory
from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.data import Dataset, load_dataset
from bcas.grids import ABLATION, CONTEXT_SCALING, SEARCH_SCALING
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError
from bcas.report.summary import summarize
from bcas.testing.mock import MockModel
from bcas.testing.schema_json import count_tokens

BM25 = RetrievalConfig(mode="bm25")
WINDOW = 4096


@pytest.fixture(scope="module")
def hotpotqa() -> Dataset:
    return load_dataset("hotpotqa", limit=3)


@pytest.fixture(scope="module")
def bm25(hotpotqa: Dataset) -> Any:
    from bcas.retrieval import build_retriever

    return build_retriever(hotpotqa.documents, BM25, progress=False)


def run(item: Any, model: Any, retriever: Any, config: RunConfig) -> Trajectory:
    return asyncio.run(run_bcas(item, model, retriever, config, keep_requests=True))


def prompt_tokens(request: ChatRequest) -> int:
    return sum(count_tokens(str(m.get("content", ""))) for m in request.messages)


def unlimited_entries() -> list[Any]:
    return [
        e
        for g in (SEARCH_SCALING, CONTEXT_SCALING, ABLATION)
        for e in g.entries
        if e.config.budget.max_searches is None
    ]


def test_paper_grids_unlimited_cases_stop_at_the_window_with_an_answer(hotpotqa: Dataset, bm25: Any) -> None:
    model = MockModel("verbose", context_window=WINDOW)
    stops = set()
    for entry in unlimited_entries():
        config = replace(entry.config, retrieval=BM25)
        traj = run(hotpotqa.items[0], model, bm25, config)
        assert traj.error is None, (entry.label, traj.error)
        for request in traj.requests:
            assert prompt_tokens(request) + request.max_tokens <= WINDOW, entry.label
        stops.add(traj.stop_reason)
        if traj.stop_reason == "context_window":
            assert traj.steps[-1].kind == "forced_answer"
            assert traj.prediction  # the forced answer was given and parsed
            assert traj.context_note
    # the 16K budgets cannot be spent inside a 4K window: at least those stop for the window
    assert "context_window" in stops


def test_without_a_window_the_verbose_mock_overflows_a_server_sized_prompt(hotpotqa: Dataset, bm25: Any) -> None:
    """The reason for the rule: unclamped, the same case grows far past 4K tokens of prompt."""
    config = replace(CONTEXT_SCALING.entries[-1].config, retrieval=BM25)
    traj = run(hotpotqa.items[0], MockModel("verbose"), bm25, config)
    assert max(prompt_tokens(r) for r in traj.requests) > 2 * WINDOW


class _RefusingModel(ChatModel):
    """A real-server-like refusal: the window is not declared, the server says no past it."""

    model_id = "refusing"
    supports_json_schema = True

    def __init__(self, inner: MockModel, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.refused = 0

    async def chat(self, request: ChatRequest) -> ChatResult:
        if prompt_tokens(request) + request.max_tokens > self.limit:
            self.refused += 1
            raise ContextWindowError(f"request exceeds the available context size ({self.limit} tokens)")
        return await self.inner.chat(request)


def test_a_refusal_for_length_is_a_context_window_stop_not_an_error(hotpotqa: Dataset, bm25: Any) -> None:
    inner = MockModel("verbose")
    model = _RefusingModel(inner, limit=20000)
    config = replace(CONTEXT_SCALING.entries[-1].config, retrieval=BM25)
    traj = run(hotpotqa.items[0], model, bm25, config)
    assert model.refused >= 1
    assert traj.stop_reason == "context_window" and traj.error is None
    assert traj.steps[-1].kind == "forced_answer" and traj.prediction
    record = record_from_trajectory(traj, run_id="r", dataset_name="hotpotqa", dataset_hash="h").to_dict()
    assert record["stop_reason"] == "context_window"
    assert "context" in record["extra"]["context_window"]
    row = summarize([record])[0]
    assert row.context_window_stops == 1 and row.errors == 0


def test_every_call_is_clamped_to_what_the_window_leaves(hotpotqa: Dataset, bm25: Any) -> None:
    model = MockModel("verbose", context_window=3000)
    config = RunConfig(budget=Budget(max_searches=None, max_total_tokens=16000), retrieval=BM25)
    traj = run(hotpotqa.items[1], model, bm25, config)
    assert traj.error is None
    # the ledger's budget is far from spent: the window, not the budget, set the caps
    assert all(r.max_tokens < 16000 - traj.tokens_out for r in traj.requests[-2:])
    assert all(prompt_tokens(r) + r.max_tokens <= 3000 for r in traj.requests)


def test_stop_reasons_name_the_window() -> None:
    assert "context_window" in STOP_REASONS
