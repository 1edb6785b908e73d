"""Abstention: answers that decline are *not attempted* (SimpleQA's three-way grading).

SimpleQA (Wei et al., 2024, "Measuring short-form factuality in large language
models", §2) grades every answer ``correct``, ``incorrect`` or ``not attempted`` and
reports *overall correct* (correct / all), *correct given attempted* (correct /
(correct + incorrect)) and their harmonic mean, the *F-score*; a model that declines
when unsure is not punished as one that answers wrongly, and one that always
declines scores 0.

Here an answer is not attempted when, after SQuAD normalisation, it is a declining
phrase (:data:`DECLINE_PATTERNS`: "unknown", "I don't know", "cannot find", "not enough
information", ...) that no gold alias equals.  Label tasks (FEVER, yes/no) never
abstain: ``NOT ENOUGH INFO`` is a label there, an attempt like any other.  An empty
answer or an error is *incorrect*, as everywhere in bcas (a failure to answer is never
left out of a denominator); only a stated decline is not attempted.  Two more sources
say *not attempted* whatever the answer text: the agent chose the explicit ``abstain``
action (``AgentConfig.abstain``; the record's stop reason ``abstained``), or a three-way
LLM judge (``LLMJudge(three_way=True)``) labelled the answer so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bcas.grading.metrics import normalize_answer

CORRECT = "correct"
INCORRECT = "incorrect"
NOT_ATTEMPTED = "not_attempted"
GRADES = (CORRECT, INCORRECT, NOT_ATTEMPTED)

# Whole normalised answers that decline (SQuAD-normalised: lower case, no punctuation
# or articles).  Anchored: "unknown soldier" is an answer, "unknown" is not.
DECLINE_PATTERNS = (
    r"unknown",
    r"(?:i )?(?:do not|dont|don t) know",
    r"(?:i )?(?:am )?not sure",
    r"no answer(?: found)?",
    r"n ?a",
    r"none found",
    r"(?:i )?(?:cannot|can not|cant|can t|could not|couldnt|couldn t|was unable to|am unable to|unable to) "
    r"(?:find|determine|answer|tell|say|know)(?: .*)?",
    r"(?:there is )?(?:not enough|insufficient|no) (?:information|evidence|data|context)(?: .*)?",
    r"(?:(?:answer|it|this) )?(?:is )?(?:not|cannot be|can not be|cant be|can t be) "
    r"(?:known|determined|found|given|available|answered)(?: .*)?",
    r"(?:it is )?impossible to (?:say|tell|know|determine|answer)(?: .*)?",
    r"(?:the )?(?:documents|context|passages|search results) (?:do not|dont|does not|doesnt) "
    r"(?:say|mention|contain|provide|state)(?: .*)?",
    r"abstain",
)
_DECLINE = re.compile("^(?:" + "|".join(DECLINE_PATTERNS) + ")$")
_LABELS = {"supports", "refutes", "not enough info", "yes", "no"}


def is_label_task(answers: Sequence[str]) -> bool:
    """Every gold answer is a label (FEVER's three, yes/no): such a task has no abstention."""
    return bool(answers) and all(a.strip().lower() in _LABELS for a in answers)


def declines(prediction: str, answers: Sequence[str] = ()) -> bool:
    """The answer declines to answer (module docstring); a gold alias equal to it is an answer.

    >>> declines("I don't know."), declines("Unknown soldier"), declines("unknown", ["Unknown"])
    (True, False, False)
    """
    if is_label_task(answers):
        return False
    norm = normalize_answer(prediction)
    if not norm or not _DECLINE.match(norm):
        return False
    return all(normalize_answer(a) != norm for a in answers)


def three_way(
    passed: bool | None, prediction: str, answers: Sequence[str], failed: bool = False, abstained: bool = False
) -> str | None:
    """SimpleQA's grade of one answer: not attempted (a decline, or ``abstained``: the explicit
    action or a three-way judge's label), else correct / incorrect by ``passed``; ``None`` when
    the answer is an attempt that was not graded (``passed is None``).  ``failed`` (an error or
    an empty answer) is incorrect."""
    if failed:
        return INCORRECT
    if abstained or declines(prediction, answers):
        return NOT_ATTEMPTED
    if passed is None:
        return None
    return CORRECT if passed else INCORRECT


def simpleqa_scores(correct: int, incorrect: int, not_attempted: int) -> dict[str, float | None]:
    """SimpleQA's summary numbers (Wei et al., 2024, §2) from the three-way counts.

    ``overall_correct`` = correct / all; ``correct_given_attempted`` = correct /
    (correct + incorrect); ``f_score`` = their harmonic mean (0 when both are 0);
    ``not_attempted_rate`` = not attempted / all.  ``None`` where a denominator is 0.

    >>> simpleqa_scores(6, 2, 2)["f_score"]  # 2 * 0.6 * 0.75 / 1.35
    0.6666666666666665
    """
    for name, value in (("correct", correct), ("incorrect", incorrect), ("not_attempted", not_attempted)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    total = correct + incorrect + not_attempted
    attempted = correct + incorrect
    overall = correct / total if total else None
    given = correct / attempted if attempted else None
    if overall is None or given is None:
        f_score = None
    else:
        f_score = 0.0 if overall + given == 0 else 2 * overall * given / (overall + given)
    return {
        "overall_correct": overall,
        "correct_given_attempted": given,
        "f_score": f_score,
        "not_attempted_rate": not_attempted / total if total else None,
    }


__all__ = [
    "CORRECT",
    "DECLINE_PATTERNS",
    "GRADES",
    "INCORRECT",
    "NOT_ATTEMPTED",
    "declines",
    "is_label_task",
    "simpleqa_scores",
    "three_way",
]
