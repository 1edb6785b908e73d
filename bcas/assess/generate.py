"""Answer generation from a document set (MADARA §4, §5.3, Appendix N "Generator prompts").

One generator prompt per task type, as template files in ``prompts/``:

- ``generate_factoid.txt``: a short answer phrase (TriviaQA, NQ, multi-hop);
- ``generate_fever.txt``: the label SUPPORTS or REFUTES (FEVER);
- ``generate_yesno.txt``: yes or no (ConflictQA / CONFLICTS, StrategyQA part).

The same prompt serves No-Filter (all retrieved documents), selected-document
generation (after SDA / CoT / ATF / 3-Agent reranking) and per-document
extraction (PDE: one document at a time).  Label tasks use constrained decoding
(``{"answer": <label>}``) when the model supports a JSON schema; their replies
are mapped onto the label set with ``bcas.grading.extract_label`` otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from bcas.assess.agents import AssessDocument, clip_text, render, use_schema
from bcas.assess.usage import Ledger
from bcas.config import AssessConfig
from bcas.grading import LABEL_SPACES, extract_label
from bcas.llm.base import ChatModel, ChatRequest

FEVER_LABELS: tuple[str, ...] = ("SUPPORTS", "REFUTES")
YES_NO_LABELS: tuple[str, ...] = ("yes", "no")

# task -> (system template, question label, answer label, label set or None)
TASK_PROMPTS: dict[str, tuple[str, str, str, tuple[str, ...] | None]] = {
    "factoid": ("generate_factoid", "QUESTION", "ANSWER", None),
    "multi-hop": ("generate_factoid", "QUESTION", "ANSWER", None),
    "fact-verification": ("generate_fever", "CLAIM", "LABEL", FEVER_LABELS),
    "yes-no-conflict": ("generate_yesno", "QUESTION", "ANSWER", YES_NO_LABELS),
}

SCORING_FOR_TASK = {
    "factoid": "qa",
    "multi-hop": "qa",
    "fact-verification": "label",
    "yes-no-conflict": "label",
}


def task_of(config: AssessConfig, dataset_task: str | None = None) -> str:
    """The generator's task for every item of a case: ``AssessConfig.task`` when set, else
    the dataset's (its declared task, or the one inferred once over its whole file by
    :func:`bcas.formats.infer_task`), else ``factoid``.

    Never an item's own gold answer: a prompt chosen per item from its gold would tell the
    model what kind of answer is right (MADARA §5.3 names one generator prompt per dataset).
    """
    task = config.task or dataset_task or "factoid"
    if task not in TASK_PROMPTS:
        raise ValueError(f"unknown task {task!r}; known: {sorted(TASK_PROMPTS)}")
    return task


def answer_schema(labels: tuple[str, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(labels)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def generation_messages(
    question: str, documents: Sequence[AssessDocument], task: str, config: AssessConfig
) -> list[dict[str, str]]:
    """System + user messages of the generator for ``task`` over ``documents``."""
    try:
        template, q_label, a_label, _ = TASK_PROMPTS[task]
    except KeyError:
        raise ValueError(f"unknown task {task!r}; known: {sorted(TASK_PROMPTS)}") from None
    blocks = [
        f"[{n}] {d.title}: {clip_text(d.text, config.doc_chars)}"
        if d.title
        else f"[{n}] {clip_text(d.text, config.doc_chars)}"
        for n, d in enumerate(documents, start=1)
    ]
    user = render(
        "generate_user",
        documents="\n".join(blocks) if blocks else "(none)",
        question_label=q_label,
        question=question,
        answer_label=a_label,
    )
    return [{"role": "system", "content": render(template)}, {"role": "user", "content": user}]


_PARTIAL_ANSWER = re.compile(r'"answer"\s*:\s*"([^"]*)$')
_PREFIX = re.compile(r"^\s*(?:final\s+)?(?:answer|label)\s*[:\-]\s*", re.IGNORECASE)


def parse_answer(text: str, task: str) -> str:
    """The answer in a generator reply: a canonical label for label tasks, else a cleaned phrase."""
    labels = TASK_PROMPTS[task][3]
    raw = (text or "").strip()
    if labels is not None:
        try:
            obj = json.loads(raw)
            if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
                raw = obj["answer"]
        except json.JSONDecodeError:
            pass
        space = LABEL_SPACES["fever" if task == "fact-verification" else "yes_no"]
        found = extract_label(raw, {k: v for k, v in space.items() if k in labels})
        if found is not None:
            return found
        # A constrained reply cut at max_tokens ('{"answer": "SUPP') still names the
        # one label its partial value is a prefix of.
        partial = _PARTIAL_ANSWER.search(raw)
        if partial and partial.group(1).strip():
            matches = [lab for lab in labels if lab.lower().startswith(partial.group(1).strip().lower())]
            if len(matches) == 1:
                return matches[0]
        return raw.splitlines()[0].strip() if raw else ""
    line = next((ln for ln in raw.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line).strip()
    return _unwrap(line)


def _unwrap(phrase: str) -> str:
    """``phrase`` without the quotes, emphasis marks and final full stops around it.

    Repeated until nothing changes, because the wrappers nest in either order: the
    full stop of ``**Paris**.`` sits outside the emphasis, that of ``"Paris."`` inside
    the quotes.  Strict EM (MADARA §5.4) keeps punctuation, so a leftover ``**``
    would make a right answer wrong.
    """
    while True:
        stripped = phrase.strip(" \"'`*").rstrip(".").strip()
        if stripped == phrase:
            return phrase
        phrase = stripped


async def generate_answer(
    model: ChatModel,
    question: str,
    documents: Sequence[Any],
    task: str,
    config: AssessConfig,
    ledger: Ledger,
    tag: str = "",
) -> tuple[str, str]:
    """One generation call; returns ``(answer, raw reply)``."""
    docs = [AssessDocument.from_any(d) for d in documents]
    labels = TASK_PROMPTS[task][3]
    request = ChatRequest(
        messages=generation_messages(question, docs, task, config),
        max_tokens=config.answer_max_tokens,
        temperature=config.temperature,
        json_schema=answer_schema(labels) if labels is not None and use_schema(model, config) else None,
    )
    result = await ledger.chat(model, request, "generation", tag=tag)
    return parse_answer(result.text, task), result.text
