"""Usage of model calls made on an item's behalf outside its own turns (BCAS §3.3 ledger).

The BCAS ledger counts every call of a trajectory from the provider-reported usage.  Some
calls are made for the item by a component rather than by the loop: the ``llm``
reranker asks the evaluated model once per candidate (100 per hybrid + re-ranking
search).  Such a component adds each call's usage to the *current meter*
(:func:`add_usage`); the loop opens a meter around the component (:func:`metering`) and
writes what it measured into the ledger as a step of its own.  The meter lives in a
:class:`contextvars.ContextVar`, so concurrent items, each in its own task, never mix
their counts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from bcas.llm.base import ChatResult


@dataclass
class UsageMeter:
    """Calls and provider-reported tokens added while the meter was open."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0
    results: list[ChatResult] = field(default_factory=list)  # each call's result, in the order counted

    def add(self, result: ChatResult) -> None:
        self.calls += 1
        self.prompt_tokens += int(result.prompt_tokens)
        self.completion_tokens += int(result.completion_tokens)
        self.cached += int(bool(result.cached))
        self.results.append(result)


_CURRENT: ContextVar[UsageMeter | None] = ContextVar("bcas_usage_meter", default=None)


@contextlib.contextmanager
def metering() -> Iterator[UsageMeter]:
    """Open a fresh meter for the calls made inside the ``with`` block (in this task)."""
    meter = UsageMeter()
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def add_usage(result: ChatResult) -> None:
    """Count ``result`` on the current meter, if one is open."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add(result)
