"""A test double that is wrong on a known share of the items, chosen by a hash of the question.

``load_model("wrong_share", "30")`` (registered by tests and by
``benchmarks/perf/bench_sequential_gate.py`` through :func:`create`) answers like
``mock:gold`` except on the items whose question hashes into the lowest ``30``% of the
hash range: there its final answer is replaced by a wrong one.  The item decides, not the
request, so the same items are wrong in every configuration and every run -- the
regression a sequential gate should catch against ``mock:gold``, of a known size
(:func:`is_wrong` says which items).  ``"30@0.05"`` also waits 0.05 s per call (a run slow
enough to be killed mid-way in a resume test).  It stands in for no capability.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from bcas.llm.base import ChatRequest, ChatResult, ModelError
from bcas.testing.coin import answered_wrong
from bcas.testing.mock import MockModel, _View


def is_wrong(question: str, percent: float) -> bool:
    """Whether the double answers ``question`` wrongly at ``percent`` (0-100) wrong items."""
    digest = hashlib.sha256(" ".join(question.split()).lower().encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < percent / 100.0


class WrongShareModel(MockModel):
    def __init__(self, percent: float, delay: float = 0.0) -> None:
        super().__init__("gold")
        self.delay = delay
        if not 0.0 <= percent <= 100.0:
            raise ModelError(f"wrong_share: the share of wrong items is a percentage in [0, 100], got {percent!r}")
        self.percent = percent
        self.model_id = f"wrong_share:{percent:g}"

    async def chat(self, request: ChatRequest) -> ChatResult:
        if self.delay:
            await asyncio.sleep(self.delay)
        result = await super().chat(request)
        questions = _View(request).questions()
        kind = (result.extra or {}).get("kind")
        if kind not in ("answer", "generate") or not questions or not is_wrong(questions[0], self.percent):
            return result
        return answered_wrong(result)


def create(model: str | None = None, **options: Any) -> WrongShareModel:
    share, _, delay = (model or "30").partition("@")
    try:
        percent, seconds = float(share), float(delay or 0.0)
    except ValueError:
        raise ModelError(
            "wrong_share: the model name is the percentage of wrong items, optionally @seconds per call "
            f"(e.g. 30 or 30@0.05), got {model!r}"
        ) from None
    return WrongShareModel(percent, seconds)
