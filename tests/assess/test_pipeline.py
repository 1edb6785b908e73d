"""MADARA treatments, routing and call ledger — control flow with a scripted model.

The scripted model stands in for an LLM only to make the control flow
checkable (which calls, how many, which documents reach the generator); the
same paths run against the real embedded model in test_assess_real.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from bcas.assess import TREATMENTS, assess_hits, run_madara
from bcas.assess.documents import AssessError, gather_documents
from bcas.assess.pde import random_subset, vote
from bcas.assess.router import decide
from bcas.assess.rsc import probe
from bcas.config import AssessConfig, RunConfig
from bcas.data import Document, Item
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ModelError
from bcas.retrieval.chunking import Chunk


class ScriptedModel(ChatModel):
    """Agents score 5 for a document holding 'GOLD', else 1; generators read only the first document.

    Reading only the first document mimics a model confused by multi-document
    context: No-Filter fails when a distractor comes first, and selection or
    isolation fixes it.
    """

    model_id = "scripted"

    def __init__(self, fail_generation: bool = False) -> None:
        self.requests: list[ChatRequest] = []
        self.fail_generation = fail_generation

    async def chat(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        await asyncio.sleep(0)
        system, user = request.messages[0]["content"], request.messages[1]["content"]
        if "assessment team" in system:
            own = user.split("OTHER DOCUMENTS")[0].split("REASONING:")[0]
            score = 5 if "GOLD" in own else 1
            if "REASONING:" in user:
                text = json.dumps({"score": score if "irrelevant" not in user else 5 - score})
            elif "reasoning_steps" in system:
                steps = [f"Step {i}: the document is relevant. It has a score of {score}." for i in range(1, 6)]
                text = json.dumps({"reasoning_steps": steps, "score": score, "confidence": 4})
            else:
                text = json.dumps({"score": score, "reason": "scripted"})
            return ChatResult(text, 100, 10, "stop", 0.0)
        if self.fail_generation:
            raise ModelError("generator down")
        first = re.search(r"\[1\] (.*)", user)
        text = "Paris" if first and "GOLD" in first.group(1) else "London"
        return ChatResult(text, 200, 3, "stop", 0.0)

    def count(self, kind: str) -> int:
        if kind == "assessment":
            return sum(
                "assessment team" in r.messages[0]["content"] and "REASONING:" not in r.messages[1]["content"]
                for r in self.requests
            )
        if kind == "rescore":
            return sum("REASONING:" in r.messages[1]["content"] for r in self.requests)
        return sum("assessment team" not in r.messages[0]["content"] for r in self.requests)


def make_item(i: int = 0, gold_at: int = 1, m: int = 4) -> Item:
    docs = tuple(
        Document(
            f"it{i}::{j}", f"t{j}", "GOLD: Paris is the capital of France." if j == gold_at else f"London fact {j}."
        )
        for j in range(m)
    )
    return Item(f"it{i}", "What is the capital of France?", ("Paris",), docs, (f"it{i}::{gold_at}",))


def seeded(item: Item) -> list[str]:
    """The ids of ``item``'s documents in the order MADARA gathers them (no scores: the seeded shuffle)."""
    docs = asyncio.run(gather_documents(item, None, AssessConfig(doc_source="item"), RunConfig().seed))
    return [d.doc_id for d in docs]


def gold_not_first() -> int:
    """A gold position whose document the seeded order does not put first (No-Filter's [1])."""
    return next(j for j in range(4) if seeded(make_item(gold_at=j))[0] != f"it0::{j}")


def field(record: Any, name: str) -> Any:
    return record[name] if isinstance(record, dict) else getattr(record, name)


def extra(record: Any) -> dict[str, Any]:
    return field(record, "extra")


def run(item: Item, model: ChatModel, method: str, retriever: Any = None, **kw: Any) -> Any:
    cfg = RunConfig(
        assess=AssessConfig(method=method, doc_source=kw.pop("doc_source", "item"), k=2, **kw.pop("cfg", {}))
    )
    return asyncio.run(run_madara(item, model, retriever, cfg, **kw))


EXPECTED_CALLS = {  # (assessment, generation) with m = 4 documents, k = 2
    "nf": (0, 1),
    "3-agent": (12, 1),
    "cot": (12, 1),
    "sda": (12, 1),
    "sda-cot": (12, 1),
    "rrf": (12, 1),
    "atf": (12, 1),
    "pde": (12, 2),
    "pde-unif": (12, 2),
    "pde-random": (0, 2),
}


def test_every_method_is_registered():
    assert set(TREATMENTS) == set(EXPECTED_CALLS)


@pytest.mark.parametrize("method", sorted(EXPECTED_CALLS))
def test_each_method_produces_a_record_with_its_call_counts(method):
    model = ScriptedModel()
    rec = run(make_item(), model, method)
    n_assess, n_gen = EXPECTED_CALLS[method]
    ex = extra(rec)
    assert (ex["assessment_calls"], ex["generation_calls"]) == (n_assess, n_gen)
    assert (model.count("assessment"), model.count("generation")) == (n_assess, n_gen)
    assert field(rec, "llm_calls") == n_assess + n_gen
    assert field(rec, "tokens_in") == 100 * n_assess + 200 * n_gen
    assert field(rec, "tokens_out") == 10 * n_assess + 3 * n_gen
    assert ex["treatment"] == ex["assess_method"] == method and field(rec, "method") == "madara"
    order = seeded(make_item())
    assert ex["doc_source"] == "item" and ex["doc_ids"] == order and sorted(order) == [f"it0::{j}" for j in range(4)]
    if n_assess:
        S = ex["scores"]
        assert len(S) == 4 and all(len(row) == 3 for row in S)
        gold = order.index("it0::1")
        assert S[gold] == [5.0, 5.0, 5.0] and S[(gold + 1) % 4] == [1.0, 1.0, 1.0]
    else:
        assert ex["scores"] is None
    assert field(rec, "stop_reason") == "answered"
    assert field(rec, "config_id") == RunConfig(assess=AssessConfig(method=method, doc_source="item", k=2)).config_id


@pytest.mark.parametrize("method", ["3-agent", "cot", "sda", "sda-cot", "rrf", "atf", "pde", "pde-unif"])
def test_assessment_puts_the_gold_document_first_and_fixes_the_confused_generator(method):
    rec = run(make_item(gold_at=2), ScriptedModel(), method)
    assert extra(rec)["selected_docs"][0] == "it0::2"
    assert field(rec, "prediction") == "Paris" and field(rec, "correct_em") is True


def test_nf_sends_every_gathered_document_and_is_confused():
    """MADARA §5.3 (1): "NF: all documents to generator (standard RAG)", not the top k."""
    model = ScriptedModel()
    item = make_item(gold_at=gold_not_first())
    rec = run(item, model, "nf")
    everything = seeded(item)  # the gathered order (its seeding is tested in test_answer_blind.py)
    assert sorted(everything) == [f"it0::{j}" for j in range(4)]  # every document of the item, once
    assert extra(rec)["selected_docs"] == everything  # all 4 documents (k = 2 is the treatments' cut)
    assert extra(rec)["context_doc_ids"] == everything
    assert field(rec, "prediction") == "London" and field(rec, "correct_em") is False
    assert field(rec, "f1") == 0.0
    generation = model.requests[-1].messages[1]["content"]
    assert all(f"[{j}]" in generation for j in range(1, 5))


def test_nf_docs_caps_what_no_filter_reads():
    item = make_item(gold_at=2)
    rec = run(item, ScriptedModel(), "nf", cfg={"nf_docs": 2})
    assert extra(rec)["context_doc_ids"] == seeded(item)[:2]
    assert field(rec, "config")["assess"]["nf_docs"] == 2


def test_cot_record_keeps_reasoning_chains():
    rec = run(make_item(), ScriptedModel(), "cot")
    reasoning = extra(rec)["reasoning"]
    assert len(reasoning) == 4 and set(reasoning[0]) == {"relevance", "consistency", "conflict"}
    assert len(reasoning[0]["relevance"]) == 5


def test_pde_votes_with_document_scores_and_records_candidates():
    rec = run(make_item(gold_at=3), ScriptedModel(), "pde")
    ex = extra(rec)
    assert [c["answer"] for c in ex["candidates"]] == ["Paris", "London"]
    assert [c["weight"] for c in ex["candidates"]] == [5.0, 1.0]
    assert field(rec, "prediction") == "Paris"
    gold = seeded(make_item(gold_at=3)).index("it0::3")  # members: positions in the gathered order
    assert ex["vote_groups"][0] == {"answer": "Paris", "weight": 5.0, "members": [gold]}
    first_other = next(d for d in seeded(make_item(gold_at=3)) if d != "it0::3")
    assert ex["context_doc_ids"] == ["it0::3", first_other]  # the union of the single-document calls


def test_pde_unif_selects_like_pde_and_votes_uniformly():
    rec = run(make_item(gold_at=3), ScriptedModel(), "pde-unif")
    ex = extra(rec)
    assert ex["selected_docs"] == ["it0::3", "it0::0"]
    assert [c["weight"] for c in ex["candidates"]] == [None, None]
    assert ex["vote_groups"][0]["weight"] == 1.0  # one vote each: the tie goes to the best-ranked document
    assert field(rec, "prediction") == "Paris"


def test_sda_cot_uses_cot_scores_and_sda_selection():
    rec = run(make_item(gold_at=2), ScriptedModel(), "sda-cot")
    ex = extra(rec)
    assert ex["reasoning"] is not None and len(ex["reasoning"]) == 4
    assert ex["selected_docs"][0] == "it0::2" and ex["context_doc_ids"] == ex["selected_docs"]


def test_pde_random_is_seeded_and_uses_no_assessment():
    item = make_item(m=6)
    a = extra(run(item, ScriptedModel(), "pde-random"))
    b = extra(run(item, ScriptedModel(), "pde-random"))
    assert a["selected_indices"] == b["selected_indices"]
    assert a["selected_indices"] == random_subset(6, 2, "0:it0")
    assert a["assessment_calls"] == 0 and len(a["candidates"]) == 2


def test_vote_rules():
    assert vote(["Paris", "paris.", "London"], [1, 1, 1.5])[0] == "Paris"  # grouped: 2 > 1.5
    assert vote(["London", "Paris"], [2, 2])[0] == "London"  # tie: first candidate's group
    assert vote(["", "  ", "Rome"])[0] == "Rome"  # empty candidates cast no vote
    assert vote(["", "the"])[0] == ""
    with pytest.raises(ValueError):
        vote(["a"], [1, 2])


@dataclass
class FakeHit:
    doc_id: str
    chunk_id: str
    title: str
    text: str
    score: float


class ListRetriever:
    def __init__(self, docs: list[Document]) -> None:
        self.docs = docs
        self.calls: list[tuple[str, int | None]] = []

    def search(self, query: str, k: int | None = None, exclude_ids: tuple[str, ...] = ()) -> list[FakeHit]:
        self.calls.append((query, k))
        return [FakeHit(d.id, f"{d.id}#0", d.title, d.text, 10.0 - i) for i, d in enumerate(self.docs[: k or 5])]


def test_retrieval_doc_source_takes_top_n_docs_from_the_retriever():
    pool = [Document(f"c{j}", "t", "GOLD: Paris." if j == 7 else f"London {j}.") for j in range(12)]
    retriever = ListRetriever(pool)
    model = ScriptedModel()
    rec = run(make_item(), model, "sda", retriever=retriever, doc_source="retrieval")
    assert retriever.calls == [("What is the capital of France?", 10)]
    ex = extra(rec)
    assert ex["doc_source"] == "retrieval" and len(ex["doc_ids"]) == 10 and ex["chunk_ids"][0] == "c0#0"
    assert ex["assessment_calls"] == 30 and field(rec, "searches_used") == 1
    assert ex["selected_docs"][0] == "c7"
    with pytest.raises(AssessError, match="needs a retriever"):
        run(make_item(), model, "nf", doc_source="retrieval")


class ShortRetriever(ListRetriever):
    """Finds only the documents holding 'Paris' (as BM25 finds only those sharing a query term)."""

    def __init__(self, docs: list[Document]) -> None:
        super().__init__(docs)
        self.chunks = [Chunk(f"{d.id}#0", d.id, d.title, d.text) for d in docs]

    def search(self, query: str, k: int | None = None, exclude_ids: tuple[str, ...] = ()) -> list[FakeHit]:
        self.calls.append((query, k))
        return [FakeHit(d.id, f"{d.id}#0", d.title, d.text, 1.0) for d in self.docs if "Paris" in d.text][: k or 5]


def test_pad_docs_fills_a_short_retrieval_from_the_collection_in_a_seeded_order():
    pool = [Document(f"c{j}", "t", "GOLD: Paris." if j in (3, 7) else f"London {j}.") for j in range(30)]
    recs = [
        run(make_item(), ScriptedModel(), "nf", retriever=ShortRetriever(pool), doc_source="retrieval", cfg=cfg)
        for cfg in ({}, {"pad_docs": True}, {"pad_docs": True})
    ]
    short, padded, again = (extra(r) for r in recs)
    assert short["doc_ids"] == ["c3", "c7"] and short["retrieved_docs"] == 2
    assert padded["doc_ids"][:2] == ["c3", "c7"] and len(set(padded["doc_ids"])) == 10
    assert padded["retrieved_docs"] == 2 and padded["context_doc_ids"] == padded["doc_ids"]  # NF reads all 10
    assert again["doc_ids"] == padded["doc_ids"]  # same seed and item: the same padding
    other = run(make_item(i=1), ScriptedModel(), "nf", retriever=ShortRetriever(pool), doc_source="retrieval",
                cfg={"pad_docs": True})  # fmt: skip
    assert extra(other)["doc_ids"][2:] != padded["doc_ids"][2:]  # another item, another draw
    with pytest.raises(AssessError, match="pad_docs needs a retriever with a chunk collection"):
        run(make_item(), ScriptedModel(), "nf", retriever=ListRetriever(pool[:1]), doc_source="retrieval",
            cfg={"pad_docs": True})  # fmt: skip


def test_routed_madara_runs_the_decided_treatment_and_records_the_decision():
    model = ScriptedModel()
    for em, rho_star, rho_1, method in [
        (0.1, -1.0, 0.9, "pde"),
        (0.6, -0.5, 0.9, "sda"),
        (0.6, -1.0, 0.2, "cot"),
        (0.6, -1.0, 0.8, "atf"),
    ]:
        decision = decide(em, rho_star, rho_1, profile_id="rsc-test")
        rec = run(make_item(), model, "madara", decision=decision)
        ex = extra(rec)
        assert ex["assess_method"] == "madara" and ex["treatment"] == method
        assert ex["routing"]["mode"] == decision.mode and ex["routing"]["reason"] == decision.reason
        assert ex["rsc_profile_id"] == "rsc-test"
    with pytest.raises(AssessError, match="RSC profile"):
        run(make_item(), model, "madara")


def test_generation_failure_is_recorded_not_raised():
    rec = run(make_item(), ScriptedModel(fail_generation=True), "nf")
    assert field(rec, "prediction") == "" and field(rec, "stop_reason") == "error"
    assert "generator down" in field(rec, "error")
    assert field(rec, "correct_em") is False


def test_assess_hits_for_the_agent_search_tool():
    hits = [FakeHit(f"h{j}", f"h{j}#0", "t", "GOLD: Paris." if j == 2 else f"London {j}.", 1.0) for j in range(5)]
    model = ScriptedModel()
    kept, usage = asyncio.run(assess_hits("capital of France?", hits, model, "none", 3))
    assert kept == hits[:3] and usage["llm_calls"] == 0
    kept, usage = asyncio.run(assess_hits("capital of France?", hits, model, "sda", 3))
    assert kept[0] is hits[2] and len(kept) == 3
    assert usage["assessment_calls"] == 15 and usage["generation_calls"] == 0
    assert usage["tokens_in"] == 1500 and usage["tokens_out"] == 150
    kept, usage = asyncio.run(assess_hits("capital of France?", hits, model, "atf", 4))
    assert kept[0] is hits[2] and 2 <= len(kept) <= 4
    kept, usage = asyncio.run(assess_hits("capital of France?", hits, model, "pde", 2))
    assert kept[0] is hits[2] and usage["answer"] == "Paris"
    assert usage["generation_calls"] == 2 and usage["llm_calls"] == 17
    with pytest.raises(AssessError):
        asyncio.run(assess_hits("q", hits, model, "cot", 2))


def test_probe_with_scripted_model_counts_calls_and_routes():
    items = [make_item(i, gold_at=i % 4) for i in range(6)]
    model = ScriptedModel()
    cfg = RunConfig(assess=AssessConfig(doc_source="item", rsc_agents=("relevance",), rsc_bootstrap=50))
    prof = asyncio.run(probe(model, items, None, cfg))
    # 6 queries x 4 docs x 1 agent CoT calls, 3 re-scores each, 6 NF generations
    assert prof.usage["assessment_calls"] == 24
    assert prof.usage["rescore_calls"] == 72
    assert prof.usage["generation_calls"] == 6
    assert prof.n_triples == 24 and prof.missing["normal"] == 0
    # the scripted re-scorer copies the normal score (level 1), inverts it (level 2: contradicted
    # reasoning says 'irrelevant') and scores level 3 by the document alone
    assert prof.rho_hat == pytest.approx((1.0, -1.0, 1.0))
    assert prof.rho_star == 0.5 and prof.classification == "stochastic"
    first = sum(seeded(item)[0] == f"it{i}::{i % 4}" for i, item in enumerate(items))
    assert prof.em_nf == pytest.approx(first / 6)  # NF is right only when the gold document comes first
    assert prof.id.startswith("rsc-") and prof.item_ids == tuple(i.id for i in items)
    decision = prof.decision()
    assert decision.mode == "SDA" and decision.profile_id == prof.id
    # the routed pipeline accepts the profile directly
    rec = run(items[1], model, "madara", profile=prof)
    assert extra(rec)["treatment"] == "sda" and extra(rec)["rsc_profile_id"] == prof.id


@pytest.mark.parametrize("method", sorted(EXPECTED_CALLS))
def test_no_retrieved_documents_still_gives_a_record(method):
    model = ScriptedModel()
    rec = run(make_item(), model, method, retriever=ListRetriever([]), doc_source="retrieval")
    ex = extra(rec)
    assert ex["doc_ids"] == [] and ex["selected_docs"] == [] and ex["assessment_calls"] == 0
    # generators that answer over a document set still answer (closed book); per-document ones have nothing to read
    assert ex["generation_calls"] == (0 if method.startswith("pde") else 1)
    assert field(rec, "stop_reason") == "answered"


@pytest.mark.parametrize("method", sorted(EXPECTED_CALLS))
def test_each_treatments_declared_call_structure_is_the_calls_it_makes(method):
    """The estimate's structure (``treatment_shape``) against a run: a treatment whose calls change
    without its declared structure fails here (``--bcas-estimate`` reads the structure)."""
    from bcas.assess.pipeline import treatment_shape

    for m in (4, 6):
        model = ScriptedModel()
        rec = run(make_item(m=m), model, method)
        shape = treatment_shape(method, AssessConfig(method=method, doc_source="item", k=2), m)
        assert shape.calls == shape.low == field(rec, "llm_calls") == len(model.requests), (method, m)
        assert shape.searches == field(rec, "searches_used") == 0


def test_the_probes_declared_call_structure_bounds_its_calls():
    from bcas.assess.rsc.probe import probe_shape

    cfg = RunConfig(assess=AssessConfig(method="madara", doc_source="item", k=2, calibration_n=3))
    model = ScriptedModel()
    asyncio.run(probe(model, [make_item(i) for i in range(3)], None, cfg))
    shape = probe_shape(cfg, 4)
    assert shape.low * 3 <= len(model.requests) <= shape.calls * 3
    assert len(model.requests) == shape.calls * 3  # every chain re-scored at its three levels
