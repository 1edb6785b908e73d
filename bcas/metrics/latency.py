"""Latency and throughput of a case from its records' ``timing`` (BCAS §3.3, §6.1).

BCAS §3.3 leaves "queueing delays, batching effects" out of its accounting and §6.1 asks
for "tighter runtime reporting, including queueing and throughput behavior under
production concurrency constraints".  From each record's ``timing``
(:func:`bcas.timing.item_timing`) a summary row gets:

* ``latency_p50`` / ``latency_p95`` / ``latency_p99``: percentiles (numpy's linear
  interpolation) of the time per item, submission to answer (``item_s``: the wait for
  a concurrency slot plus the service), each with a percentile-bootstrap 95% interval
  (:func:`bcas.stats.bootstrap_ci`, 1000 resamples, seed 0);
* ``mean_wait_s``, ``mean_model_call_s`` (per call), ``mean_search_s`` (per search),
  ``mean_ttft_s`` (per call, where the backend streamed);
* ``items_per_min``: answers per minute of wall time, the wall time of each batch of
  items submitted together (a session's case) being from its submission to its last
  answer (the time between a run and its resumption does not count);
* ``share_model`` / ``share_search`` / ``share_wait`` / ``share_harness``: where the
  summed time per item went;
* ``latency_source``: ``live``, or ``cache`` when the calls came from the generation
  cache: then the times are the recorded ones (the replay's own time is taken out),
  the wait and the throughput of the replay are not measured (``None``);
* ``concurrency`` and ``latency_measured``: the level the records ran at, and which
  per-call times every call reported.

``None`` means not measured (records written before timing existed, a replay), never 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from bcas.stats import bootstrap_ci
from bcas.timing import CALL_FIELDS

PERCENTILES = (50, 95, 99)


@dataclass(kw_only=True)
class LatencyColumns:
    latency_n: int = 0  # records with a timing
    latency_source: str | None = None  # live | cache | partly cache | mixed
    concurrency: int | None = None  # the level (None when the records ran at several)
    latency_p50: float | None = None  # seconds per item, submission to answer
    latency_p50_lo: float | None = None
    latency_p50_hi: float | None = None
    latency_p95: float | None = None
    latency_p95_lo: float | None = None
    latency_p95_hi: float | None = None
    latency_p99: float | None = None
    latency_p99_lo: float | None = None
    latency_p99_hi: float | None = None
    mean_wait_s: float | None = None
    mean_model_call_s: float | None = None
    mean_search_s: float | None = None
    mean_ttft_s: float | None = None
    items_per_min: float | None = None
    share_model: float | None = None
    share_search: float | None = None
    share_wait: float | None = None
    share_harness: float | None = None
    latency_measured: str = ""  # the per-call times every call reported, comma-separated (ttft_s,prompt_s,...)


def _timing(rec: dict[str, Any]) -> dict[str, Any] | None:
    timing = rec.get("timing")
    return timing if isinstance(timing, dict) and isinstance(timing.get("item_s"), int | float) else None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with numpy's linear interpolation."""
    return float(np.percentile(np.asarray(values, dtype=float), q))


def per_minute(items: float, seconds: float) -> float | None:
    """Items per minute: ``items`` over the wall ``seconds`` they took, times 60 (``None``: no time or
    no item).  The one definition of throughput: the latency line, the case's end line and the
    terminal's progress all say items/min through it."""
    return 60.0 * items / seconds if items and seconds > 0 else None


def items_per_minute(recs: Sequence[dict[str, Any]]) -> float | None:
    """A case's answers per minute from its records (the ``items_per_min`` column, module docstring):
    live answers only (a replay's throughput is not measured, ``None``)."""
    return latency_columns(recs, intervals=False).items_per_min


def _throughput(timed: list[tuple[dict[str, Any], dict[str, Any]]]) -> float | None:
    """Answers per minute over the wall time of each batch of submitted items (its start to its last answer).

    A resumed case ran in several batches (sessions): only their own wall times count, not
    the time between them.
    """
    spans: dict[float, float] = {}
    for _, t in timed:
        start, end = t.get("batch_start"), t.get("finished_at")
        if not isinstance(start, int | float) or not isinstance(end, int | float):
            return None
        spans[float(start)] = max(spans.get(float(start), float(start)), float(end))
    wall = sum(end - start for start, end in spans.items())
    return per_minute(len(timed), wall)


def latency_columns(recs: Sequence[dict[str, Any]], intervals: bool = True) -> LatencyColumns:
    """The latency columns of one summary row's records (module docstring); ``intervals=False``
    leaves out the percentiles' bootstrap intervals (1,000 resamples each) for a caller that shows none."""
    timed = [(r, t) for r in recs if (t := _timing(r)) is not None]
    if not timed:
        return LatencyColumns()
    times = [float(t["item_s"]) for _, t in timed]
    out = LatencyColumns(latency_n=len(timed))
    for q in PERCENTILES:
        setattr(out, f"latency_p{q}", percentile(times, q))
        if intervals:
            lo, hi = bootstrap_ci(times, stat=partial(np.percentile, q=q), n_resamples=1000, seed=0, rowwise=True)
            setattr(out, f"latency_p{q}_lo", lo)
            setattr(out, f"latency_p{q}_hi", hi)
    sources = {str(t.get("source") or "live") for _, t in timed}
    out.latency_source = sources.pop() if len(sources) == 1 else "mixed"
    levels = {t.get("concurrency") for _, t in timed}
    level = next(iter(levels)) if len(levels) == 1 else None
    out.concurrency = int(level) if level is not None else None
    live = [(r, t) for r, t in timed if t.get("wait_s") is not None]
    waits = [float(t["wait_s"]) for _, t in live]
    out.mean_wait_s = sum(waits) / len(waits) if waits else None
    calls = sum(int(t.get("model_calls") or 0) for _, t in timed)
    model = sum(float(t.get("model_s") or 0.0) for _, t in timed)
    searches = sum(int(t.get("searches") or 0) for _, t in timed)
    search = sum(float(t.get("search_s") or 0.0) for _, t in timed)
    harness = sum(float(t.get("harness_s") or 0.0) for _, t in timed)
    out.mean_model_call_s = model / calls if calls else None
    out.mean_search_s = search / searches if searches else None
    ttft_calls = sum(int(t.get("ttft_calls") or 0) for _, t in timed)
    if ttft_calls:
        out.mean_ttft_s = sum(float(t.get("ttft_s") or 0.0) for _, t in timed) / ttft_calls
    out.items_per_min = _throughput(live) if len(live) == len(timed) else None
    # The parts' own sum, not the summed item_s: each part is rounded to the microsecond
    # (bcas.timing.item_timing), so the rounded item_s differs from their sum by up to a
    # few microseconds an item, and shares over it would not add up to 1.
    wait = sum(waits)
    total = model + search + wait + harness
    if total > 0:
        out.share_model, out.share_search = model / total, search / total
        out.share_wait, out.share_harness = wait / total, harness / total
    out.latency_measured = ",".join(k for k in CALL_FIELDS if all(k in (t.get("measured") or ()) for _, t in timed))
    return out


def load_curve(recs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Throughput against p95 latency per concurrency level, lowest level first (the knee table).

    One row per level of the records' ``timing.concurrency``: ``concurrency``, ``n``,
    ``items_per_min``, ``latency_p50``, ``latency_p95``, ``mean_wait_s``.  Past the knee a
    higher level adds waiting, not throughput.
    """
    by_level: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for rec in recs:
        t = _timing(rec)
        if t is not None and t.get("concurrency") is not None:
            by_level[int(t["concurrency"])].append(rec)
    rows = []
    for level in sorted(by_level):
        cols = latency_columns(by_level[level], intervals=False)  # the knee table shows no interval
        rows.append(
            {
                "concurrency": level,
                "n": cols.latency_n,
                "items_per_min": cols.items_per_min,
                "latency_p50": cols.latency_p50,
                "latency_p95": cols.latency_p95,
                "mean_wait_s": cols.mean_wait_s,
            }
        )
    return rows


def latency_lines(rows: Sequence[Any]) -> list[str]:
    """The terminal's latency line of each summary row that has timed records."""

    def s(v: float | None, fmt: str = ".3f") -> str:
        return "—" if v is None else format(v, fmt)

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{100 * v:.0f}%"

    lines = []
    for r in rows:
        if not getattr(r, "latency_n", 0):
            continue
        level = "several levels" if r.concurrency is None else f"concurrency {r.concurrency}"
        lines.append(
            f"latency {r.grid}/{r.model}/{r.dataset}/{r.label}: p50 {s(r.latency_p50)} s "
            f"[{s(r.latency_p50_lo)}, {s(r.latency_p50_hi)}], p95 {s(r.latency_p95)} s, p99 {s(r.latency_p99)} s; "
            f"wait {s(r.mean_wait_s)} s, {s(r.mean_model_call_s)} s/call, {s(r.mean_search_s)} s/search, "
            f"{s(r.items_per_min, '.1f')} items/min; model {pct(r.share_model)}, search {pct(r.share_search)}, "
            f"wait {pct(r.share_wait)}, harness {pct(r.share_harness)} ({level}, {r.latency_source})"
        )
    return lines


__all__ = [
    "PERCENTILES",
    "LatencyColumns",
    "items_per_minute",
    "latency_columns",
    "latency_lines",
    "load_curve",
    "per_minute",
    "percentile",
]
