"""Scripted answers for abstention and reliability tests (control flow, never capability).

Built on :class:`bcas.testing.instant.InstantModel` (one search with the question, then an
answer).  The answer depends on the project number ``i`` in the question ("... codename
of project {i}?", as :func:`bcas.testing.project.codename_items` writes it):

- ``decliner`` (the default model name): ``i % 3 == 0`` declines ("I don't know"),
  ``i % 3 == 1`` answers wrongly ("beta"), otherwise right ("alpha");
- ``seeded``: right when a hash of (``i``, the request's sampling seed) is not a multiple
  of 3 (:func:`seeded_right`), so an item's outcome changes between epochs (each epoch
  samples with its own seed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

from bcas.llm.base import ChatRequest, ChatResult
from bcas.testing.instant import InstantModel

DECLINE = "I don't know"


def seeded_right(i: int, seed: int) -> bool:
    return hashlib.sha256(f"y{i}:{seed}".encode()).digest()[0] % 3 != 0


class DeclinerModel(InstantModel):
    def __init__(self, model: str | None = None, **options: object) -> None:
        super().__init__(model, **options)
        self.mode = model or "decliner"
        self.model_id = f"scripted-{self.mode}"

    async def chat(self, request: ChatRequest) -> ChatResult:
        result = await super().chat(request)
        schema = (request.json_schema or {}).get("properties", {})
        if "answer" not in schema:
            return result
        prompt = " ".join(m["content"] for m in request.messages)
        i = int(re.findall(r"codename of project (\d+)\?", prompt)[0])
        if self.mode == "seeded":
            answer = "alpha" if seeded_right(i, request.seed) else "beta"
        else:
            answer = (DECLINE, "beta", "alpha")[i % 3]
        return dataclasses.replace(result, text=json.dumps({"answer": answer}))


def create(model: str | None = None, **options: object) -> DeclinerModel:
    return DeclinerModel(model, **options)
