"""The LLM judge (BCAS §3.6).

BCAS grades answers with a binary LLM judge: it "receives the question, reference
answer, and model answer, and outputs a correct/incorrect label under a constrained
rubric" (§3.6).  The judge model is any ChatModel (it may differ from the evaluated
model, e.g. an OpenAI-compatible endpoint); calls go through that model, so the
generation cache of ``load_model`` applies.  Its token usage is kept in its own
JudgeResult, never added to the agent's ledger.  An unreadable verdict is retried
with a short reminder and, if still unreadable, recorded as ``None`` with a reason:
it is never counted as wrong.  ``repeats=n`` asks n times (seeds 0..n-1) and records
how often the repeats agree, so judge variance is known before a CI gate relies on
it; at temperature 0 a deterministic backend agrees with itself by construction, so
measure variance with ``temperature > 0``.

``three_way=True`` grades as SimpleQA does (Wei et al., 2024, §2): *correct*,
*incorrect* or *not attempted* (an answer that declines without stating a wrong
one), under its own prompt templates (``judge_three_way*.txt``, a grade of its own:
:func:`bcas.identity.grade_id`).  The label is kept (``JudgeResult.label``) and the
verdict is ``label == "correct"``, so the pass/fail metrics read it like any verdict
and :mod:`bcas.grading.abstention` counts the not-attempted ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from bcas.grading.metrics import NEGATORS
from bcas.prompts import prompt_template

JUDGE_PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
JUDGE_VERDICTS = ("correct", "incorrect")
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": list(JUDGE_VERDICTS)}},
    "required": ["verdict"],
    "additionalProperties": False,
}

JUDGE_GRADES = ("correct", "incorrect", "not_attempted")
THREE_WAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"grade": {"type": "string", "enum": list(JUDGE_GRADES)}},
    "required": ["grade"],
    "additionalProperties": False,
}
_NOT_ATTEMPTED = re.compile(r"\bnot[\s_-]*attempted\b|\bnotattempted\b", re.IGNORECASE)

_NEGATIVE_WORDS = frozenset({"incorrect", "wrong", "false", "no", "incorrectly", "inaccurate", "unacceptable"})
_POSITIVE_WORDS = frozenset({"correct", "right", "true", "yes", "correctly", "accurate", "acceptable"})


def _judge_template(name: str) -> Template:
    return prompt_template("bcas.grading", name)


def _json_fields(text: str) -> dict[str, Any] | None:
    """The JSON object between the reply's first ``{`` and last ``}``, its keys lower-cased (else None)."""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        return None
    try:
        obj = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    return {str(k).lower(): v for k, v in obj.items()} if isinstance(obj, dict) else None


def parse_verdict(text: str) -> bool | None:
    """``True`` (correct), ``False`` (incorrect) or ``None`` (no clear verdict) from a judge reply.

    Reads a JSON ``{"verdict": ...}`` object first; otherwise the first word when it
    is a verdict word (``Correct.``, ``incorrect``, ``Yes``); otherwise the verdict
    words in the text, which must all agree; a verdict word within two words after a
    negation is negated (``isn't correct``, ``doesn't look correct`` read as incorrect).
    """
    lowered = _json_fields(text)
    if lowered is not None:
        for key in ("verdict", "label", "grade", "judgement", "judgment", "result"):
            value = lowered.get(key)
            if isinstance(value, bool):
                return value
            if isinstance(value, str):
                found = parse_verdict(value) if "{" not in value else None
                if found is not None:
                    return found
    # Apostrophes join contractions ("isn't" -> "isnt"), as the label reading does.
    words = re.findall(r"[a-z]+", re.sub("['\u2019]", "", text.lower()))
    if not words:
        return None
    if words[0] in ("verdict", "answer", "grade", "label") and len(words) > 1:
        words = words[1:]
    first = words[0]
    if first == "not" and len(words) > 1 and words[1] in ("correct", "right", "accurate"):
        return False
    # "yes"/"no" count only as the whole reply ("No idea" is not a verdict).
    if first in _NEGATIVE_WORDS and (first != "no" or len(words) == 1):
        return False
    if first in _POSITIVE_WORDS and (first != "yes" or len(words) == 1):
        return True
    verdicts: set[bool] = set()
    for i, word in enumerate(words):
        if word in ("incorrect", "wrong", "incorrectly", "inaccurate"):
            verdicts.add(False)
        elif word in ("correct", "correctly", "accurate"):
            negated = any(w in NEGATORS for w in words[max(0, i - 2) : i])
            verdicts.add(not negated)
    return verdicts.pop() if len(verdicts) == 1 else None


def parse_grade(text: str) -> str | None:
    """``"correct"``, ``"incorrect"``, ``"not_attempted"`` or ``None`` from a three-way judge reply.

    A JSON ``{"grade": ...}`` (or ``verdict``/``label``) object first; otherwise the text:
    *not attempted* when it says so and names no other verdict (``not attempted`` is not
    read as ``not correct``), else the binary reading of :func:`parse_verdict`.

    >>> parse_grade('{"grade": "not_attempted"}'), parse_grade("Incorrect."), parse_grade("not attempted")
    ('not_attempted', 'incorrect', 'not_attempted')
    """
    lowered = _json_fields(text)
    for key in ("grade", "verdict", "label", "result"):
        value = (lowered or {}).get(key)
        if isinstance(value, str) and "{" not in value:
            found = parse_grade(value)
            if found is not None:
                return found
    if _NOT_ATTEMPTED.search(text):
        rest = _NOT_ATTEMPTED.sub(" ", text)
        return "not_attempted" if parse_verdict(rest) is None else None
    verdict = parse_verdict(text)
    return None if verdict is None else ("correct" if verdict else "incorrect")


@dataclass
class JudgeResult:
    """The judge's verdict on one answer, with its repeats and its own usage.

    ``verdict``: majority of the readable repeats (``None`` when no repeat was
    readable or they tie; ``reason`` says which).  ``agreement``: share of readable
    repeats that agree with the majority.  ``tokens_in``/``tokens_out``/``llm_calls``
    are the judge's, kept apart from the agent's.
    """

    verdict: bool | None
    verdicts: list[bool | None]
    model: str
    agreement: float | None = None
    reason: str | None = None
    outputs: list[str] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    llm_calls: int = 0
    cached_calls: int = 0
    label: str | None = None  # three-way judge: the majority grade (JUDGE_GRADES)
    labels: list[str | None] | None = None  # three-way judge: each repeat's grade

    def to_dict(self) -> dict[str, Any]:
        three = {} if self.labels is None else {"label": self.label, "labels": list(self.labels)}
        return three | {
            "verdict": self.verdict,
            "verdicts": list(self.verdicts),
            "model": self.model,
            "repeats": len(self.verdicts),
            "agreement": self.agreement,
            "reason": self.reason,
            "outputs": list(self.outputs),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "llm_calls": self.llm_calls,
            "cached_calls": self.cached_calls,
        }


class LLMJudge:
    """Binary correct/incorrect judge under a constrained rubric (BCAS §3.6).

    ``model``: any ``ChatModel``.  ``repeats``: how many times to ask (seeds
    ``seed .. seed+repeats-1``).  ``retries``: extra attempts per repeat when the
    reply has no readable verdict.  ``use_schema``: decode under
    ``{"verdict": "correct"|"incorrect"}`` (default: when the backend supports it);
    otherwise the reply is read tolerantly (:func:`parse_verdict`).
    """

    def __init__(
        self,
        model: Any,
        repeats: int = 1,
        max_tokens: int = 16,
        *,
        retries: int = 1,
        temperature: float = 0.0,
        seed: int = 0,
        use_schema: bool | None = None,
        three_way: bool = False,
    ) -> None:
        if repeats < 1 or retries < 0 or max_tokens < 1:
            raise ValueError("repeats and max_tokens must be >= 1 and retries >= 0")
        self.model = model
        self.repeats = repeats
        self.max_tokens = max_tokens
        self.retries = retries
        self.temperature = temperature
        self.seed = seed
        supports = bool(getattr(model, "supports_json_schema", False))
        self.use_schema = supports if use_schema is None else (use_schema and supports)
        self.model_id = str(getattr(model, "model_id", "unknown"))
        self.three_way = three_way
        self.max_tokens = max(max_tokens, 24) if three_way else max_tokens  # '{"grade": "not_attempted"}'

    def _format(self) -> str:
        if self.three_way:
            return _judge_template(f"judge_three_way_format_{'json' if self.use_schema else 'text'}").template
        return _judge_template("judge_format_json" if self.use_schema else "judge_format_text").template

    def messages(self, question: str, references: Sequence[str], answer: str) -> list[dict[str, str]]:
        refs = "; ".join(f'"{r}"' for r in references)
        prompt = _judge_template("judge_three_way" if self.three_way else "judge").substitute(
            question=question, references=refs, answer=answer, format=self._format()
        )
        return [{"role": "user", "content": prompt}]

    async def _ask(self, messages: list[dict[str, str]], seed: int, result: JudgeResult) -> str:
        from bcas.llm.base import ChatRequest

        request = ChatRequest(
            messages=tuple(messages),
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            seed=seed,
            json_schema=(THREE_WAY_SCHEMA if self.three_way else JUDGE_SCHEMA) if self.use_schema else None,
        )
        reply = await self.model.chat(request)
        result.tokens_in += int(reply.prompt_tokens)
        result.tokens_out += int(reply.completion_tokens)
        result.llm_calls += 1
        result.cached_calls += int(bool(reply.cached))
        return str(reply.text)

    async def judge(self, question: str, references: Sequence[str], answer: str) -> JudgeResult:
        """Judge ``answer``; an empty answer is incorrect without asking the model."""
        result = JudgeResult(verdict=None, verdicts=[], model=self.model_id)
        if not answer.strip():
            result.verdict = False
            result.verdicts = [False]
            result.agreement = 1.0
            result.reason = "empty answer (not sent to the judge)"
            if self.three_way:
                result.label, result.labels = "incorrect", ["incorrect"]
            return result
        base = self.messages(question, references, answer)
        retry_text = _judge_template("judge_retry").substitute(format=self._format())
        failures: list[str] = []
        labels: list[str | None] = []
        for r in range(self.repeats):
            messages = list(base)
            verdict: bool | None = None
            label: str | None = None
            text = ""
            for attempt in range(self.retries + 1):
                try:
                    text = await self._ask(messages, self.seed + r, result)
                except Exception as exc:  # a failing judge leaves the verdict unknown, never "wrong"
                    failures.append(f"{type(exc).__name__}: {exc}")
                    break
                if self.three_way:
                    label = parse_grade(text)
                    verdict = None if label is None else label == "correct"
                else:
                    verdict = parse_verdict(text)
                if verdict is not None:
                    break
                if attempt < self.retries:
                    messages = [*base, {"role": "assistant", "content": text}, {"role": "user", "content": retry_text}]
            result.verdicts.append(verdict)
            result.outputs.append(text)
            labels.append(label)
        if self.three_way:
            return self._majority_grade(result, labels, failures)
        readable = [v for v in result.verdicts if v is not None]
        if not readable:
            if failures:
                result.reason = f"judge call failed: {failures[-1]}"
            else:
                result.reason = f"no readable verdict after {self.retries + 1} attempt(s) per repeat"
            return result
        yes = sum(readable)
        no = len(readable) - yes
        result.agreement = max(yes, no) / len(readable)
        if yes == no:
            result.reason = f"repeats tie ({yes} correct, {no} incorrect)"
            return result
        result.verdict = yes > no
        return result

    def _majority_grade(self, result: JudgeResult, labels: list[str | None], failures: list[str]) -> JudgeResult:
        """The three-way result: the most frequent readable grade (a tie leaves it ``None``)."""
        result.labels = labels
        readable = [g for g in labels if g is not None]
        if not readable:
            attempts = f"no readable grade after {self.retries + 1} attempt(s) per repeat"
            result.reason = f"judge call failed: {failures[-1]}" if failures else attempts
            return result
        counts = sorted(((readable.count(g), g) for g in JUDGE_GRADES if g in readable), reverse=True)
        result.agreement = counts[0][0] / len(readable)
        if len(counts) > 1 and counts[0][0] == counts[1][0]:
            result.reason = "repeats tie (" + ", ".join(f"{n} {g}" for n, g in counts) + ")"
            return result
        result.label = counts[0][1]
        result.verdict = result.label == "correct"
        return result


@dataclass
class JudgeAudit:
    """Agreement between the LLM judge and exact match over a set of records."""

    n_records: int
    n_judged: int
    n_unreadable: int
    agree: int
    agreement: float | None
    judge_only_correct: int
    em_only_correct: int
    cohen_kappa: float | None
    judge_accuracy: float | None
    em_accuracy: float | None
    mean_repeat_agreement: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def judge_agreement(records: Iterable[Any]) -> JudgeAudit:
    """Audit judge verdicts against exact match (BCAS §3.6's audit, automated).

    ``records``: ``bcas.records.Record`` objects or their dicts.  Records without a
    judge verdict count as unreadable when a judge ran, and are left out of the
    agreement figures.  ``judge_only_correct``: judge says correct, EM says wrong
    (usually a verbose or aliased answer); ``em_only_correct``: the reverse.
    """
    rows = [r if isinstance(r, dict) else r.to_dict() for r in records]
    pairs: list[tuple[bool, bool]] = []
    unreadable = 0
    repeat_agreements: list[float] = []
    for row in rows:
        judge = row.get("judge") or {}
        if judge.get("agreement") is not None and judge.get("repeats", 1) > 1:
            repeat_agreements.append(float(judge["agreement"]))
        verdict = row.get("judge_verdict")
        if verdict is None:
            if judge:
                unreadable += 1
            continue
        pairs.append((bool(verdict), bool(row.get("correct_em"))))
    n = len(pairs)
    agree = sum(1 for j, e in pairs if j == e)
    judge_only = sum(1 for j, e in pairs if j and not e)
    em_only = sum(1 for j, e in pairs if e and not j)
    kappa = None
    if n:
        p_j = sum(j for j, _ in pairs) / n
        p_e = sum(e for _, e in pairs) / n
        expected = p_j * p_e + (1 - p_j) * (1 - p_e)
        observed = agree / n
        kappa = 1.0 if expected == 1.0 else (observed - expected) / (1 - expected)
    return JudgeAudit(
        n_records=len(rows),
        n_judged=n,
        n_unreadable=unreadable,
        agree=agree,
        agreement=agree / n if n else None,
        judge_only_correct=judge_only,
        em_only_correct=em_only,
        cohen_kappa=kappa,
        judge_accuracy=sum(j for j, _ in pairs) / n if n else None,
        em_accuracy=sum(e for _, e in pairs) / n if n else None,
        mean_repeat_agreement=sum(repeat_agreements) / len(repeat_agreements) if repeat_agreements else None,
    )


async def grade_record(record: Any, judge: LLMJudge, grade_id: str | None) -> Any:
    """The record with the judge's grade added under ``grade_id`` (BCAS §3.6).

    A record keeps every grade it was given (``record.grades``: grade id -> the judge's
    result), so another judge adds a grade instead of replacing the answer; ``judge``
    and ``judge_verdict`` show the newest one.  The answer itself is untouched.  An
    errored item is graded ``None`` ("no answer"), never sent to the judge.
    """
    if record.error is not None:
        details: dict[str, Any] = {
            "verdict": None,
            "reason": "the item ended in error; nothing to judge",
            "model": getattr(judge.model, "model_id", ""),
            "repeats": 0,
        }
    else:
        result = await judge.judge(record.question, list(record.answers), record.prediction)
        details = result.to_dict()
    details["grade_id"] = grade_id
    grades = {**(record.grades or {}), str(grade_id): details}
    return record.replace(judge=details, judge_verdict=details.get("verdict"), grades=grades)
