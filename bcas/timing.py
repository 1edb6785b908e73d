"""Where an item's time goes: the wall time of each model call and each search (BCAS §3.3, §6.1).

BCAS §3.3 accounts for searches and tokens and "does not model queueing delays, batching
effects, or provider-specific pricing tiers"; §6.1 names "tighter runtime reporting,
including queueing and throughput behavior under production concurrency constraints"
as the next step.  This module is the measuring half of it.

Each backend reports one call's times in ``ChatResult.timing`` (seconds), only what it
measured:

* ``ttft_s``: time to the first streamed token (the ``openai`` backend with
  ``stream=True``; vLLM's first output);
* ``prompt_s`` / ``decode_s``: prompt processing and generation as the server reports
  them (llama.cpp's ``timings.prompt_ms`` / ``timings.predicted_ms``; vLLM's request
  metrics);
* ``queue_s``: time the request waited inside the backend before it ran (the embedded
  engine's request queue; vLLM's ``time_in_queue``).

The call's wall time is ``ChatResult.latency_s``.  A key that is absent was not measured
by that backend (:data:`CALL_FIELDS` lists them all); the item's timing says which were
measured for all, some or none of its calls.

The meter: the executor opens one :class:`TimingMeter` per item (:func:`timing`, a
:class:`contextvars.ContextVar`, so concurrent items never mix), every backend adds
its real calls (:func:`record_call`), the generation cache adds its hits with the
*recorded* times (``replay_s``: what the replay itself took, taken out of the harness's
share), and the search tool adds each search's wall time (:func:`timed_search`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol


class TimedResult(Protocol):
    """What the meter reads of a model call's result (``bcas.llm.ChatResult``)."""

    latency_s: float
    timing: dict[str, float]


# What a backend may report of one call (ChatResult.timing keys), besides its wall time.
CALL_FIELDS = ("ttft_s", "prompt_s", "decode_s", "queue_s")


@dataclass
class TimingMeter:
    """Model calls and searches made while the meter was open, with their times (seconds)."""

    model_calls: int = 0
    model_s: float = 0.0
    cached_calls: int = 0
    replay_s: float = 0.0  # wall time the cache hits themselves took (not the recorded time)
    recorded_s: float = 0.0  # the recorded wall time of those hits (a part of model_s)
    searches: int = 0
    search_s: float = 0.0
    sums: dict[str, float] = field(default_factory=dict)  # per CALL_FIELDS key: the sum over calls reporting it
    counts: dict[str, int] = field(default_factory=dict)  # per key: how many calls reported it
    calls: list[dict[str, Any]] = field(default_factory=list)  # each call's times, in the order made
    search_times: list[float] = field(default_factory=list)  # each search's wall time, in order

    def add_call(self, result: TimedResult, replay_s: float | None = None) -> None:
        """Count one call; ``replay_s``: the call was a cache hit that took that long to replay."""
        self.model_calls += 1
        wall = max(0.0, float(result.latency_s or 0.0))
        self.model_s += wall
        if replay_s is not None:
            self.cached_calls += 1
            self.replay_s += max(0.0, replay_s)
            self.recorded_s += wall
        call: dict[str, Any] = {"wall_s": round(wall, 6)}
        for key in CALL_FIELDS:
            value = (result.timing or {}).get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                self.sums[key] = self.sums.get(key, 0.0) + float(value)
                self.counts[key] = self.counts.get(key, 0) + 1
                call[key] = round(float(value), 6)
        if replay_s is not None:
            call["cached"] = True
        self.calls.append(call)

    def add_search(self, seconds: float) -> None:
        self.searches += 1
        self.search_s += max(0.0, seconds)
        self.search_times.append(round(max(0.0, seconds), 6))


_CURRENT: ContextVar[TimingMeter | None] = ContextVar("bcas_timing_meter", default=None)


@contextlib.contextmanager
def timing() -> Iterator[TimingMeter]:
    """Open a fresh meter for the calls and searches made inside the ``with`` block (in this task)."""
    meter = TimingMeter()
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def record_call(result: TimedResult, replay_s: float | None = None) -> None:
    """Count ``result`` on the current meter, if one is open (``replay_s``: a cache hit's own time)."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add_call(result, replay_s)


@contextlib.contextmanager
def timed_search() -> Iterator[None]:
    """Time the search run inside the ``with`` block on the current meter (a failed search counts too).

    The model calls made inside it (the ``llm`` reranker asks the evaluated model) are
    booked as model calls and taken out of the search's time, so the shares add up.
    """
    meter = _CURRENT.get()
    started = time.perf_counter()
    inside = meter.model_s if meter is not None else 0.0
    try:
        yield
    finally:
        if meter is not None:
            # Model calls made by the search (the llm reranker's) are model time, not search time.
            meter.add_search(time.perf_counter() - started - (meter.model_s - inside))


def item_timing(meter: TimingMeter, *, wait_s: float, service_s: float, concurrency: int) -> dict[str, Any]:
    """The ``timing`` field of an item's record from its meter (module docstring).

    ``wait_s``: the time the item waited for a free concurrency slot; ``service_s``: the
    wall time from taking the slot to the pipeline's answer.  When some calls came from
    the generation cache the replay's own time is replaced by the recorded time of those
    calls, so ``service_s`` is what the item took when it was answered; then ``wait_s``
    (this run's, not the recording's) is left out and ``source`` says ``cache``.
    ``item_s`` = ``wait_s`` + ``service_s``: submission to answer.  ``harness_s``: the
    service time in neither model calls nor searches (prompts, parsing, grading rules).
    ``measured`` / ``partial`` / ``unmeasured``: the per-call fields (:data:`CALL_FIELDS`)
    every call, some calls, or no call reported.
    """
    replayed = meter.cached_calls > 0
    # A cache hit's replay took replay_s of this run's wall time; the recorded time stands for it.
    service = max(0.0, service_s - meter.replay_s) + meter.recorded_s
    model_s = meter.model_s
    harness = max(0.0, service - model_s - meter.search_s)
    calls = meter.model_calls
    measured = [k for k in CALL_FIELDS if calls and meter.counts.get(k, 0) == calls]
    partial = [k for k in CALL_FIELDS if 0 < meter.counts.get(k, 0) < calls]
    out: dict[str, Any] = {
        "item_s": round((0.0 if replayed else wait_s) + service, 6),
        "service_s": round(service, 6),
        "wait_s": None if replayed else round(wait_s, 6),
        "model_s": round(model_s, 6),
        "model_calls": calls,
        "search_s": round(meter.search_s, 6),
        "searches": meter.searches,
        "harness_s": round(harness, 6),
        "concurrency": int(concurrency),
        "source": ("cache" if meter.cached_calls == calls else "partly cache") if replayed else "live",
        "cached_calls": meter.cached_calls,
        "measured": measured,
        "partial": partial,
        "unmeasured": [k for k in CALL_FIELDS if k not in measured and k not in partial],
        "calls": meter.calls,  # each model call: wall_s and what its backend reported (cached: a replay)
        "search_times": meter.search_times,
    }
    for key in CALL_FIELDS:  # the sum over the calls that reported it, and how many did
        if meter.counts.get(key):
            out[key] = round(meter.sums[key], 6)
            out[key.removesuffix("_s") + "_calls"] = meter.counts[key]
    return out


__all__ = ["CALL_FIELDS", "TimedResult", "TimingMeter", "item_timing", "record_call", "timed_search", "timing"]
