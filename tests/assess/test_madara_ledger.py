"""Every model call a MADARA run makes is on its ledger (MADARA Appendix K compares costs).

Two kinds of call were made outside the records: the ``llm`` reranker's (one per
candidate while an item's documents are retrieved, as in the BCAS loop's ``rerank``
steps) and the routed pipeline's RSC probe and EvalNF on the calibration items
(Algorithm 2, lines 1-6).  A model double counts what it really received; the records,
the ``rsc/`` folder and ``summary.json`` must sum to the same, or a cost comparison
would undercount.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.assess import run_madara
from bcas.config import AssessConfig, RetrievalConfig, RunConfig
from bcas.data import load_dataset
from bcas.grids import GRIDS
from bcas.grids.table import Grid, GridEntry, register_grid
from bcas.records import ModelPrice, PriceSheet, reprice_record
from bcas.retrieval import build_retriever
from bcas.run.finalize import finalize_run
from bcas.testing.mock import MockModel
from bcas.testing.recording import RecordingModel, recording_backend

SHEET = PriceSheet("test", {"mock": ModelPrice(1.0, 2.0), "smollm2": ModelPrice(1.0, 2.0)})


@pytest.fixture(scope="module")
def hotpotqa() -> Any:
    return load_dataset("hotpotqa", limit=2)


def _madara(item: Any, model: Any, retriever: Any, method: str, **assess: Any) -> Any:
    config = RunConfig(
        retrieval=retriever.config,
        assess=AssessConfig(
            **{"method": method, "doc_source": "retrieval", "n_docs": 5, "json_schema": False, **assess}
        ),
    )
    return asyncio.run(run_madara(item, model, retriever, config))


@pytest.mark.parametrize("method", ["nf", "pde"])
def test_reranker_calls_of_a_madara_item_are_on_its_record(hotpotqa: Any, minilm_embedder: Any, method: str) -> None:
    mock = MockModel("gold")
    mock.register_items(hotpotqa)
    model = RecordingModel(mock)
    retrieval = RetrievalConfig(mode="hybrid_rerank", candidates=12, reranker="llm")
    retriever = build_retriever(
        hotpotqa.documents, retrieval, model=model, embedder=minilm_embedder, cache_dir=False, progress=False
    )
    record = _madara(hotpotqa.items[0], model, retriever, method)
    assert record.error is None
    # the record's totals are what the model received and reported, re-ranking included
    assert record.llm_calls == model.calls
    assert (record.tokens_in, record.tokens_out) == (model.prompt_tokens, model.completion_tokens)
    rerank = [s for s in record.steps if s["kind"] == "rerank"]
    assert len(rerank) == 1 and rerank[0]["calls"] == 12 == record.extra["rerank_calls"]  # one per candidate
    others = record.extra["assessment_calls"] + record.extra["generation_calls"]
    assert record.llm_calls == 12 + others
    # so is its cost: a cost comparison (Appendix K) sees the re-ranking tokens
    priced = reprice_record(record, SHEET)
    assert priced.cost_usd == pytest.approx((model.prompt_tokens + 2 * model.completion_tokens) / 1e6)


def test_without_a_reranker_a_record_has_no_rerank_step(hotpotqa: Any) -> None:
    mock = MockModel("gold")
    mock.register_items(hotpotqa)
    model = RecordingModel(mock)
    retriever = build_retriever(hotpotqa.documents, RetrievalConfig(mode="bm25"), cache_dir=False, progress=False)
    record = _madara(hotpotqa.items[0], model, retriever, "nf")
    assert record.llm_calls == model.calls == 1
    assert record.extra["rerank_calls"] == 0 and not [s for s in record.steps if s["kind"] == "rerank"]


# --------------------------------------------------------------------------- the routed case


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    """Registrations undone after the test (the backend and grid registries are shared)."""
    with ExitStack() as exits:
        yield exits


def test_the_routed_case_writes_rsc_with_every_probe_call_and_its_cost(
    tmp_path: Path, monkeypatch: Any, stack: ExitStack
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    models = stack.enter_context(recording_backend("ledgerrec"))
    grids = GRIDS.snapshot()
    stack.callback(GRIDS.restore, grids)
    assess = AssessConfig(method="madara", doc_source="item", calibration_n=3, rsc_bootstrap=20, json_schema=False)
    register_grid(
        Grid("routed_ledger", (GridEntry("madara", RunConfig(assess=assess)),), datasets=("conflictqa",), limit=2)
    )
    prices = tmp_path / "prices.toml"
    prices.write_text(
        "[sheets.t]\n[sheets.t.models]\nledgerrec = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n", encoding="utf-8"
    )
    out = tmp_path / "run"
    res = bcas.evaluate(grids="routed_ledger", models="ledgerrec:gold", out=out, no_cache=True, prices=str(prices))
    assert len(models) == 1
    model = models[0]
    records = res.records
    assert len(records) == 2
    on_records = sum(int(r["llm_calls"]) for r in records)
    assert on_records < model.calls  # the probe's calls are not on the items' records ...

    profiles = list((out / "rsc").glob("*.json"))
    assert len(profiles) == 1
    profile = json.loads(profiles[0].read_text(encoding="utf-8"))
    cost = profile["cost"]
    # ... they are in rsc/: with the records, every call the model received
    assert profile["routed"] is True and len(profile["item_ids"]) == 3
    assert cost["calls"] + on_records == model.calls
    assert cost["tokens_in"] + sum(int(r["tokens_in"]) for r in records) == model.prompt_tokens
    assert cost["tokens_out"] + sum(int(r["tokens_out"]) for r in records) == model.completion_tokens
    assert cost["cost_usd"] == pytest.approx((cost["tokens_in"] + 2 * cost["tokens_out"]) / 1e6)
    phases = cost["by_phase"]
    assert phases["evalnf"]["calls"] == 3 and phases["probe"]["calls"] > 0 and phases["retrieve"]["calls"] == 0
    assert sum(p["calls"] for p in phases.values()) == cost["calls"]

    stem = profiles[0].name[: -len(".json")]
    calls = (out / "rsc" / f"{stem}.calls.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(calls) == cost["calls"]
    evalnf = [json.loads(x) for x in (out / "rsc" / f"{stem}.evalnf.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [e["item_id"] for e in evalnf] == profile["item_ids"]
    assert sum(e["correct"] for e in evalnf) / 3 == pytest.approx(profile["em_nf"])
    triples = (out / "rsc" / f"{stem}.probe.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(triples) == profile["n_triples"] > 0

    # the summary shows the routing cost beside the routed accuracy
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (routing,) = summary["routing"]
    assert routing["routing_calls"] == cost["calls"] and routing["routing_cost_usd"] == cost["cost_usd"]
    assert routing["n"] == 2
    assert routing["accuracy"] == pytest.approx(sum(bool(r["correct_em"]) for r in records) / 2)
    final = finalize_run(res.settings, None)  # the terminal summary's lines, as at the end of a session
    assert final is not None
    line = next(x for x in final.table_lines if x.startswith("routed "))
    assert f"routing cost {cost['calls']} calls, {cost['tokens_in']} tokens in" in line
    assert f"accuracy {routing['accuracy'] * 100:.1f}% on 2 items" in line


def test_the_probe_ledgers_the_rerankers_calls_for_its_calibration_documents(
    hotpotqa: Any, minilm_embedder: Any
) -> None:
    from bcas.assess.rsc import probe_run

    mock = MockModel("gold")
    mock.register_items(hotpotqa)
    model = RecordingModel(mock)
    retrieval = RetrievalConfig(mode="hybrid_rerank", candidates=6, reranker="llm")
    retriever = build_retriever(
        hotpotqa.documents, retrieval, model=model, embedder=minilm_embedder, cache_dir=False, progress=False
    )
    assess = AssessConfig(doc_source="retrieval", n_docs=3, calibration_n=2, rsc_bootstrap=10, json_schema=False)
    run = asyncio.run(probe_run(model, hotpotqa.items, retriever, RunConfig(retrieval=retrieval, assess=assess)))
    assert len(run.entries) == model.calls == run.profile.usage["llm_calls"]
    phases = run.usage_by_phase()
    assert phases["retrieve"].llm_calls == 2 * 6 and phases["evalnf"].llm_calls == 2
    assert sum(u.tokens_in for u in phases.values()) == model.prompt_tokens


@pytest.mark.proof_stage  # the embedded model as reranker and reader, a minute: CI's required proof stage
def test_reranker_calls_on_the_embedded_model_are_on_the_madara_record(
    hotpotqa: Any, minilm_embedder: Any, embedded_model: Any
) -> None:
    """The real ``llm`` reranker (log P(Yes) - log P(No) on SmolLM2-135M) and the real generator."""
    model = RecordingModel(embedded_model)
    retrieval = RetrievalConfig(mode="hybrid_rerank", candidates=5, reranker="llm")
    retriever = build_retriever(
        hotpotqa.documents, retrieval, model=model, embedder=minilm_embedder, cache_dir=False, progress=False
    )
    record = _madara(hotpotqa.items[0], model, retriever, "nf", answer_max_tokens=16)
    assert record.error is None, record.error
    assert (record.extra["rerank_calls"], record.extra["generation_calls"]) == (5, 1), record.steps
    assert record.llm_calls == model.calls == 6
    assert (record.tokens_in, record.tokens_out) == (model.prompt_tokens, model.completion_tokens)
    (rerank,) = [s for s in record.steps if s["kind"] == "rerank"]
    assert rerank["tokens_in"] > 5 * 20 and rerank["tokens_out"] == 5  # five real prompts, one token each


@pytest.mark.slow  # the RSC probe on two calibration items and one routed answer on SmolLM2: minutes on 2 cores
def test_the_routed_case_on_the_embedded_model_accounts_for_every_call_in_rsc(
    tmp_path: Path, monkeypatch: Any, stack: ExitStack
) -> None:
    """The same ledger on a real model: the records and rsc/ sum to what llama.cpp received."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    models = stack.enter_context(recording_backend("recembedded", inner="embedded"))
    grids = GRIDS.snapshot()
    stack.callback(GRIDS.restore, grids)
    # small generation allowances keep the CPU cost down (tests/assess/test_real_assess.py's FAST)
    assess = AssessConfig(
        method="madara", doc_source="item", calibration_n=2, rsc_bootstrap=50, rsc_agents=("relevance",),
        score_max_tokens=12, max_tokens=160, cot_step_chars=60, rescore_max_tokens=12, answer_max_tokens=24,
    )  # fmt: skip
    register_grid(
        Grid("routed_embedded", (GridEntry("madara", RunConfig(assess=assess)),), datasets=("fever",), limit=1)
    )
    out = tmp_path / "run"
    res = bcas.evaluate(grids="routed_embedded", models="recembedded", out=out, no_cache=True)
    assert len(models) == 1
    model = models[0]
    (record,) = res.records
    assert record["model"] == "smollm2-135m" and not record.get("error")
    (profile_path,) = (out / "rsc").glob("*.json")
    profile = json.loads(profile_path.read_text(encoding="utf-8"))
    cost = profile["cost"]
    assert profile["routed"] is True and len(profile["item_ids"]) == 2
    assert cost["calls"] > 0 and cost["by_phase"]["evalnf"]["calls"] == 2
    assert cost["calls"] + int(record["llm_calls"]) == model.calls
    assert cost["tokens_in"] + int(record["tokens_in"]) == model.prompt_tokens
    assert cost["tokens_out"] + int(record["tokens_out"]) == model.completion_tokens
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (routing,) = summary["routing"]  # the routing cost beside the routed accuracy
    assert routing["routing_calls"] == cost["calls"] and routing["n"] == 1
    assert routing["accuracy"] == float(bool(record["correct_em"]))
    print(
        f"\nrouted on SmolLM2: {model.calls} calls ({cost['calls']} in rsc/, {record['llm_calls']} on the record), "
        f"{model.prompt_tokens} prompt / {model.completion_tokens} completion tokens; route {routing['mode']}"
    )
