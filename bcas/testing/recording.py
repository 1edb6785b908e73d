"""A model in front of another that records what passes through it (control flow only).

:class:`RecordingModel` answers with the inner model's replies, under its id and
capabilities, and keeps every request and the usage the inner model reported, counted
independently of any ledger, so a test can check what a pipeline asked and what its
record claims against what was really sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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

    def register_items(self, items: Any) -> None:
        """Hand the run's items to the inner model when it reads them (the mock's gold answers)."""
        register = getattr(self.inner, "register_items", None)
        if register is not None:
            register(items)

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextmanager
def recording_backend(name: str, inner: str = "mock") -> Iterator[list[RecordingModel]]:
    """Backend ``name``: a :class:`RecordingModel` in front of another backend's model,
    registered for the block only; yields the list of the models it made.

    ``inner="mock"`` (spec ``name:MOCK``): in front of that mock.  ``inner="embedded"``
    (spec ``name``, or ``name:GGUF``): in front of the embedded llama.cpp model, with the
    embedded backend's label, fingerprinting and context window, so a run through it is
    the embedded model's run with every call counted apart from the ledger.
    """
    from bcas.llm import BACKENDS, register_backend

    made: list[RecordingModel] = []
    before = BACKENDS.snapshot()
    if inner == "mock":
        from bcas.testing.mock import MockModel

        def create(model: str | None = None, **options: Any) -> RecordingModel:
            made.append(RecordingModel(MockModel(model or "gold")))
            return made[-1]

        register_backend(name, create, label=name, label_prefix=f"{name}-", identity="mock")
    elif inner == "embedded":
        from bcas.llm import embedded

        def create(model: str | None = None, **options: Any) -> RecordingModel:
            made.append(RecordingModel(embedded.create(model, **options)))
            return made[-1]

        register_backend(name, create, **BACKENDS.meta("embedded"))
    else:
        raise ValueError(f"recording_backend: inner must be 'mock' or 'embedded', got {inner!r}")
    try:
        yield made
    finally:
        BACKENDS.restore(before)
