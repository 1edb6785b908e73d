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


def test_the_negation_window_is_the_two_words_before_the_label_from_the_first_word_on() -> None:
    """A verdict that opens with its negation is negated; one three words back is another clause's."""
    from bcas.grading.metrics import LABEL_SPACES, extract_label

    fever = LABEL_SPACES["fever"]
    assert extract_label("not supported", fever) is None
    assert extract_label("Never refuted.", fever) is None
    assert extract_label("not at all supported", fever) == "SUPPORTS"
    assert extract_label("not enough info", fever) == "NOT ENOUGH INFO"


def test_the_longest_surface_form_at_a_position_wins_in_any_label_space() -> None:
    from bcas.grading.metrics import extract_label

    space = {"PLAIN": ("true",), "STORY": ("true story",), "LONGER": ("a true story told",)}
    assert extract_label("true story", space) == "STORY"
    assert extract_label("A true story told twice", space) == "LONGER"
    assert extract_label("true enough", space) == "PLAIN"


def test_a_label_space_covers_golds_that_use_every_one_of_its_labels() -> None:
    """A yes/no file with both answers among its golds is still a yes/no task; golds no space
    covers are refused, naming the spaces there are."""
    from bcas.grading.metrics import LABEL_SPACES, label_space_for

    assert label_space_for(["yes", "no"]) == LABEL_SPACES["yes_no"]
    assert label_space_for(["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]) == LABEL_SPACES["fever"]
    with pytest.raises(ValueError) as refused:
        label_space_for(["maybe"])
    assert str(refused.value) == (
        "no label space covers the golds ['maybe']; known spaces: {'fever': ['NOT ENOUGH INFO', 'REFUTES', "
        "'SUPPORTS'], 'yes_no': ['no', 'yes']}"
    )
    with pytest.raises(ValueError, match="^golds must hold at least one gold answer$"):
        label_space_for([])


def test_a_custom_metric_reads_the_records_own_boolean_field_and_a_missing_one_is_ungraded() -> None:
    """A grid may name any boolean field of its records as its metric; a record without the
    field, or without an EM grade, is left out (ungraded), never counted wrong."""
    from bcas.grading.outcomes import graded, outcome, resolve

    assert outcome({"my_flag": 1}, "my_flag") is True and outcome({"my_flag": 0}, "my_flag") is False
    assert outcome({"other": True}, "my_flag") is None
    assert outcome({"prediction": "x"}, "correct_em") is None
    assert outcome({"prediction": None, "answers": ["x"]}, "strict_em") is False
    assert outcome({"answers": ["XXXX"]}, "strict_em") is False  # no prediction field: nothing matches any gold
    # graded by a judge: a newest-grade dict alone counts, as does a grades table
    assert graded({"judge": {"verdict": None}}) and graded({"grades": {"g": {}}}) and not graded({"judge": None})
    assert resolve(None) == resolve("") == "correct_em" and resolve("judge", [{"judge": {}}]) == "judge_verdict"


def test_strict_normalisation_lower_cases_and_collapses_spaces_only() -> None:
    """MADARA's strict EM (§5.4) keeps punctuation and articles; the public function is what a
    user calls to see what was compared."""
    from bcas.grading import strict_normalize

    assert strict_normalize("  The  CAT,\tsat ") == "the cat, sat"
