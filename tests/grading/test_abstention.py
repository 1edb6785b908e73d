"""SimpleQA's three-way grading (Wei et al. 2024): declines, counts and the F-score."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcas.grading.abstention import declines, simpleqa_scores, three_way
from bcas.grading.outcomes import outcome


@pytest.mark.parametrize(
    "answer",
    ["Unknown", "I don't know.", "I cannot find that.", "Not enough information", "The context does not say",
     "Cannot be determined", "N/A", "insufficient evidence in the documents", "I am not sure"],
)  # fmt: skip
def test_declining_answers_are_not_attempted(answer: str) -> None:
    assert declines(answer, ["Paris"])
    assert three_way(False, answer, ["Paris"]) == "not_attempted"


@pytest.mark.parametrize("answer", ["Paris", "Unknown Soldier", "no", "None of the Beatles", "Cannot Buy Me Love"])
def test_answers_are_attempts(answer: str) -> None:
    assert not declines(answer, ["Paris"])


def test_a_gold_alias_or_a_label_task_is_never_a_decline() -> None:
    assert not declines("Unknown", ["unknown"])  # the answer is "Unknown"
    assert not declines("NOT ENOUGH INFO", ["SUPPORTS"])  # a FEVER label
    assert three_way(None, "I don't know", ["x"]) == "not_attempted"  # a decline needs no grade
    assert three_way(None, "Paris", ["x"]) is None  # an ungraded attempt is left out
    assert three_way(True, "", ["x"], failed=True) == "incorrect"  # an empty answer is wrong


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
def test_scores_follow_their_definitions(c: int, i: int, n: int) -> None:
    got = simpleqa_scores(c, i, n)
    total, attempted = c + i + n, c + i
    if not attempted:
        assert got["correct_given_attempted"] is None and got["f_score"] is None
        return
    overall, given_ = c / total, c / attempted
    assert got["overall_correct"] == pytest.approx(overall)
    assert got["correct_given_attempted"] == pytest.approx(given_)
    f = got["f_score"]
    assert f is not None and min(overall, given_) - 1e-12 <= f <= max(overall, given_) + 1e-12
    if c:
        assert 1 / f == pytest.approx((1 / overall + 1 / given_) / 2)  # harmonic mean
    assert got["not_attempted_rate"] == pytest.approx(n / total)


def test_worked_example_and_registered_metrics() -> None:
    assert simpleqa_scores(6, 2, 2) == pytest.approx(
        {"overall_correct": 0.6, "correct_given_attempted": 0.75, "f_score": 2 / 3, "not_attempted_rate": 0.2}
    )
    declined = {"prediction": "I don't know", "answers": ["Paris"], "correct_em": False}
    wrong = {"prediction": "Lyon", "answers": ["Paris"], "correct_em": False}
    assert outcome(declined, "attempted") is False and outcome(wrong, "attempted") is True
    assert outcome(declined, "em_given_attempted") is None and outcome(wrong, "em_given_attempted") is False
    assert outcome({"extra": {"evidence_recall": 1.0}}, "evidence_complete") is True
    assert outcome({"extra": {"evidence_recall": 0.5}}, "gold_found") is True
    assert outcome({"extra": {}}, "gold_found") is None
