"""The latency row's throughput and mean wait on hand-made timings (bcas.metrics.latency):
records arriving out of finish order, and cases that mix live items with cached ones."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from bcas.metrics.latency import latency_columns


def rec(start: float, end: float, wait: float | None = 0.0, source: str = "live") -> dict[str, Any]:
    timing = {"item_s": end - start, "wait_s": wait, "concurrency": 4, "source": source}
    return {"timing": {**timing, "batch_start": start, "finished_at": end}}


def test_items_per_minute_do_not_depend_on_the_order_records_arrive_in() -> None:
    """Four items submitted at t=100 finish at 110..160 s: 4 items in 60 s, 4.0 a minute, in any
    order the records were written (concurrent items finish out of submission order)."""
    ends = (110.0, 160.0, 130.0, 120.0)
    for order in itertools.permutations(ends):
        cols = latency_columns([rec(100.0, end) for end in order], intervals=False)
        assert cols.items_per_min == pytest.approx(4.0), order
    # two batches (a resumed case), each out of order: each batch's own wall time
    first = [rec(0.0, 30.0), rec(0.0, 10.0)]  # 30 s
    second = [rec(5000.0, 5090.0), rec(5000.0, 5030.0), rec(5000.0, 5060.0)]  # 90 s
    cols = latency_columns(first + second, intervals=False)
    assert cols.items_per_min == pytest.approx(60.0 * 5 / 120.0)


def test_the_mean_wait_is_over_the_items_that_waited_live() -> None:
    """A case resumed over the generation cache: the cached items report no wait (``None``), so the
    mean wait is over the live items alone (2 s and 4 s: 3 s), not diluted by the cached ones."""
    live = [rec(0.0, 5.0, wait=2.0), rec(0.0, 7.0, wait=4.0)]
    cached = [rec(0.0, 1.0, wait=None, source="cache") for _ in range(3)]
    for recs in (live + cached, cached + live, [cached[0], live[0], cached[1], live[1]]):
        cols = latency_columns(recs, intervals=False)
        assert cols.mean_wait_s == pytest.approx(3.0)
        assert cols.latency_source == "mixed" and cols.items_per_min is None  # the replay's throughput: unmeasured
    assert latency_columns(cached, intervals=False).mean_wait_s is None  # no live item: not measured, never 0
    assert latency_columns(live, intervals=False).mean_wait_s == pytest.approx(3.0)
