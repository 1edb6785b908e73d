"""Every model call made for an item is on its ledger: the ``llm`` reranker's calls too.

With hybrid retrieval re-ranked by the ``llm`` reranker (HS+R, BCAS §3.5), each search
asks the evaluated model once per candidate.  The record must count those calls and
their provider-reported tokens (a ``rerank`` step per search, in the totals and the
cost), while the agent's token budget charges only the agent's own turns.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bcas.agent import run_bcas
from bcas.agent.budget import BudgetLedger
from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.data import load_dataset
from bcas.retrieval import build_retriever
from bcas.testing.mock import MockModel
from bcas.testing.recording import RecordingModel


@pytest.fixture(scope="module")
def hotpotqa() -> Any:
    return load_dataset("hotpotqa", limit=2)


@pytest.mark.parametrize("searches", [1, 3])
def test_reranker_calls_are_on_the_ledger_and_outside_the_budget(
    hotpotqa: Any, minilm_embedder: Any, searches: int
) -> None:
    mock = MockModel("verbose")
    mock.register_items(hotpotqa)
    model = RecordingModel(mock)
    retrieval = RetrievalConfig(mode="hybrid_rerank", candidates=20, reranker="llm")
    retriever = build_retriever(
        hotpotqa.documents, retrieval, model=model, embedder=minilm_embedder, cache_dir=False, progress=False
    )
    budget = Budget(max_searches=searches, max_total_tokens=600)
    traj = asyncio.run(run_bcas(hotpotqa.items[0], model, retriever, RunConfig(budget=budget, retrieval=retrieval)))
    assert traj.error is None
    # the ledger's calls and tokens are what the model received and reported
    assert traj.llm_calls == model.calls
    assert traj.tokens_in == model.prompt_tokens and traj.tokens_out == model.completion_tokens
    reranks = [s for s in traj.steps if s.kind == "rerank"]
    assert len(reranks) == traj.searches_used >= 1
    assert reranks[0].calls == 20 and all(1 <= s.calls <= 20 for s in reranks)  # one call per candidate
    # the budget charges the agent's own turns only
    ledger: BudgetLedger = traj.ledger
    assert ledger.agent_tokens_out == traj.tokens_out - sum(s.tokens_out for s in reranks)
    assert ledger.agent_tokens_out <= budget.max_total_tokens + budget.forced_answer_tokens
