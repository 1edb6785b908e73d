"""Grading: answer metrics (``bcas.grading.metrics``) and the LLM judge (``bcas.grading.judge``).

Exact match and token F1 follow the SQuAD v1.1 conventions the BCAS and MADARA papers
report (BCAS §4.1, MADARA §5.1); MADARA's strict EM (§5.4) lower-cases and collapses
white space only; label tasks are graded by :func:`label_match`; the judge is BCAS §3.6.
"""

from bcas.grading.judge import (
    JUDGE_PROMPT_DIR,
    JUDGE_SCHEMA,
    JUDGE_VERDICTS,
    JudgeAudit,
    JudgeResult,
    LLMJudge,
    grade_record,
    judge_agreement,
    parse_grade,
    parse_verdict,
)
from bcas.grading.metrics import (
    ARTICLES,
    LABEL_SPACES,
    SCORING_RULES,
    Golds,
    ScoringRule,
    exact_match,
    extract_label,
    label_match,
    label_space_for,
    normalize_answer,
    register_scoring_rule,
    score_prediction,
    strict_exact_match,
    strict_normalize,
    strict_token_f1,
    token_f1,
)

__all__ = [
    "ARTICLES",
    "JUDGE_PROMPT_DIR",
    "JUDGE_SCHEMA",
    "JUDGE_VERDICTS",
    "LABEL_SPACES",
    "SCORING_RULES",
    "Golds",
    "JudgeAudit",
    "JudgeResult",
    "LLMJudge",
    "ScoringRule",
    "exact_match",
    "extract_label",
    "grade_record",
    "judge_agreement",
    "parse_grade",
    "label_match",
    "label_space_for",
    "normalize_answer",
    "parse_verdict",
    "register_scoring_rule",
    "score_prediction",
    "strict_exact_match",
    "strict_normalize",
    "strict_token_f1",
    "token_f1",
]
