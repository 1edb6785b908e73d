"""What a grade loses when a verdict or a decline is read wrongly (BCAS §3.6; SimpleQA's not attempted).

Label verdicts (FEVER, MADARA §5.4) are read from free text, so a negation a few words
before the label must cancel it; a decline counts as not attempted on a QA item even when
one of its gold aliases happens to look like a label.
"""

from __future__ import annotations

from typing import Any

import pytest

from bcas.grading import label_match
from bcas.grading.outcomes import outcome_fn
from bcas.metrics import metric_columns


@pytest.mark.parametrize(
    "verdict",
    [
        "The claim is not really supported.",
        "It is not fully supported by the evidence",
        "This isn't clearly refuted, but it is not entirely supported",
        "The evidence does not actually support it.",
    ],
)
def test_a_negation_two_words_before_the_label_is_not_that_label(verdict: str) -> None:
    """ "not really supported" must not be graded SUPPORTS: the negation may sit two words before the label."""
    assert not label_match(verdict, ["SUPPORTS"])


def test_a_plain_verdict_after_a_distant_negation_still_counts() -> None:
    """A negation further back belongs to another clause: the label right after it is read."""
    assert label_match("Not a hard case: the claim is supported.", ["SUPPORTS"])
    assert label_match("Nothing here says otherwise; supported.", ["SUPPORTS"])


def _record(item: str, prediction: str, answers: list[str], correct: bool) -> dict[str, Any]:
    return {"item_id": item, "prediction": prediction, "answers": answers, "correct_em": correct}


def test_a_qa_item_with_one_label_like_alias_still_has_declines() -> None:
    """A QA item whose gold aliases include "yes" is no label task: "I don't know" there is not attempted."""
    sitcom = ["Yes Minister", "yes"]  # the title, and the alias some annotators wrote
    records = [
        _record("a", "I don't know", sitcom, False),
        _record("b", "Yes Minister", sitcom, True),
        _record("c", "Fawlty Towers", sitcom, False),
    ]
    columns = metric_columns(records)
    assert (columns.n_correct, columns.n_incorrect, columns.n_not_attempted) == (1, 1, 1)
    assert columns.accuracy_given_attempted == 0.5
    # a label task proper has no declines: "not enough info" there is an attempt
    fever = [_record("f", "NOT ENOUGH INFO", ["SUPPORTS"], False)]
    assert metric_columns(fever).n_not_attempted == 0 and metric_columns(fever).n_incorrect == 1


def test_a_decline_that_equals_any_gold_alias_is_an_answer() -> None:
    """ "Unknown" answers a question whose gold aliases include "Unknown": an attempt, and a right one."""
    aliases = ["The Unknown Soldier", "Unknown"]
    records = [_record("a", "Unknown", aliases, True), _record("b", "I don't know", aliases, False)]
    columns = metric_columns(records)
    assert (columns.n_correct, columns.n_incorrect, columns.n_not_attempted) == (1, 0, 1)


def test_a_three_way_judge_s_not_attempted_label_is_not_an_attempt() -> None:
    """SimpleQA's grading: an answer the three-way judge labelled not attempted is not counted as wrong."""
    hedged = _record("a", "Perhaps Paris, perhaps Lyon", ["Paris"], False)
    hedged["judge"] = {"label": "not_attempted", "verdict": False}
    columns = metric_columns([hedged, _record("b", "Paris", ["Paris"], True)])
    assert (columns.n_correct, columns.n_incorrect, columns.n_not_attempted) == (1, 0, 1)
    assert outcome_fn("attempted")(hedged) is False and outcome_fn("em_given_attempted")(hedged) is None


def test_an_item_that_ended_in_error_is_wrong_whatever_else_it_carries() -> None:
    """A record whose stop reason is ``error`` (its message lost on import) holds no answer: it is wrong."""
    broken = {"item_id": "a", "prediction": "Paris", "answers": ["Paris"], "correct_em": True, "judge_verdict": True}
    broken["stop_reason"] = "error"
    for metric in ("correct_em", "judge_verdict", "strict_em"):
        assert outcome_fn(metric)(broken) is False, metric
