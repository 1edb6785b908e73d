"""Trajectory metrics of one record's searches against brute force, with worked examples."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcas.metrics.trajectory import (
    bcas_trajectory,
    evidence_recall,
    first_gold_hit,
    kept_precision_recall,
    madara_evidence,
    recall_curve,
    redundant_searches,
    wasted_searches,
)

DOC = st.sampled_from("abcdefgh")
SEARCHES = st.lists(st.lists(DOC, max_size=4), max_size=6)
GROUPS = st.lists(st.frozensets(DOC, min_size=1, max_size=2), min_size=1, max_size=4)


@given(SEARCHES, GROUPS)
def test_curve_first_hit_and_waste_against_brute_force(searches: list[list[str]], groups: list[frozenset[str]]) -> None:
    curve = recall_curve(searches, groups)
    # recall after search j = recall of the union of searches 1..j
    assert curve == [evidence_recall([d for s in searches[: j + 1] for d in s], groups) for j in range(len(searches))]
    assert all(a <= b for a, b in zip(curve, curve[1:], strict=False))
    hits = [j + 1 for j, s in enumerate(searches) if any(g & set(s) for g in groups)]
    assert first_gold_hit(searches, groups) == (hits[0] if hits else None)
    # the last search whose recall rose (all searches wasted when none rose)
    rises = [j + 1 for j in range(len(curve)) if curve[j] > (curve[j - 1] if j else 0.0)]
    assert wasted_searches(searches, groups) == len(searches) - (rises[-1] if rises else 0)


def test_worked_example_of_a_three_search_trajectory() -> None:
    groups = [frozenset({"a"}), frozenset({"b", "b2"})]
    searches = [["x", "y"], ["a", "x"], ["b2"], ["a"]]
    assert recall_curve(searches, groups) == [0.0, 0.5, 1.0, 1.0]
    assert first_gold_hit(searches, groups) == 2
    assert wasted_searches(searches, groups) == 1
    assert wasted_searches([["x"], ["y"]], groups) == 2  # no gold found: every search wasted
    assert wasted_searches(searches, []) is None and recall_curve(searches, []) == []


def test_redundant_searches_repeat_near_identical_or_same_top_hits() -> None:
    queries = ["Who directed Alien?", "who directed alien", "Alien film director name", "Ridley Scott birthplace"]
    results = [["a", "b", "c"], ["d"], ["a", "b", "c", "z"], ["q"]]
    # 2: same words; 3: same top three hits as 1; 4: new
    assert redundant_searches(queries, results) == 2
    assert redundant_searches(["x y z w v", "x y z w"], [["1"], ["2"]]) == 1  # Jaccard 0.8
    assert redundant_searches(["x y z", "x y"], [["1"], ["2"]]) == 0  # Jaccard 0.67
    assert redundant_searches(["p", "q"], [["1"], []], ["", "repeated_query"]) == 1


def test_bcas_trajectory_reads_a_record_s_steps() -> None:
    steps = [
        {"kind": "plan"},
        {"kind": "search", "query": "q1", "docs": ["x"]},
        {"kind": "search", "query": "q1", "docs": [], "flag": "repeated_query"},
        {"kind": "search", "query": "q2", "docs": [], "flag": "search_error"},
        {"kind": "search", "query": "q3", "docs": ["a"]},
        {"kind": "answer"},
    ]
    got = bcas_trajectory(steps, [frozenset({"a"}), frozenset({"b"})])
    assert got == {
        "redundant_searches": 1,
        "evidence_recall": 0.5,
        "gold_hits": [[], ["a"]],
        "recall_at_step": [0.0, 0.5],
        "first_gold_step": 2,
        "wasted_searches": 0,
    }
    assert bcas_trajectory(steps, []) == {"redundant_searches": 1}


def test_kept_precision_recall_of_a_madara_record() -> None:
    groups = [frozenset({"a"}), frozenset({"b"})]
    assert kept_precision_recall(["a", "x", "a"], groups) == (0.5, 0.5)
    assert kept_precision_recall([], groups) == (None, 0.0)
    assert kept_precision_recall(["a"], []) == (None, None)
    extra = {"doc_ids": ["a", "b", "x", "y"], "selected_docs": ["b", "x"]}
    assert madara_evidence(extra, groups) == {"evidence_recall": 1.0, "kept_precision": 0.5, "kept_recall": 0.5}


@given(st.lists(DOC, max_size=6), GROUPS)
def test_kept_precision_recall_against_definitions(kept: list[str], groups: list[frozenset[str]]) -> None:
    gold = set().union(*groups)
    unique = set(kept)
    precision, recall = kept_precision_recall(kept, groups)
    assert precision == (len(unique & gold) / len(unique) if unique else None)
    assert recall == pytest.approx(sum(1 for g in groups if g & unique) / len(groups))
