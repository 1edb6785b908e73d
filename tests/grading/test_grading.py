"""bcas.grading: SQuAD EM/F1, label matching, scoring-rule registry."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.grading import (
    LABEL_SPACES,
    SCORING_RULES,
    exact_match,
    extract_label,
    label_match,
    normalize_answer,
    register_scoring_rule,
    score_prediction,
    token_f1,
)

# --- normalisation, EM, F1 ----------------------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("The Beatles", "beatles"),
        ("  the   QUICK  brown fox. ", "quick brown fox"),
        ("An apple a day", "apple day"),
        ("Theatre", "theatre"),  # "the" only as a whole word
        ("U.S.A.", "usa"),
        ("Jean-Paul Sartre", "jeanpaul sartre"),  # SQuAD drops hyphens without a space
        ("\u201cParis\u201d", "paris"),  # typographic quotes are punctuation too
        ("1,000", "1000"),
        ("", ""),
        ("a an the", ""),
    ],
)
def test_normalize_answer_squad_examples(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_exact_match_examples() -> None:
    assert exact_match("the Eiffel Tower!", ["Eiffel Tower"])
    assert exact_match("eiffel tower", "The Eiffel Tower")  # a single gold string is accepted
    assert not exact_match("Eiffel", ["Eiffel Tower"])
    assert exact_match("JFK", ["John F. Kennedy", "JFK"])  # any alias
    assert not exact_match("", ["x"])


def test_token_f1_examples() -> None:
    assert token_f1("Barack Obama", ["Barack Obama"]) == 1.0
    # pred {barack, hussein, obama} vs gold {barack, obama}: P = 2/3, R = 1, F1 = 0.8.
    assert token_f1("Barack Hussein Obama", ["Barack Obama"]) == pytest.approx(0.8)
    assert token_f1("cat sat", ["dog ran"]) == 0.0
    # Maximum over aliases, not the first or the mean.
    assert token_f1("new york city", ["NYC", "New York City", "New York"]) == 1.0
    assert token_f1("new york", ["NYC", "New York City"]) == pytest.approx(0.8)
    # Bag of tokens: repeated tokens count once per occurrence.
    assert token_f1("the the paris paris", ["paris"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    # ... on both sides: a repeated gold token matched by a repeated predicted one counts twice, not once.
    assert token_f1("paris paris", ["paris paris"]) == 1.0
    assert token_f1("paris paris france", ["paris paris"]) == pytest.approx(0.8)
    # Empty after normalisation: 1 only if both are empty.
    assert token_f1("the", ["a"]) == 1.0
    assert token_f1("", ["Paris"]) == 0.0
    assert token_f1("Paris", ["the"]) == 0.0


def test_empty_gold_list_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one gold"):
        exact_match("x", [])


texts = st.text(max_size=40)
# Texts with real words so that F1 is often strictly between 0 and 1.
wordy = st.lists(
    st.sampled_from(["the", "a", "Paris", "paris,", "France", "city", "of", "light", "-", "x"]), max_size=8
).map(" ".join)
answers = st.one_of(texts, wordy)


@settings(max_examples=500, deadline=None)
@given(s=texts)
def test_normalize_is_idempotent(s: str) -> None:
    once = normalize_answer(s)
    assert normalize_answer(once) == once


@settings(max_examples=300, deadline=None)
@given(pred=answers, gold=answers)
def test_f1_bounded_symmetric_and_implied_by_em(pred: str, gold: str) -> None:
    f1 = token_f1(pred, [gold])
    assert 0.0 <= f1 <= 1.0
    assert f1 == pytest.approx(token_f1(gold, [pred]))
    if exact_match(pred, [gold]):
        assert f1 == 1.0


@settings(max_examples=200, deadline=None)
@given(pred=answers, golds=st.lists(answers, min_size=1, max_size=4))
def test_scores_are_max_over_aliases(pred: str, golds: list[str]) -> None:
    assert token_f1(pred, golds) == max(token_f1(pred, [g]) for g in golds)
    assert exact_match(pred, golds) == any(exact_match(pred, [g]) for g in golds)


# --- labels -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pred",
    ["SUPPORTS", "supports", "SUPPORTS.", "Supported", "true", "The claim is supported.", "Answer: SUPPORTS"],
)
def test_fever_supports_forms(pred: str) -> None:
    assert label_match(pred, ["SUPPORTS"])
    assert not label_match(pred, ["REFUTES"])


@pytest.mark.parametrize("pred", ["REFUTES", "refuted", "Refutes.", "False", "The claim is refuted by the evidence"])
def test_fever_refutes_forms(pred: str) -> None:
    assert label_match(pred, ["REFUTES"])
    assert not label_match(pred, ["SUPPORTS"])


@pytest.mark.parametrize(
    "pred",
    ["", "I cannot tell", "The claim is not supported", "NOT ENOUGH INFO", "There is not enough information."],
)
def test_fever_unclear_or_negated_verdicts_match_nothing(pred: str) -> None:
    assert not label_match(pred, ["SUPPORTS"])
    assert not label_match(pred, ["REFUTES"])


def test_first_stated_verdict_wins() -> None:
    assert label_match("SUPPORTS. It is not refuted by anything.", ["SUPPORTS"])
    assert label_match("Refuted; an earlier draft said supported.", ["REFUTES"])


@pytest.mark.parametrize(
    "pred, gold",
    [("yes", "yes"), ("Yes.", "yes"), ("No", "no"), ("no, because ...", "no"), ("True", "yes"), ("false", "no")],
)
def test_yes_no_forms(pred: str, gold: str) -> None:
    assert label_match(pred, [gold])
    assert not label_match(pred, ["no" if gold == "yes" else "yes"])


def test_yes_no_does_not_read_words_inside_other_words() -> None:
    assert not label_match("Nobody knows", ["no"])
    assert not label_match("yesterday", ["yes"])


def test_extract_label_direct() -> None:
    labels = {"A": ("alpha", "first option"), "B": ("beta",)}
    assert extract_label("I pick the first option, not beta", labels) == "A"
    assert extract_label("BETA!", labels) == "B"
    assert extract_label("gamma", labels) is None
    assert extract_label("it isn't alpha", labels) is None
    assert extract_label("Supported.", LABEL_SPACES["fever"]) == "SUPPORTS"


def test_label_match_unknown_label_space() -> None:
    with pytest.raises(ValueError, match="no label space covers"):
        label_match("maybe", ["MAYBE"])


# --- scoring rules ---------------------------------------------------------------------


def test_score_prediction_dispatch() -> None:
    assert score_prediction("The Eiffel Tower", ["Eiffel Tower"], "qa") == (True, 1.0)
    em, f1 = score_prediction("Eiffel", ["Eiffel Tower"], "qa")
    assert em is False and f1 == pytest.approx(2 / 3)
    assert score_prediction("The claim is refuted.", ["REFUTES"], "label") == (True, 1.0)
    assert score_prediction("SUPPORTS", ["REFUTES"], "label") == (False, 0.0)
    with pytest.raises(ValueError, match="unknown scoring rule 'nope'"):
        score_prediction("x", ["x"], "nope")


def test_every_dataset_scoring_rule_is_registered_and_scores_its_golds() -> None:
    from bcas.data import DATASETS, load_dataset

    for name, spec in DATASETS.items():
        assert spec.scoring in SCORING_RULES, name
        item = load_dataset(name, limit=1).items[0]
        # The gold answer itself scores as correct under the dataset's rule.
        assert score_prediction(item.answers[0], item.answers, spec.scoring) == (True, 1.0), name


def test_register_scoring_rule_is_one_registration() -> None:
    @register_scoring_rule("contains")
    def _contains(pred: str, golds: list[str]) -> tuple[bool, float]:
        hit = any(normalize_answer(g) in normalize_answer(pred) for g in golds)
        return hit, float(hit)

    try:
        assert score_prediction("It is in Paris, France", ["Paris"], "contains") == (True, 1.0)
    finally:
        del SCORING_RULES["contains"]
