"""A test double whose answers are right on some requests and wrong on others, by a hash of the request.

It is the ``mock`` backend's ``gold`` variant (registered by tests through :func:`create`),
except that a final answer is replaced by a wrong one when a hash of the whole request
(every message) is odd.  The request differs
between configurations (the status line names the searches left, planning adds a plan),
so an item's outcome flips between configurations in both directions: what a report's
flip filter is for.  It stands in for no capability.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from bcas.llm.base import ChatRequest, ChatResult
from bcas.testing.mock import MockModel

WRONG = "nobody knows"


class CoinModel(MockModel):
    def __init__(self) -> None:
        super().__init__("gold")
        self.model_id = "coin:gold"

    async def chat(self, request: ChatRequest) -> ChatResult:
        result = await super().chat(request)
        blob = json.dumps(list(request.messages), sort_keys=True, default=str).encode()
        if (result.extra or {}).get("kind") not in ("answer", "generate") or hashlib.sha256(blob).digest()[0] % 2 == 0:
            return result
        return answered_wrong(result)


def answered_wrong(result: ChatResult) -> ChatResult:
    """``result`` with its answer replaced by WRONG, in the reply's own shape (a JSON action or
    an ``Answer:`` line): the coin's and the wrong-share double's one rewrite."""
    try:
        reply = json.loads(result.text)
    except ValueError:
        reply = None
    if isinstance(reply, dict) and "answer" in reply:
        text = json.dumps({**reply, "answer": WRONG})
    else:
        text = f"Answer: {WRONG}"
    return dataclasses.replace(result, text=text)


def create(model: str | None = None, **options: Any) -> CoinModel:
    return CoinModel()
