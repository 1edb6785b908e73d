"""The latency percentiles' bootstrap intervals at a case's end (``bcas.metrics.latency``) come
from one row-wise call over the resamples (``bootstrap_ci(..., rowwise=True)``): the same
intervals as a call per resample, without a thousand Python calls per percentile."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest

from bcas.metrics.latency import latency_columns
from bcas.stats import bootstrap_ci


@pytest.mark.parametrize("n", [2, 7, 128])
@pytest.mark.parametrize("q", [50, 95, 99])
def test_rowwise_interval_equals_the_per_resample_one(n: int, q: int) -> None:
    values = np.random.default_rng(n).exponential(0.2, size=n)
    stat = partial(np.percentile, q=q)
    assert bootstrap_ci(values, stat=stat, seed=3, rowwise=True) == bootstrap_ci(values, stat=stat, seed=3)


def test_latency_columns_call_the_percentile_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = np.percentile

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    times = np.random.default_rng(0).exponential(0.2, size=64)
    records = [{"timing": {"item_s": float(t), "service_s": float(t), "wait_s": 0.0, "model_s": float(t),
                           "model_calls": 1, "concurrency": 4, "source": "live"}} for t in times]  # fmt: skip
    expected = latency_columns(records)
    monkeypatch.setattr(np, "percentile", counted)
    cols = latency_columns(records)
    # three percentiles, each: the point estimate and one row-wise call over its 1,000 resamples
    assert calls <= 6, f"{calls} percentile calls"
    assert (cols.latency_p95_lo, cols.latency_p95_hi) == (expected.latency_p95_lo, expected.latency_p95_hi)
    assert cols.latency_p95_lo is not None and cols.latency_p95_lo < cols.latency_p95_hi
