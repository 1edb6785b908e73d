"""A paced test double for control flow: the ``mock`` backend's ``random`` variant, cached, with a delay.

Unlike ``mock`` (never cached: recomputing is cheaper than a lookup), its results go
through the generation cache like a real model's, so a run warms the cache that
``--bcas-estimate`` replays.  ``BCAS_PACED_DELAY`` (seconds, default 0) is slept before
each reply, so a case lasts long enough for the terminal to show it running, and reported
as the call's latency, as a served model's wait would be.  It stands in for no capability:
the answers are the mock's seeded random spans.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

from bcas.llm.base import ChatRequest, ChatResult
from bcas.testing.mock import MockModel
from bcas.timing import record_call


class PacedModel(MockModel):
    cacheable = True

    def __init__(self) -> None:
        super().__init__("random")
        self.model_id = "paced:random"
        self.delay = float(os.environ.get("BCAS_PACED_DELAY", "0") or 0)

    async def chat(self, request: ChatRequest) -> ChatResult:
        if self.delay:
            await asyncio.sleep(self.delay)
        result = await super().chat(request)
        result = dataclasses.replace(result, latency_s=result.latency_s + self.delay)
        record_call(result)  # on the item's timing, as a backend's live call is
        return result


def create(model: str | None = None, **options: Any) -> PacedModel:
    return PacedModel()
