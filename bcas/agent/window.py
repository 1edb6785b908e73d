"""The context window of one trajectory: how many tokens a call may still ask for.

Not in the papers (their models had 128K-token windows); needed so that a paper budget
(16K completion tokens, unlimited searches) never asks a smaller model for more than it
can attend to.  A prompt's tokens are estimated from its characters at the highest
tokens-per-character ratio the provider's usage has shown so far in the trajectory, never
below ``DEFAULT_TOKENS_PER_CHAR`` (three characters per token), plus four tokens a
message; ``CONTEXT_MARGIN`` tokens are kept free for the chat template's own tokens and
the estimate's error.  A call that offers tools (native tool calling) also counts the
characters of their schemas and ``TOOLS_OVERHEAD_TOKENS`` for the instructions a backend
writes around them (llama-cpp-python's ``chatml-function-calling`` handler: about 600
characters), since the backend renders both into the prompt.  A model that declares no window (``context_window`` is ``None``)
is never clamped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_TOKENS_PER_CHAR = 1 / 3
CONTEXT_MARGIN = 32
MESSAGE_OVERHEAD_TOKENS = 4
TOOLS_OVERHEAD_TOKENS = 200
# An action turn needs at least this many tokens of room, else the loop stops with
# stop reason context_window and takes its forced answer.
MIN_TURN_TOKENS = 64


class ContextFull(Exception):
    """The conversation no longer fits the context window."""


def chars(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> int:
    """Characters of the messages' contents, of the tool calls they hold and of the offered tools' schemas."""
    calls = (c.get("function") or {} for m in messages for c in m.get("tool_calls") or ())
    schemas = sum(len(json.dumps(t, ensure_ascii=False)) for t in tools or ())
    return (
        schemas
        + sum(len(m.get("content") or "") for m in messages)
        + sum(len(f.get("name") or "") + len(f.get("arguments") or "") for f in calls)
    )


@dataclass
class ContextWindow:
    """The window (``None``: unknown) and the tokens-per-character ratio observed so far."""

    tokens: int | None
    tokens_per_char: float = DEFAULT_TOKENS_PER_CHAR

    @classmethod
    def of(cls, model: object) -> ContextWindow:
        window = getattr(model, "context_window", None)
        return cls(window if isinstance(window, int) and window > 0 else None)

    def observe(
        self, messages: Sequence[dict[str, Any]], prompt_tokens: int, tools: Sequence[dict[str, Any]] | None = None
    ) -> None:
        """Learn from a call's provider-reported prompt tokens."""
        n = chars(messages, tools)
        if prompt_tokens > 0 and n:
            self.tokens_per_char = max(self.tokens_per_char, prompt_tokens / n)

    def prompt_estimate(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> int:
        overhead = MESSAGE_OVERHEAD_TOKENS * len(messages) + (TOOLS_OVERHEAD_TOKENS if tools else 0)
        return int(chars(messages, tools) * self.tokens_per_char) + overhead

    def room(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> int | None:
        """Completion tokens the window leaves after ``messages`` and ``tools`` (``None``: no window known)."""
        if self.tokens is None:
            return None
        return self.tokens - self.prompt_estimate(messages, tools) - CONTEXT_MARGIN

    def clamp(
        self, messages: Sequence[dict[str, Any]], max_tokens: int, tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """``max_tokens`` cut to what the window leaves; :class:`ContextFull` when nothing is left."""
        room = self.room(messages, tools)
        if room is None:
            return max_tokens
        if room < 1:
            raise ContextFull(
                f"the prompt (~{self.prompt_estimate(messages, tools)} tokens) fills the {self.tokens}-token window"
            )
        return min(max_tokens, room)
