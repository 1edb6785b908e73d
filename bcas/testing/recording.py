"""A model in front of another that records what passes through it (control flow only).

:class:`RecordingModel` answers with the inner model's replies, under its id and
capabilities, and keeps every request and the usage the inner model reported, counted
independently of any ledger, so a test can check what a pipeline asked and what its
record claims against what was really sent.
"""

from __future__ import annotations

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, WrappedModel


class RecordingModel(WrappedModel):
    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.requests: list[ChatRequest] = []
        self.calls = 0  # calls answered (a call that raised is not counted)
        self.prompt_tokens = 0
        self.completion_tokens = 0

    async def chat(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        result = await self.inner.chat(request)
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()
