"""Prompts and schemas shared by the model-backend tests."""

from __future__ import annotations

from typing import Any

from bcas.llm.base import ChatRequest

PARIS_MESSAGES = (
    {"role": "user", "content": "Context: Paris is the capital of France. Question: What is the capital of France?"},
)

ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["search", "answer"]},
        "text": {"type": "string", "maxLength": 40},
    },
    "required": ["action", "text"],
    "additionalProperties": False,
}

LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]}},
    "required": ["label"],
    "additionalProperties": False,
}

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "relevant": {"type": "boolean"},
    },
    "required": ["score", "relevant"],
    "additionalProperties": False,
}

_ACTION_QUESTIONS = [
    "Who wrote Hamlet?",
    "What is the boiling point of water at sea level?",
    "Which planet is the largest in the solar system?",
    "Who painted the Mona Lisa?",
    "In which year did the Second World War end?",
    "What is the chemical symbol for gold?",
    "Which river flows through Cairo?",
]
_CLAIMS = [
    "The Eiffel Tower is in Berlin.",
    "Water is made of hydrogen and oxygen.",
    "The Moon is larger than the Earth.",
    "Mount Everest is the highest mountain above sea level.",
    "Shakespeare was born in 1990.",
    "Bananas are blue.",
    "The Pacific is an ocean.",
]
_DOCUMENTS = [
    ("Who founded Microsoft?", "Microsoft was founded by Bill Gates and Paul Allen in 1975."),
    ("What is the capital of Japan?", "Bananas are rich in potassium."),
    ("When did humans land on the Moon?", "Apollo 11 landed on the Moon in July 1969."),
    ("Who discovered penicillin?", "The Great Wall of China is very long."),
    ("What language is spoken in Brazil?", "Portuguese is the official language of Brazil."),
    ("How many legs does a spider have?", "Spiders are arachnids with eight legs."),
]


def structured_requests(max_tokens: int = 64) -> list[tuple[ChatRequest, dict[str, Any]]]:
    """Twenty varied prompts, each with the schema its answer must satisfy."""
    cases: list[tuple[ChatRequest, dict[str, Any]]] = []
    for question in _ACTION_QUESTIONS:
        messages = [
            {"role": "system", "content": "Decide the next step. Reply with JSON: search for a query, or answer."},
            {"role": "user", "content": question},
        ]
        cases.append((ChatRequest(messages, max_tokens=max_tokens, json_schema=ACTION_SCHEMA), ACTION_SCHEMA))
    for claim in _CLAIMS:
        messages = [{"role": "user", "content": f"Classify the claim as SUPPORTS, REFUTES or NOT ENOUGH INFO: {claim}"}]
        cases.append((ChatRequest(messages, max_tokens=max_tokens, json_schema=LABEL_SCHEMA), LABEL_SCHEMA))
    for question, document in _DOCUMENTS:
        messages = [
            {
                "role": "user",
                "content": f"Rate from 0 to 10 how well the document answers the question.\n"
                f"Question: {question}\nDocument: {document}",
            }
        ]
        cases.append((ChatRequest(messages, max_tokens=max_tokens, json_schema=SCORE_SCHEMA), SCORE_SCHEMA))
    assert len(cases) == 20
    return cases
