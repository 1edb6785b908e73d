"""What a grade loses when a verdict or a decline is read wrongly (BCAS §3.6; SimpleQA's not attempted).

Label verdicts (FEVER, MADARA §5.4) are read from free text, so a negation a few words
before the label must cancel it; a decline counts as not attempted on a QA item even when
one of its gold aliases happens to look like a label.
"""

from __future__ import annotations

from typing import Any

import pytest

from bcas.grading import label_match
from bcas.grading.abstention import declines, simpleqa_scores
from bcas.grading.outcomes import outcome_fn, token_f1_of
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


def test_an_apostrophe_joins_a_word_instead_of_ending_the_verdict() -> None:
    """ "The claim's supported" is a SUPPORTS verdict: the apostrophe must not cut the reply short."""
    assert label_match("The claim's supported.", ["SUPPORTS"])
    assert not label_match("It isn\u2019t supported.", ["SUPPORTS"])


def test_the_abstain_action_makes_any_answer_not_attempted() -> None:
    rec = {**_record("a", "Paris", ["Paris"], True), "stop_reason": "abstained"}
    assert outcome_fn("attempted")(rec) is False and outcome_fn("em_given_attempted")(rec) is None


def test_an_errored_item_is_a_wrong_attempt_not_a_decline() -> None:
    """A failure to answer stays in SimpleQA's denominators as incorrect (never as not attempted)."""
    rec = {**_record("a", "I don't know", ["Paris"], False), "error": "timeout"}
    assert outcome_fn("attempted")(rec) is True and outcome_fn("em_given_attempted")(rec) is False


def test_a_decline_equal_to_a_gold_alias_is_an_attempt_for_the_outcome_too() -> None:
    rec = _record("a", "Unknown", ["The Unknown Soldier", "Unknown"], True)
    assert outcome_fn("attempted")(rec) is True and outcome_fn("em_given_attempted")(rec) is True


@pytest.mark.parametrize("golds", [["SUPPORTS"], ["Yes", "no"]])
def test_a_label_task_never_declines(golds: list[str]) -> None:
    """On FEVER or yes/no a reply like "unknown" is a wrong label, counted against accuracy."""
    assert not declines("unknown", golds)
    assert declines("unknown", ["Paris"])


def test_gold_found_is_false_when_no_gold_evidence_was_retrieved() -> None:
    assert outcome_fn("gold_found")({"extra": {"evidence_recall": 0.0}}) is False
    assert outcome_fn("gold_found")({"extra": {"evidence_recall": 0.5}}) is True


def test_the_f1_shown_beside_a_metric_is_zero_for_a_failed_or_unanswerable_record() -> None:
    ok = {"prediction": "Paris France", "answers": ["Paris"], "f1": 0.5}
    assert token_f1_of(ok, "correct_em") == 0.5
    assert token_f1_of({"prediction": "Paris"}, "correct_em") == 0.0  # no stored F1
    assert token_f1_of({**ok, "error": "boom"}, "correct_em") == 0.0
    assert token_f1_of({**ok, "error": "boom"}, "strict_em") == 0.0
    assert token_f1_of({"prediction": "Paris"}, "strict_em") == 0.0  # no gold answers: nothing to match
    assert token_f1_of(ok, "strict_em") == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("counts", "name"), [((-1, 0, 0), "correct"), ((0, -1, 0), "incorrect"), ((0, 0, -1), "not_attempted")]
)
def test_a_negative_count_is_refused_naming_the_count(counts: tuple[int, int, int], name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be >= 0, got -1$"):
        simpleqa_scores(*counts)


def test_a_model_that_never_attempts_has_no_f_score_and_one_always_wrong_scores_zero() -> None:
    assert simpleqa_scores(0, 0, 3)["f_score"] is None
    assert simpleqa_scores(0, 2, 1)["f_score"] == 0.0


def test_a_record_without_a_prediction_field_has_no_strict_f1_whatever_its_gold() -> None:
    assert token_f1_of({"answers": ["XXXX"]}, "strict_em") == 0.0
