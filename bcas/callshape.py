"""The call structure of one item: what a run kind, a method or a treatment spends on it.

Each piece of code that makes model calls declares, next to those calls, a function of
its configuration that returns a :class:`CallShape` (``bcas.methods.builtin``'s
``*_shape`` functions, ``bcas.assess.pipeline.treatment_shape``, ``bcas.agent.shape.loop_shape``,
``bcas.assess.rsc.probe.probe_shape``), so a change of a method's calls changes its
estimate (``--bcas-estimate``, :mod:`bcas.run.estimate`) with it.  A shape is a
function of the budgets and of the configuration only: no model, no index, no data.

``calls`` is the count when the method runs as far as its budgets let it (BCAS §3.3:
the budgets bound the trajectory), ``calls_min`` the count when the model stops at its
first chance, ``calls_max`` the most the structure allows (the BCAS loop's turn bound:
turns the model wastes on replies that cannot be used are calls too); for a fixed structure
(closed-book, retrieve-then-read, every MADARA treatment) the three agree.  ``out_tokens`` bounds the completion tokens (each call's
allowance, within the token budget); ``passages`` counts the passages that reach the
prompts (summed over calls: the prompt tokens' bulk), ``prompt_calls`` the calls whose
prompt carries the question and the instructions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallShape:
    """The model calls, searches and prompt contents of one item (see the module docstring)."""

    calls: float
    calls_min: float | None = None  # None: the same as calls (a fixed structure)
    calls_max: float | None = None  # None: the same as calls
    searches: float = 0.0
    searches_min: float | None = None
    out_tokens: float = 0.0  # at most, over the item's calls
    passages: float = 0.0  # passages shown, summed over the item's calls
    note: str = ""  # what decides where in [calls_min, calls] an item ends
    rerank: int = 0  # of the calls, the llm reranker's per search (one per candidate)

    @property
    def low(self) -> float:
        return self.calls if self.calls_min is None else self.calls_min

    @property
    def high(self) -> float:
        return self.calls if self.calls_max is None else self.calls_max

    @property
    def fixed(self) -> bool:
        return self.low == self.calls == self.high

    def plus(self, other: CallShape) -> CallShape:
        """Both shapes' calls (an item that makes ``self``'s calls and then ``other``'s)."""
        return CallShape(
            calls=self.calls + other.calls,
            calls_min=self.low + other.low,
            calls_max=self.high + other.high,
            searches=self.searches + other.searches,
            searches_min=(self.searches if self.searches_min is None else self.searches_min)
            + (other.searches if other.searches_min is None else other.searches_min),
            out_tokens=self.out_tokens + other.out_tokens,
            passages=self.passages + other.passages,
            note="; ".join(n for n in (self.note, other.note) if n),
            rerank=self.rerank + other.rerank,
        )


__all__ = ["CallShape"]
