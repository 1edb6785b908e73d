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

import pytest

from bcas.agent import run_bcas
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.grading.outcomes import outcome_fn
from bcas.llm.base import ChatRequest
from bcas.metrics import metric_columns
from bcas.metrics.columns import recall_by_step
from bcas.metrics.trajectory import bcas_trajectory, jaccard, madara_evidence
from bcas.metrics.values import VALUES, is_share, value
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


def test_a_citation_of_a_dataset_id_rests_on_no_passage() -> None:
    """Passages are shown under opaque ids (p1, p2, ...): citing them scores the documents they map back
    to; citing the dataset's own ids, never shown, rests on no passage (it cannot be guessed into credit)."""

    def citing(cited: list[str]) -> ScriptedModel:
        def script(request: ChatRequest, i: int) -> str:
            if request.json_schema and "answer" in request.json_schema["properties"]:
                return json.dumps({"answer": "Chief of Protocol", "cite": cited})
            query = ["Kiss and Tell film", "Shirley Temple Protocol"][min(i, 1)]
            return json.dumps({"thought": "look", "action": "search_database", "query": query})

        return ScriptedModel(script)

    config = RunConfig(
        budget=Budget(max_searches=2, max_total_tokens=2000),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(cite=True),
    )
    shown = asyncio.run(run_bcas(ITEM, citing([]), FakeRetriever(PASSAGES, k=2), config)).passage_ids
    gold_labels = [label for label, chunk in shown.items() if chunk.split("#")[0] in ("d1", "d2")]
    assert len(gold_labels) == 2  # both gold documents were shown
    traj = asyncio.run(run_bcas(ITEM, citing(gold_labels), FakeRetriever(PASSAGES, k=2), config))
    assert sorted(traj.cited_docs) == ["d1", "d2"] and traj.cite_unseen == 0
    record = record_from_trajectory(traj, run_id="t", dataset_name="toy", dataset_hash="h")
    found = bcas_trajectory(record.steps, GOLD, record.extra)
    assert found["citation_precision"] == 1.0 and found["citation_recall"] == 1.0
    guessed = asyncio.run(run_bcas(ITEM, citing(["d1", "d2#0"]), FakeRetriever(PASSAGES, k=2), config))
    assert guessed.cited_docs == [] and guessed.cite_unseen == 2
    record = record_from_trajectory(guessed, run_id="t", dataset_name="toy", dataset_hash="h")
    found = bcas_trajectory(record.steps, GOLD, record.extra)
    assert found["citation_precision"] == 0.0 and found["citation_recall"] == 0.0


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


# -- the value metrics a paired comparison reads (bcas.metrics.values) ------------------------


def test_each_value_metric_reads_its_own_field_and_says_not_measurable_otherwise():
    rec = {
        "prediction": "Paris", "f1": 0.5, "tokens_in": 100, "tokens_out": 7, "cost_usd": 0.25, "searches_used": 3,
        "extra": {"evidence_recall": 0.75, "citation_precision": 1.0, "redundant_searches": 2},
    }  # fmt: skip
    assert value(rec, "f1") == 0.5
    assert value(rec, "tokens") == 107.0  # prompt plus completion
    assert value({"prediction": "x"}, "tokens") == 0.0 and value({"prediction": "x", "tokens_out": 4}, "tokens") == 4.0
    assert value({"prediction": "x", "tokens_in": 4}, "tokens") == 4.0
    assert value(rec, "cost_usd") == 0.25 and value(rec, "searches_used") == 3.0 and value(rec, "tokens_out") == 7.0
    assert value(rec, "evidence_recall") == 0.75 and value(rec, "redundant_searches") == 2.0
    assert value(rec, "citation_recall") is None  # not in extra: not measurable, left out of the pairing
    assert value({"prediction": "x", "extra": "broken"}, "evidence_recall") is None
    # a flag is no amount, and text is no number
    assert value({"prediction": "x", "cost_usd": True}, "cost_usd") is None
    assert value({"prediction": "x", "cost_usd": "0.2"}, "cost_usd") is None
    assert value({"prediction": "x", "f1": None}, "f1") is None


def test_a_failed_answers_f1_is_zero_whatever_its_stale_grade_says():
    assert value({"prediction": "", "f1": 0.9}, "f1") == 0.0
    assert value({"prediction": "Paris", "f1": 0.9, "error": "timeout"}, "f1") == 0.0


def test_shares_are_the_fractions_and_amounts_are_not():
    assert all(is_share(m) for m in ("f1", "evidence_recall", "citation_precision", "kept_recall"))
    assert not any(is_share(m) for m in ("cost_usd", "tokens", "searches_used", "wasted_searches"))
    assert set(VALUES.names()) >= {"f1", "tokens", "cost_usd", "kept_precision"}


def test_a_search_that_errored_is_no_turn_and_a_non_search_step_no_search():
    steps = [
        {"kind": "plan", "output": "think"},
        {"kind": "search", "query": "who is X", "docs": ["a"]},
        {"kind": "search", "query": "who is X", "docs": [], "flag": "search_error"},
        {"kind": "search", "query": "where is Y", "docs": ["b"]},
        {"kind": "answer", "output": "Y"},
    ]
    assert bcas_trajectory(steps, [])["redundant_searches"] == 0
    # the same query again, run: redundant; told apart by its flag when the loop did not run it
    again = [*steps, {"kind": "search", "query": "Who is X?", "docs": ["c"]}]
    assert bcas_trajectory(again, [])["redundant_searches"] == 1
    flagged = [*steps, {"kind": "search", "query": "other words", "docs": [], "flag": "repeated_query"}]
    assert bcas_trajectory(flagged, [])["redundant_searches"] == 1
    # the same hits from another query: redundant too
    same_hits = [*steps, {"kind": "search", "query": "completely new", "docs": ["b"]}]
    assert bcas_trajectory(same_hits, [])["redundant_searches"] == 1
    # an empty query is no query: two of them are the same (empty) query
    blank = [{"kind": "search", "query": None, "docs": ["a"]}, {"kind": "search", "query": "", "docs": ["z"]}]
    assert bcas_trajectory(blank, [])["redundant_searches"] == 1


def test_two_empty_sets_are_the_same_and_disjoint_ones_share_nothing():
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset("a"), frozenset("b")) == 0.0 and jaccard(frozenset("ab"), frozenset("b")) == 0.5


def test_madaras_kept_documents_fall_back_to_its_context():
    groups = [frozenset({"g1"}), frozenset({"g2"})]
    out = madara_evidence({"doc_ids": ["g1", "x", "g2"], "context_doc_ids": ["g1", "x"]}, groups)
    assert out == {"evidence_recall": 1.0, "kept_precision": 0.5, "kept_recall": 0.5}
    selected = madara_evidence({"doc_ids": ["g1"], "selected_docs": ["g2"], "context_doc_ids": ["g1"]}, groups)
    assert selected["kept_recall"] == 0.5 and selected["kept_precision"] == 1.0
    assert madara_evidence({"doc_ids": ["g1"]}, groups)["kept_recall"] == 0.0


def test_the_recall_curve_holds_a_records_last_value_after_it_stops_searching():
    recs = [
        {"extra": {"recall_at_step": [0.0, 0.5, 1.0]}},
        {"extra": {"recall_at_step": [0.5]}},  # stopped after one search: stays at 0.5
        {"extra": {"recall_at_step": []}},  # no search: 0 throughout
        {"extra": {}},  # no curve: not part of it
    ]
    assert recall_by_step(recs) == pytest.approx([0.5 / 3, 1.0 / 3, 1.5 / 3])
    assert recall_by_step([{"extra": {}}]) == [] and recall_by_step([]) == []


def test_the_first_gold_step_is_averaged_over_the_items_with_gold():
    recs = [
        {"prediction": "a", "correct_em": True, "extra": {"evidence_recall": 1.0, "first_gold_step": 1}},
        {"prediction": "a", "correct_em": False, "extra": {"evidence_recall": 0.5, "first_gold_step": 3}},
        {"prediction": "a", "correct_em": False, "extra": {"first_gold_step": 9}},  # no gold mapped: left out
    ]
    columns = metric_columns(recs)
    assert columns.first_gold_step == 2.0 and columns.gold_n == 2


def _reference_cost_of_pass_interval(values: dict, alpha: float, n_resamples: int, seed: int) -> tuple[float, float]:
    """The documented recipe: items in id order drawn with replacement from default_rng(seed), the
    ratio of mean cost to mean success per resample, the alpha/2 and 1 - alpha/2 order statistics."""
    import math

    import numpy as np

    items = [values[key] for key in sorted(values)]
    costs = np.array([sum(c for c, _ in v) / len(v) for v in items])
    wins = np.array([sum(1.0 for _, p in v if p) / len(v) for v in items])
    idx = np.random.default_rng(seed).integers(0, len(items), size=(n_resamples, len(items)))
    c, w = costs[idx].mean(axis=1), wins[idx].mean(axis=1)
    ratios = np.sort(np.array([ci / wi if wi > 0 else math.inf for ci, wi in zip(c, w, strict=True)]))
    return float(ratios[math.floor(alpha / 2 * (n_resamples - 1))]), float(
        ratios[math.ceil((1 - alpha / 2) * (n_resamples - 1))]
    )


@pytest.mark.parametrize("n_resamples", [41, 1000])
def test_the_cost_of_pass_interval_is_the_documented_order_statistics(n_resamples: int) -> None:
    """A reader recomputing the report's cost-of-pass interval from the docs must get its numbers."""
    from bcas.metrics.cost import cost_of_pass_interval

    values = {f"q{i}": [(100.0 + 37 * i % 90, i % 3 != 0), (80.0 + 11 * i % 50, i % 4 == 1)] for i in range(12)}
    _, lo, hi = cost_of_pass_interval(values, n_resamples=n_resamples)
    assert (lo, hi) == _reference_cost_of_pass_interval(values, 0.05, n_resamples, 0)


def test_tokens_of_pass_resamples_items_and_counts_a_missing_side_as_zero_tokens() -> None:
    """Tokens of pass average each item's epochs, then resample items: with every record under one
    item the interval would collapse; a record without input tokens spends only its output."""
    recs = [
        {"item_id": "a", "tokens_in": 0, "tokens_out": 10, "correct_em": True},
        {"item_id": "b", "tokens_in": None, "tokens_out": 30, "correct_em": True},
        {"item_id": "c", "tokens_in": 50, "tokens_out": None, "correct_em": False},
        {"item_id": "d", "tokens_in": 20, "tokens_out": 0, "correct_em": True},
    ]
    cols = metric_columns(recs, "correct_em")
    assert cols.tokens_of_pass == pytest.approx((10 + 30 + 50 + 20) / 4 / (3 / 4))
    assert cols.tokens_of_pass_lo < cols.tokens_of_pass < cols.tokens_of_pass_hi


def test_a_decline_that_is_the_gold_answer_is_correct_and_a_failure_is_incorrect() -> None:
    """SimpleQA's three-way counts: "unknown" is an answer where the gold says "Unknown" (not a
    decline), and a failed call with no answer is an incorrect attempt, not a decline."""
    from bcas.grading.abstention import CORRECT, INCORRECT, NOT_ATTEMPTED
    from bcas.metrics.columns import three_way_counts

    recs = [
        {"item_id": "a", "answers": ["Unknown"], "prediction": "unknown", "correct_em": True},
        {"item_id": "b", "answers": ["Paris"], "prediction": "", "error": "timeout", "correct_em": False},
        {"item_id": "c", "answers": ["Paris"], "prediction": "I don't know", "correct_em": False},
        # an errored call keeps what it wrote before failing: still a failure, never a decline
        {"item_id": "d", "answers": ["Paris"], "prediction": "I don't know", "error": "engine crashed"},
    ]
    assert three_way_counts(recs, "correct_em") == {CORRECT: 1, INCORRECT: 2, NOT_ATTEMPTED: 1}


def test_pass_at_k_intervals_follow_the_seed_given_and_default_to_seed_0() -> None:
    from bcas.metrics.reliability import over_items

    outcomes = {f"q{i}": [i % 2 == 0, i % 3 == 0, i % 5 == 0] for i in range(15)}
    assert over_items(outcomes, 2) == over_items(outcomes, 2, seed=0)
    assert over_items(outcomes, 2, seed=5) != over_items(outcomes, 2, seed=0)


def test_an_impossible_cost_of_pass_input_is_refused_with_both_numbers() -> None:
    from bcas.metrics.cost import cost_of_pass

    with pytest.raises(ValueError) as refused:
        cost_of_pass(0.02, 1.5)
    assert str(refused.value) == "need 0 <= success_rate <= 1 and mean_cost >= 0, got 1.5, 0.02"
