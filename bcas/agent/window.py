"""The context window of one trajectory: how many tokens a call may still ask for.

Not in the papers (their models had 128K-token windows); needed so that a paper budget
(16K completion tokens, unlimited searches) never asks a smaller model for more than it
can attend to.  A prompt's tokens are estimated from its characters at the highest
tokens-per-character ratio the provider's usage has shown so far in the trajectory, never
below ``DEFAULT_TOKENS_PER_CHAR`` (three characters per token), plus four tokens a
message; ``CONTEXT_MARGIN`` tokens are kept free for the chat template's own tokens and
the estimate's error.  A model that declares no window (``context_window`` is ``None``)
is never clamped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_TOKENS_PER_CHAR = 1 / 3
CONTEXT_MARGIN = 32
MESSAGE_OVERHEAD_TOKENS = 4
# An action turn needs at least this many tokens of room, else the loop stops with
# stop reason context_window and takes its forced answer.
MIN_TURN_TOKENS = 64


class ContextFull(Exception):
    """The conversation no longer fits the context window."""


def chars(messages: Sequence[dict[str, Any]]) -> int:
    """Characters of the messages' contents and of the tool calls they hold."""
    calls = (c.get("function") or {} for m in messages for c in m.get("tool_calls") or ())
    return sum(len(m.get("content") or "") for m in messages) + sum(
        len(f.get("name") or "") + len(f.get("arguments") or "") for f in calls
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

    def observe(self, messages: Sequence[dict[str, Any]], prompt_tokens: int) -> None:
        """Learn from a call's provider-reported prompt tokens."""
        n = chars(messages)
        if prompt_tokens > 0 and n:
            self.tokens_per_char = max(self.tokens_per_char, prompt_tokens / n)

    def prompt_estimate(self, messages: Sequence[dict[str, Any]]) -> int:
        return int(chars(messages) * self.tokens_per_char) + MESSAGE_OVERHEAD_TOKENS * len(messages)

    def room(self, messages: Sequence[dict[str, Any]]) -> int | None:
        """Completion tokens the window leaves after ``messages`` (``None``: no window known)."""
        if self.tokens is None:
            return None
        return self.tokens - self.prompt_estimate(messages) - CONTEXT_MARGIN

    def clamp(self, messages: Sequence[dict[str, Any]], max_tokens: int) -> int:
        """``max_tokens`` cut to what the window leaves; :class:`ContextFull` when nothing is left."""
        room = self.room(messages)
        if room is None:
            return max_tokens
        if room < 1:
            raise ContextFull(
                f"the prompt (~{self.prompt_estimate(messages)} tokens) fills the {self.tokens}-token window"
            )
        return min(max_tokens, room)
