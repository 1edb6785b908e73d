"""MADARA on the real embedded model (SmolLM2-135M) and a real BM25 index.

The default run covers every treatment on one FEVER item (one document, so a
handful of real calls; a per-session generation cache lets treatments share
identical agent calls, while the ledger still counts every call), a two-item
RSC probe, the retrieval document source and ``assess_hits``, and the
MADARA table at default size: the slow grid's code on its first ConflictQA item
(four documents).  ``--runslow`` adds the 5 ConflictQA + 5 FEVER grid and a
10-item RSC probe per dataset, and prints their figures (noisy with a 135M model).
The routed mode is checked against Algorithm 2 read from the paper's text
(tests/support/algorithm2.py), never against the router itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from scipy.stats import spearmanr
from support.algorithm2 import paper_route

from bcas.assess import assess_hits, probe, run_madara
from bcas.assess.agents import AssessDocument
from bcas.assess.documents import DOC_ORDER, order_documents
from bcas.assess.router import MODES
from bcas.config import AssessConfig, RetrievalConfig, RunConfig
from bcas.data import load_dataset
from bcas.grading import normalize_answer, score_prediction

# Small generation allowances keep the CPU cost down; the schema-constrained
# replies ({"score": n}, {"answer": label}) fit in them.
FAST = dict(
    doc_source="item",
    score_max_tokens=12,
    max_tokens=160,
    cot_step_chars=60,
    rescore_max_tokens=12,
    answer_max_tokens=24,
    rsc_bootstrap=200,
)

METHODS = ("nf", "3-agent", "cot", "sda", "rrf", "atf", "pde", "pde-random")
TREATMENT = {"PDE": "pde", "SDA": "sda", "CoT": "cot", "ATF": "atf"}


def check_profile(prof: Any, n_queries: int) -> None:
    """An RSC profile against independent values: scipy's Spearman for rho*, Algorithm 2's
    text for the route.  Catches a trend coefficient off the pooled rhos (or with its sign
    flipped) and a routing decision that disagrees with the paper."""
    assert prof.n_queries == n_queries
    assert prof.bootstrap["n_resamples"] == FAST["rsc_bootstrap"]
    assert all(-1.0 <= r <= 1.0 for r in prof.rho_hat)
    if len(set(prof.rho_hat)) == 3:  # without ties rho* is Spearman's rho of (1, 2, 3) and rho_hat
        assert prof.rho_star == pytest.approx(spearmanr([1, 2, 3], list(prof.rho_hat)).statistic)
    else:  # ties: one of the five trend values (test_assess_rsc pins the tie rule)
        assert prof.rho_star in (-1.0, -0.5, 0.0, 0.5, 1.0)
    decision = prof.decision()
    assert decision.mode == paper_route(prof.em_nf, prof.rho_star, prof.rho_1)
    assert (decision.em_nf, decision.rho_star, decision.rho_1) == (prof.em_nf, prof.rho_star, prof.rho_1)


@pytest.fixture(scope="module")
def model(smollm2_gguf: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Embedded SmolLM2 on one thread behind a fresh generation cache for this module.

    One llama.cpp thread: these tests issue many short calls, and on a shared
    2-core machine a single thread is several times faster per call than two
    threads contending with other work.
    """
    from bcas.llm.cache import CachedModel, GenerationCache
    from bcas.llm.embedded import EmbeddedModel

    embedded = EmbeddedModel(smollm2_gguf, n_ctx=2048, n_threads=1)
    cache = GenerationCache(tmp_path_factory.mktemp("madara-cache") / "generations.sqlite")
    yield CachedModel(embedded, cache)
    cache.close()
    embedded.close()


def cfg(method: str, **kw: Any) -> RunConfig:
    return RunConfig(assess=AssessConfig(method=method, **{**FAST, **kw}))


def expected_calls(method: str, m: int, k: int) -> tuple[int, int]:
    """(assessment, generation) calls each method must make for m documents and top-k."""
    top = min(k, m)
    return {
        "nf": (0, 1),
        "3-agent": (3 * m, 1),
        "cot": (3 * m, 1),
        "sda": (3 * m, 1),
        "rrf": (3 * m, 1),
        "atf": (3 * m, 1),
        "pde": (3 * m, top),
        "pde-random": (0, top),
    }[method]


def check_record(rec: Any, item: Any, ds: Any, treatment: str, k: int = 5) -> None:
    m = len(item.documents)
    n_assess, n_gen = expected_calls(treatment, m, k)
    ex = rec.extra
    assert rec.item_id == item.id and rec.dataset == ds.name and rec.dataset_hash == ds.hash
    assert rec.method == "madara" and ex["treatment"] == treatment
    assert (ex["assessment_calls"], ex["generation_calls"]) == (n_assess, n_gen)
    assert rec.llm_calls == n_assess + n_gen
    assert rec.tokens_in > 0 and rec.tokens_out > 0
    assert rec.stop_reason == "answered" and rec.error is None
    # the item's own documents in the seeded order (never the file's layout: bcas.assess.documents)
    own = [AssessDocument(d.id, d.title, d.text) for d in item.documents]
    seeded = [d.doc_id for d in order_documents(own, f"{RunConfig().seed}:{item.id}")]
    assert sorted(seeded) == sorted(d.id for d in item.documents)
    assert ex["doc_source"] == "item" and ex["doc_ids"] == seeded and ex["doc_order"] == DOC_ORDER
    correct, f1 = score_prediction(rec.prediction, item.answers, ds.scoring)
    assert (rec.correct_em, rec.f1) == (correct, f1)
    if ds.scoring == "label":
        # constrained decoding: the generator can only emit a label of the task
        assert rec.prediction in ({"SUPPORTS", "REFUTES"} if ds.name == "fever" else {"yes", "no"})
    if n_assess:
        S = ex["scores"]
        assert len(S) == m and all(len(row) == 3 for row in S)
        for row in S:
            assert all(v is None or 0 <= v <= 5 for v in row)
        missing = {(x["doc_index"], x["agent"]) for x in ex["missing_scores"]}
        assert missing == {
            (i, a) for i, row in enumerate(S) for a, v in zip(ex["agents"], row, strict=True) if v is None
        }
        assert all(x["reason"] for x in ex["missing_scores"])
        assert 1 <= len(ex["selected_docs"]) <= min(5, m)
    else:
        assert ex["scores"] is None
    if treatment in ("pde", "pde-random"):
        assert len(ex["candidates"]) == n_gen


@pytest.fixture(scope="module")
def fever1() -> Any:
    return load_dataset("fever", limit=1)


# CoT's per-document reasoning is the longest generation of the set (12 s): CI's required proof stage runs it
@pytest.mark.parametrize(
    "method", [pytest.param(m, marks=pytest.mark.proof_stage) if m == "cot" else m for m in METHODS]
)
def test_each_treatment_on_a_real_fever_item(model: Any, fever1: Any, method: str) -> None:
    item = fever1.items[0]
    rec = asyncio.run(run_madara(item, model, None, cfg(method), dataset=fever1))
    check_record(rec, item, fever1, method)
    if method == "cot":
        chains = rec.extra["reasoning"][0]
        assert set(chains) == {"relevance", "consistency", "conflict"}


@pytest.mark.proof_stage  # a real two-item probe and a routed answer, a minute of generation: CI's required proof stage
def test_real_probe_and_routed_madara(model: Any, fever1: Any) -> None:
    calib = load_dataset("fever", limit=3)
    config = cfg("madara", rsc_agents=("relevance",))
    prof = asyncio.run(probe(model, calib.items[:2], None, config))
    check_profile(prof, 2)
    assert prof.n_triples == 2
    assert prof.usage["assessment_calls"] == 2 and prof.usage["generation_calls"] == 2
    # levels 1 and 2 for each parsed chain; level 3 borrows the other query's chain, if parsed
    chains = 2 - prof.missing["normal"]
    assert prof.usage["rescore_calls"] == 2 * chains + (chains if chains == 2 else 0)
    assert prof.rho_star in (-1.0, -0.5, 0.0, 0.5, 1.0)
    assert all(-1.0 <= r <= 1.0 for r in prof.rho_hat)
    assert prof.em_nf in (0.0, 0.5, 1.0)
    decision = prof.decision()
    assert decision.mode in MODES and decision.profile_id == prof.id
    item = fever1.items[0]
    rec = asyncio.run(run_madara(item, model, None, config, dataset=fever1, profile=prof))
    treatment = TREATMENT[decision.mode]
    check_record(rec, item, fever1, treatment)
    assert rec.extra["routing"]["mode"] == decision.mode and rec.extra["rsc_profile_id"] == prof.id


@pytest.fixture(scope="module")
def fever_bm25(fever1: Any) -> Any:
    from bcas.retrieval import build_retriever

    full = load_dataset("fever")
    return build_retriever(full.documents, RetrievalConfig(mode="bm25", k=5))


@pytest.mark.proof_stage  # real agents on retrieved documents, most of a minute: CI's required proof stage
def test_retrieval_source_and_assess_hits_with_a_real_index(model: Any, fever1: Any, fever_bm25: Any) -> None:
    item = fever1.items[0]
    config = cfg("sda", doc_source="retrieval", n_docs=2)
    rec = asyncio.run(run_madara(item, model, fever_bm25, config, dataset=fever1))
    hits = fever_bm25.search(item.question, k=2)
    ex = rec.extra
    assert ex["doc_source"] == "retrieval" and rec.searches_used == 1
    assert ex["doc_ids"] == [h.doc_id for h in hits] and ex["chunk_ids"] == [h.chunk_id for h in hits]
    assert (ex["assessment_calls"], ex["generation_calls"]) == (6, 1)
    assert len(ex["scores"]) == 2 and len(ex["selected_docs"]) == 2

    # The agent-side hook on the same hits: the same six agent calls (ledgered again,
    # answered by the generation cache), then the treatment.
    assess_cfg = config.assess
    kept, usage = asyncio.run(assess_hits(item.question, hits, model, "atf", 2, config=assess_cfg))
    assert usage["assessment_calls"] == 6 and usage["generation_calls"] == 0
    assert usage["tokens_in"] > 0 and usage["tokens_out"] > 0
    assert usage["scores"] == ex["scores"]
    assert len(kept) == 2 and {h.chunk_id for h in kept} == {h.chunk_id for h in hits}
    kept, usage = asyncio.run(assess_hits(item.question, hits, model, "pde", 1, config=assess_cfg))
    assert usage["generation_calls"] == 1 and len(kept) == 1
    (candidate,) = usage["candidates"]
    assert candidate["doc_id"] == kept[0].doc_id
    assert usage["answer"] == (candidate["answer"].strip() if normalize_answer(candidate["answer"]) else "")


# ----------------------------------------------------------------------------- slow grid


@pytest.fixture(scope="module")
def grid_datasets() -> dict[str, tuple[Any, Any, Any]]:
    """Per dataset: (5 test items, 10 separate calibration items)."""
    out = {}
    for name in ("conflictqa", "fever"):
        ds = load_dataset(name, limit=15, seed=7)
        out[name] = (ds, ds.items[:5], ds.items[5:15])
    return out


@pytest.fixture(scope="module")
def grid_profiles(model: Any, grid_datasets: dict[str, Any]) -> dict[str, Any]:
    profiles = {}
    for name, (_, _, calib) in grid_datasets.items():
        prof = asyncio.run(probe(model, calib, None, cfg("madara", rsc_agents=("relevance",))))
        profiles[name] = prof
        print(
            f"\nRSC {name}: n={prof.n_queries} triples={prof.n_triples} rho_hat={tuple(round(r, 3) for r in prof.rho_hat)} "
            f"rho*={prof.rho_star} rho_bar={prof.rho_bar:.3f} {prof.classification}/{prof.state} "
            f"EM_NF={prof.em_nf:.2f} extreme={prof.extreme_fraction} missing={prof.missing} "
            f"boot={prof.bootstrap.get('rho_hat_ci')} stab={prof.bootstrap.get('classification_stability')} "
            f"calls={prof.usage['llm_calls']} -> {prof.decision().mode}: {prof.decision().reason}"
        )
    return profiles


@pytest.mark.slow
def test_rsc_probe_on_ten_calibration_items(grid_profiles: dict[str, Any]) -> None:
    for prof in grid_profiles.values():
        check_profile(prof, 10)
        assert prof.decision().mode in MODES


def grid_rows(model: Any, ds: Any, items: Any, prof: Any | None, methods: tuple[str, ...]) -> list[str]:
    """The MADARA table rows of docs/measured.md: each method on ``items``, every record checked.

    ``madara`` (needs ``prof``) must apply the treatment Algorithm 2's text assigns to
    the profile's diagnostics.
    """
    lines = []
    for method in methods:
        correct = calls = assess = gen = t_in = t_out = 0
        for item in items:
            rec = asyncio.run(run_madara(item, model, None, cfg(method), dataset=ds, profile=prof))
            treatment = rec.extra["treatment"]
            if method == "madara":
                assert treatment == TREATMENT[paper_route(prof.em_nf, prof.rho_star, prof.rho_1)]
            else:
                assert treatment == method
            check_record(rec, item, ds, treatment)
            correct += rec.correct_em
            calls += rec.llm_calls
            assess += rec.extra["assessment_calls"]
            gen += rec.extra["generation_calls"]
            t_in += rec.tokens_in
            t_out += rec.tokens_out
        lines.append(
            f"{ds.name:<11}{method:<11}EM {correct}/{len(items)}  calls {calls:>3} (assess {assess:>3}, gen {gen:>2})  "
            f"tokens in {t_in:>6} out {t_out:>5}"
        )
    print("\n" + "\n".join(lines))
    return lines


@pytest.mark.proof_stage  # every treatment on four documents, over a minute of generation: CI's required proof stage
def test_grid_on_one_conflictqa_item(model: Any, grid_datasets: dict[str, Any]) -> None:
    """The MADARA table's code at default size: the slow grid's first ConflictQA item, cut
    to its first two documents (m = 2 keeps 3m + 1, 3m + k and k apart, at a third of
    the calls of its four), every method but CoT (3-Agent's calls with 160-token
    reasoning: it runs on FEVER above and in the slow grid).  The routed row runs with
    the probe in test_real_probe_and_routed_madara."""
    ds, items, _ = grid_datasets["conflictqa"]
    assert len(items[0].documents) > 2, "the first grid item should have several documents"
    item = dataclasses.replace(items[0], documents=items[0].documents[:2])
    methods = tuple(m for m in METHODS if m != "cot")
    assert len(grid_rows(model, ds, [item], None, methods)) == len(methods)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["conflictqa", "fever"])
def test_grid_five_items_every_method(
    model: Any, grid_datasets: dict[str, Any], grid_profiles: dict[str, Any], dataset: str
) -> None:
    ds, items, _ = grid_datasets[dataset]
    grid_rows(model, ds, items, grid_profiles[dataset], (*METHODS, "madara"))
