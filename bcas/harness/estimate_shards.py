"""``--bcas-estimate`` with ``--bcas-shard``: each shard's items, model calls and wall time.

For sizing an array before it is submitted: the estimate plans every item of the run
(not only one shard's) and splits it as the shards will (:func:`bcas.shard.shard_number`
of each item id; a whole-case kind on the shard of its case id).  A shard's calls are
its items' expected calls (each case's call structure, :mod:`bcas.run.estimate`).  Its
wall time is, case after case (a session runs its cases one after another),

    calls of the case on the shard x measured latency per call / items in flight

with items in flight ``min(--bcas-concurrency, items of the case on the shard)``, and
the latency per call the middle of the model's measured range (the run folder's records,
else the generation cache's recorded latencies; the mock backend's, near zero).  It
leaves out what a process spends outside model calls (start, indexes, grading), and a
server shared by many shards answers slower than it did alone: read it as a lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bcas.shard import shard_number


@dataclass
class ShardEstimate:
    index: int
    count: int
    items: int = 0
    calls: float = 0.0
    wall_s: float | None = 0.0
    unknown_calls: int = 0  # cases of this shard whose calls are unknown (nothing replayed)


def per_call_latency(estimates: Sequence[Any]) -> dict[str, float]:
    """Mean measured latency of one call, per model, over its estimated calls."""
    sums: dict[str, list[float]] = {}
    for est in estimates:
        entry = sums.setdefault(est.model, [0.0, 0.0])
        entry[0] += est.latency_s
        entry[1] += est.latency_calls
    return {model: total / calls for model, (total, calls) in sums.items() if calls}


def split(estimates: Sequence[Any], count: int, concurrency: int) -> list[ShardEstimate]:
    """The estimates of the whole run, split into ``count`` shards (see the module docstring)."""
    latency = per_call_latency(estimates)
    shards = [ShardEstimate(k, count) for k in range(1, count + 1)]
    for est in estimates:
        known = est.basis != "no basis"
        per_shard: dict[int, tuple[int, float]] = {}
        if est.whole:
            if est.items or est.calls:
                per_shard[shard_number(est.case_id, count)] = (est.items, float(est.calls))
        else:
            mean = est.calls / est.items if est.items else 0.0
            for item_id, calls in zip(est.item_ids, est.item_calls, strict=True):
                k = shard_number(item_id, count)
                items, total = per_shard.get(k, (0, 0.0))
                per_shard[k] = (items + 1, total + (mean if calls is None else calls))
        for k, (items, calls) in per_shard.items():
            shard = shards[k - 1]
            shard.items += items
            if not known:
                shard.unknown_calls += 1
                shard.wall_s = None
                continue
            shard.calls += calls
            if shard.wall_s is not None and est.model in latency:
                in_flight = 1 if est.whole else max(1, min(concurrency, items))
                shard.wall_s += calls * latency[est.model] / in_flight
            elif calls:
                shard.wall_s = None
    return shards


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def shard_lines(estimates: Sequence[Any], settings: Any) -> list[str]:
    """The terminal's per-shard table (``settings.shard`` gives N; its K is marked)."""
    shard = settings.shard
    latency = per_call_latency(estimates)
    rows = split(estimates, shard.count, settings.concurrency)
    measured = ", ".join(f"{model} {seconds:.3f} s" for model, seconds in sorted(latency.items())) or "none measured"
    out = [
        f"per shard ({shard.count} shards, {settings.concurrency} items in flight; latency per call: {measured})",
        f"{'shard':<10}{'items':>8}{'calls':>10}{'wall time':>14}",
    ]
    for row in rows:
        mark = "  <- this process" if row.index == shard.index and shard.source is not None else ""
        note = f"  (+ {row.unknown_calls} case(s) of unknown calls)" if row.unknown_calls else ""
        label = f"{row.index}/{row.count}"
        out.append(f"{label:<10}{row.items:>8}{row.calls:>10.0f}{_duration(row.wall_s):>14}{note}{mark}")
    longest = [r.wall_s for r in rows]
    slowest = None if any(w is None for w in longest) else max(w for w in longest if w is not None)
    out.append(
        f"the array takes about {_duration(slowest)} (its slowest shard), model calls only; "
        f"{sum(r.items for r in rows)} items, {sum(r.calls for r in rows):,.0f} calls in all"
    )
    return out


__all__ = ["ShardEstimate", "per_call_latency", "shard_lines", "split"]
