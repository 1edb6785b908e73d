"""What a reader of a summary loses when a metric beyond accuracy is computed wrongly.

Per-record outcomes (``bcas.grading.outcomes``), citations by document id (ALCE §2.2,
``AgentConfig.cite``) and the reliability intervals over tries (``bcas.metrics.reliability``),
each checked where a user reads it: a summary's share, a record's citation scores, a
merged run's interval.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from bcas.agent import run_bcas
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.grading.outcomes import outcome_fn
from bcas.llm.base import ChatRequest
from bcas.metrics import metric_columns
from bcas.metrics.trajectory import bcas_trajectory
from bcas.report.paired import accuracy
from bcas.testing.scripted import FakeRetriever, ScriptedModel

PASSAGES = [
    ("d1", "Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 comedy film starring Shirley Temple."),
    ("d2", "Shirley Temple", "Shirley Temple Black served as Chief of Protocol of the United States."),
    ("d3", "Meet Corliss Archer", "Meet Corliss Archer is a radio program."),
]
ITEM = Item(
    id="q1",
    question="What position was held by the woman who starred in Kiss and Tell?",
    answers=("Chief of Protocol",),
    documents=tuple(Document(d, t, x) for d, t, x in PASSAGES),
)
GOLD = [frozenset({"d1"}), frozenset({"d2"})]


def test_a_citation_by_document_id_counts_as_a_citation_of_that_document() -> None:
    """The cite field may name a shown passage's document instead of its chunk; precision and recall keep it."""

    def script(request: ChatRequest, i: int) -> str:
        if request.json_schema and "answer" in request.json_schema["properties"]:
            return json.dumps({"answer": "Chief of Protocol", "cite": ["d1", "d2#0", "d1#0"]})
        query = ["Kiss and Tell film", "Shirley Temple Protocol"][min(i, 1)]
        return json.dumps({"thought": "look", "action": "search_database", "query": query})

    config = RunConfig(
        budget=Budget(max_searches=2, max_total_tokens=2000),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(cite=True),
    )
    traj = asyncio.run(run_bcas(ITEM, ScriptedModel(script), FakeRetriever(PASSAGES, k=2), config))
    shown = {c.split("#")[0] for s in traj.steps if s.kind == "search" for c in s.retrieved}
    assert {"d1", "d2"} <= shown  # both cited documents were shown
    assert traj.cited_docs == ["d1", "d2"] and traj.cite_unseen == 0  # d1 by document and by chunk: once
    record = record_from_trajectory(traj, run_id="t", dataset_name="toy", dataset_hash="h")
    found = bcas_trajectory(record.steps, GOLD, record.extra)
    assert found["citation_precision"] == 1.0 and found["citation_recall"] == 1.0


def _share(records: list[dict[str, Any]], metric: str) -> float:
    """The share a summary row reports for ``metric`` (the row's accuracy under that metric)."""
    fn = outcome_fn(metric)
    scored = [r for r in records if fn(r) is not None]
    return accuracy(scored, fn)[0]


def _evidence_record(item: str, recall: float) -> dict[str, Any]:
    return {"item_id": item, "prediction": "x", "correct_em": False, "extra": {"evidence_recall": recall}}


def test_some_gold_evidence_retrieved_is_the_share_that_reached_gold() -> None:
    """ "Some gold evidence retrieved" counts records with evidence recall above 0, not every record with gold."""
    records = [_evidence_record("a", 0.0), _evidence_record("b", 0.0), _evidence_record("c", 0.5)]
    records += [_evidence_record("d", 0.75), _evidence_record("e", 1.0)]
    assert _share(records, "gold_found") == 0.6
    assert _share(records, "evidence_complete") == 0.2  # all gold evidence: recall 1 only
    assert outcome_fn("gold_found")({"item_id": "e", "prediction": "x", "extra": {}}) is None  # no gold: left out


def test_a_whitespace_only_prediction_is_a_failed_answer_whatever_its_stale_grade() -> None:
    """An imported record whose prediction is blank carries no answer: its old grade must not count."""
    blank = {"item_id": "a", "prediction": " \n\t ", "correct_em": True, "judge_verdict": True, "answers": [" "]}
    answered = {"item_id": "b", "prediction": "Paris", "correct_em": True, "judge_verdict": True, "answers": ["Paris"]}
    for metric in ("correct_em", "judge_verdict", "strict_em"):
        assert outcome_fn(metric)(blank) is False, metric
        assert outcome_fn(metric)(answered) is True, metric
        assert _share([blank, answered], metric) == 0.5, metric


def _tries(n_items: int, epochs: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n_items):
        p = rng.random()
        for e in range(epochs):
            rows.append({"item_id": f"item-{i:02d}", "epoch": e, "prediction": "x", "correct_em": rng.random() < p})
    return rows


def test_pass_at_k_intervals_do_not_depend_on_the_order_of_the_records() -> None:
    """A merged sharded run lists records in another order than the unsharded run: same intervals."""
    records = _tries(24, 3, seed=5)
    shuffled = list(records)
    random.Random(1).shuffle(shuffled)
    by_shard = sorted(records, key=lambda r: (int(r["item_id"][-2:]) % 2, r["epoch"]))  # shard 1's records, then 2's
    whole = metric_columns(records)
    assert whole.pass_k == 3 and whole.pass_at_k_lo is not None and whole.pass_at_k_lo < whole.pass_at_k_hi
    for other in (metric_columns(shuffled), metric_columns(list(reversed(records))), metric_columns(by_shard)):
        for name in ("pass_at_k", "pass_at_k_lo", "pass_at_k_hi", "pass_hat_k", "pass_hat_k_lo", "pass_hat_k_hi"):
            assert getattr(other, name) == getattr(whole, name), name
