"""The three assessment agents and their score matrix (MADARA §4, §5.3, Appendix N).

Each agent (Relevance Assessor, Consistency Verifier, Conflict Detector) scores
every retrieved document 0-5 in its own call, given the question, the document
and, for the consistency and conflict checks, short excerpts of the other
retrieved documents.  All 3 x m calls run concurrently (``asyncio.gather``).

Two prompt sets, one template file per agent in ``prompts/``:

- base (``relevance.txt`` ...): JSON ``{"score", "reason"}``;
- CoT de-polarisation (``relevance_cot.txt`` ..., MADARA §4.1, Appendix N):
  five explicit reasoning steps before the score; JSON
  ``{"reasoning_steps": [5 strings], "score", "confidence": 1-5}``.

When the model supports it (``ChatModel.supports_json_schema``) and
``AssessConfig.json_schema`` is on, decoding is constrained to the JSON schema of
the prompt.  Output is parsed tolerantly (``parse_score``): a score is taken from
valid JSON, else from recognisable fragments (``"score": 4``, ``Score: 4``,
``4/5``, a bare number); anything else is a *missing* score with a reason, never
a silent 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import string
from dataclasses import dataclass, field
from typing import Any

from bcas.assess.usage import Ledger
from bcas.config import AssessConfig
from bcas.llm.base import ChatModel, ChatRequest, ModelError
from bcas.prompts import prompt_template

AGENTS: tuple[str, ...] = ("relevance", "consistency", "conflict")
"""Agent names in score-matrix column order (weights (0.4, 0.3, 0.3) follow it)."""

AGENT_TITLES = {
    "relevance": "Relevance Assessor",
    "consistency": "Consistency Verifier",
    "conflict": "Conflict Detector",
}

# Agents that see excerpts of the other documents.
CROSS_DOCUMENT_AGENTS = frozenset({"consistency", "conflict"})

N_REASONING_STEPS = 5

# Default bound (AssessConfig.cot_step_chars) on each reasoning step / reason string
# under constrained decoding, so five steps and the score fit in AssessConfig.max_tokens.
STEP_MAX_CHARS = 100


def load_template(name: str) -> string.Template:
    """A prompt template from ``bcas/assess/prompts/<name>.txt`` ($-placeholders), as written."""
    return prompt_template("bcas.assess", name, strip=False)


def render(name: str, **values: str) -> str:
    return load_template(name).substitute(**values).strip()


@dataclass(frozen=True)
class AssessDocument:
    """One unit the agents score: an item document or a retrieval hit (chunk)."""

    doc_id: str
    title: str
    text: str
    chunk_id: str | None = None
    retrieval_score: float | None = None
    padded: bool = False  # not retrieved: filled in from the collection (AssessConfig.pad_docs)

    @classmethod
    def from_any(cls, obj: Any) -> AssessDocument:
        """From a ``bcas.data.Document``, a retrieval ``Hit`` or a mapping."""
        if isinstance(obj, AssessDocument):
            return obj
        if isinstance(obj, dict):
            get = obj.get
        else:

            def get(key: str, default: Any = None) -> Any:
                return getattr(obj, key, default)

        doc_id = get("doc_id") or get("id")
        if doc_id is None:
            raise TypeError(f"cannot read a document id from {type(obj).__name__}")
        return cls(str(doc_id), str(get("title", "") or ""), str(get("text", "")), get("chunk_id"), get("score"))


# --------------------------------------------------------------------------- parsing


@dataclass
class ParsedScore:
    """An agent's parsed output.  ``score`` is None when missing; ``missing_reason`` says why."""

    score: float | None
    missing_reason: str | None = None
    reasoning_steps: list[str] = field(default_factory=list)
    confidence: float | None = None
    rationale: str = ""
    how: str = ""  # json | fragment | bare-number | none


_NUM = r"(-?\d+(?:\.\d+)?)"
_SCORE_KEY = re.compile(r"[\"']?\b(?:score|rating)\b[\"']?\s*[:=]\s*[\"']?" + _NUM, re.IGNORECASE)
_SCORE_WORDS = re.compile(r"\b(?:score|rating)\b(?:\s+(?:is|of|would be|=|:))*\s*\**\s*" + _NUM, re.IGNORECASE)
_OUT_OF_FIVE = re.compile(_NUM + r"\s*(?:/|out of)\s*5\b", re.IGNORECASE)
_BARE = re.compile(r"^\W*" + _NUM + r"\W*$")
_CONFIDENCE = re.compile(r"[\"']?\bconfidence\b[\"']?\s*[:=]\s*[\"']?" + _NUM, re.IGNORECASE)
_STEPS_ARRAY = re.compile(r'"reasoning_steps"\s*:\s*\[(.*?)(?:\]|$)', re.IGNORECASE | re.DOTALL)
_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_NUMBERED_LINE = re.compile(r"^\s*(?:step\s*)?\d+[.):]\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def _first_json_object(text: str) -> dict[str, Any] | None:
    """The first decodable JSON object in ``text`` (skips leading prose, trailing junk)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = re.search(_NUM, value)
        return float(m.group(1)) if m else None
    return None


def _in_range(value: float, how: str) -> ParsedScore:
    if 0.0 <= value <= 5.0:
        return ParsedScore(value, how=how)
    return ParsedScore(None, f"score {value:g} is outside 0-5", how=how)


def parse_score(text: str) -> ParsedScore:
    """Tolerant parse of an agent's reply; see the module docstring for the order tried."""
    raw = text or ""
    obj = _first_json_object(raw)
    steps: list[str] = []
    confidence: float | None = None
    rationale = ""
    result: ParsedScore | None = None
    if obj is not None:
        lowered = {str(k).lower(): v for k, v in obj.items()}
        raw_steps = lowered.get("reasoning_steps")
        if isinstance(raw_steps, list):
            steps = [str(s).strip() for s in raw_steps if str(s).strip()]
        elif isinstance(raw_steps, str) and raw_steps.strip():
            steps = [raw_steps.strip()]
        confidence = _as_number(lowered.get("confidence"))
        rationale = str(lowered.get("reason", "") or "")
        for key in ("score", "rating"):
            if key in lowered:
                value = _as_number(lowered[key])
                if value is not None:
                    result = _in_range(value, "json")
                    break
    if not steps:
        m = _STEPS_ARRAY.search(raw)
        if m:
            steps = [json.loads(f'"{s}"') if "\\" in s else s for s in _JSON_STRING.findall(m.group(1))]
            steps = [s.strip() for s in steps if s.strip()]
        elif obj is None:
            steps = [s.strip() for s in _NUMBERED_LINE.findall(raw) if s.strip()]
    if confidence is None:
        m = _CONFIDENCE.search(raw)
        confidence = float(m.group(1)) if m else None
    if result is None:
        for pattern, how in (
            (_SCORE_KEY, "fragment"),
            (_SCORE_WORDS, "fragment"),
            (_OUT_OF_FIVE, "fragment"),
            (_BARE, "bare-number"),
        ):
            m = pattern.search(raw)
            if m:
                result = _in_range(float(m.group(1)), how)
                break
    if result is None:
        reason = "empty output" if not raw.strip() else "no score found in output"
        if obj is not None:
            reason = "JSON object without a numeric 'score'"
        result = ParsedScore(None, reason, how="none")
    result.reasoning_steps = steps
    result.confidence = confidence
    result.rationale = rationale
    return result


# --------------------------------------------------------------------------- schemas


def score_schema(cot: bool, step_chars: int = STEP_MAX_CHARS) -> dict[str, Any]:
    """JSON schema of an agent's reply (constrained decoding).

    Property order is decoding order under constrained decoding (a backend that sorts
    properties keeps reasoning before the score: ``confidence``, ``reasoning_steps``,
    ``score``): base replies require
    only ``score``, so it comes before the optional ``reason`` and survives
    truncation; CoT replies require ``reasoning_steps``, ``score`` and ``confidence``
    (in that order: reasoning before the score, MADARA §4.1; the CoT prompt asks for
    all three, Appendix N, so the schema does too).
    """
    score = {"type": "integer", "enum": [0, 1, 2, 3, 4, 5]}
    if cot:
        return {
            "type": "object",
            "properties": {
                "reasoning_steps": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": step_chars},
                    "minItems": N_REASONING_STEPS,
                    "maxItems": N_REASONING_STEPS,
                },
                "score": score,
                "confidence": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
            },
            "required": ["reasoning_steps", "score", "confidence"],
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": {"score": score, "reason": {"type": "string", "maxLength": step_chars}},
        "required": ["score"],
        "additionalProperties": False,
    }


RESCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": [0, 1, 2, 3, 4, 5]}},
    "required": ["score"],
    "additionalProperties": False,
}


def use_schema(model: ChatModel, config: AssessConfig) -> bool:
    return bool(config.json_schema and getattr(model, "supports_json_schema", False))


# --------------------------------------------------------------------------- prompts


def clip_text(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."


def others_block(docs: list[AssessDocument], index: int, excerpt_chars: int) -> str:
    others = [d for j, d in enumerate(docs) if j != index]
    if not others:
        return ""
    lines = [f"[{n}] {clip_text(d.text, excerpt_chars)}" for n, d in enumerate(others, start=1)]
    return "\n" + render("others_block", others="\n".join(lines))


def _document_fields(
    agent: str, question: str, docs: list[AssessDocument], index: int, config: AssessConfig
) -> dict[str, str]:
    """The user template's fields for ``docs[index]``: question, title, clipped text, other documents' excerpts."""
    doc = docs[index]
    return {
        "question": question,
        "title": doc.title or "untitled",
        "document": clip_text(doc.text, config.doc_chars),
        "others_block": others_block(docs, index, config.excerpt_chars) if agent in CROSS_DOCUMENT_AGENTS else "",
    }


def assessment_messages(
    agent: str, question: str, docs: list[AssessDocument], index: int, config: AssessConfig, cot: bool
) -> list[dict[str, str]]:
    """System and user messages for one agent scoring ``docs[index]``."""
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; agents are {AGENTS}")
    user = render("assess_user", **_document_fields(agent, question, docs, index, config))
    system = render(f"{agent}_cot" if cot else agent)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def rescore_messages(
    agent: str, question: str, docs: list[AssessDocument], index: int, reasoning: str, config: AssessConfig
) -> list[dict[str, str]]:
    """Messages asking an agent for a score given (possibly perturbed) reasoning (MADARA §3.1)."""
    fields = _document_fields(agent, question, docs, index, config)
    user = render("rescore_user", **fields, reasoning=reasoning.strip() or "(none)")
    return [{"role": "system", "content": render(f"{agent}_cot")}, {"role": "user", "content": user}]


# --------------------------------------------------------------------------- calls


@dataclass
class AgentScore:
    """One agent's verdict on one document."""

    agent: str
    doc_index: int
    score: float | None
    missing_reason: str | None
    reasoning_steps: list[str]
    confidence: float | None
    rationale: str
    raw: str
    how: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Assessment:
    """The m x 3 score matrix of one query plus every agent's reasoning."""

    documents: list[AssessDocument]
    cot: bool
    verdicts: list[AgentScore]

    @property
    def matrix(self) -> list[list[float | None]]:
        """Scores by [document][agent] in ``AGENTS`` order; ``None`` where missing."""
        out: list[list[float | None]] = [[None] * len(AGENTS) for _ in self.documents]
        for v in self.verdicts:
            out[v.doc_index][AGENTS.index(v.agent)] = v.score
        return out

    @property
    def reasoning(self) -> list[dict[str, list[str]]]:
        """Reasoning chains by [document][agent name] (empty lists for base prompts)."""
        out: list[dict[str, list[str]]] = [{} for _ in self.documents]
        for v in self.verdicts:
            out[v.doc_index][v.agent] = v.reasoning_steps
        return out

    @property
    def missing(self) -> list[dict[str, Any]]:
        return [
            {"doc_index": v.doc_index, "agent": v.agent, "reason": v.missing_reason}
            for v in self.verdicts
            if v.score is None
        ]


async def score_one(
    model: ChatModel,
    ledger: Ledger,
    agent: str,
    question: str,
    docs: list[AssessDocument],
    index: int,
    config: AssessConfig,
    cot: bool,
) -> AgentScore:
    """One agent call; a model error becomes a missing score with the error as reason."""
    request = ChatRequest(
        messages=assessment_messages(agent, question, docs, index, config, cot),
        max_tokens=config.max_tokens if cot else config.score_max_tokens,
        temperature=config.temperature,
        json_schema=score_schema(cot, config.cot_step_chars) if use_schema(model, config) else None,
    )
    try:
        result = await ledger.chat(model, request, "assessment", tag=f"{agent}:{index}")
    except ModelError as exc:
        return AgentScore(agent, index, None, f"model error: {exc}", [], None, "", "", "none")
    parsed = parse_score(result.text)
    reason = parsed.missing_reason
    if parsed.score is None and result.finish_reason == "length":
        reason = f"{reason} (output cut at max_tokens)"
    return AgentScore(
        agent,
        index,
        parsed.score,
        reason,
        parsed.reasoning_steps,
        parsed.confidence,
        parsed.rationale,
        result.text,
        parsed.how,
    )


async def score_documents(
    model: ChatModel,
    question: str,
    documents: list[Any],
    config: AssessConfig,
    *,
    cot: bool = False,
    ledger: Ledger | None = None,
    agents: tuple[str, ...] = AGENTS,
) -> Assessment:
    """All agents score all documents concurrently; returns the m x 3 ``Assessment``."""
    docs = [AssessDocument.from_any(d) for d in documents]
    ledger = ledger if ledger is not None else Ledger()
    calls = [score_one(model, ledger, a, question, docs, i, config, cot) for i in range(len(docs)) for a in agents]
    verdicts = list(await asyncio.gather(*calls))
    return Assessment(docs, cot, verdicts)
