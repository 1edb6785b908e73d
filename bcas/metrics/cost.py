"""Cost of a correct answer: cost-of-pass and tokens-of-pass with a bootstrap interval.

Erol et al. (2025, "Cost-of-Pass: An Economic Framework for Evaluating Language
Models", §2, eq. 1) define the cost-of-pass of a model on a problem as the expected
cost of one attempt divided by its success rate, ``v = C / R``: what one correct
answer costs when failed attempts are paid for too.  It is infinite when no
attempt succeeds.

Over a row of records (items, each with one or more epochs) the cost and the
success rate are averaged per item first (each item weighs the same, as the
accuracy does), then ``v = mean cost / mean success``.  The 95% interval is a
percentile bootstrap over items (seeded: equal inputs give equal intervals).  With
no price known the same ratio of tokens (prompt + completion) is the tokens-of-pass.

``None`` stands for infinity in results (no success: no finite cost-of-pass; an upper
bound ``None`` means some resamples had no success).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

N_RESAMPLES = 1000


def cost_of_pass(mean_cost: float, success_rate: float) -> float:
    """``mean_cost / success_rate`` (Erol et al. 2025, eq. 1); ``inf`` when the rate is 0.

    >>> cost_of_pass(0.02, 0.5)
    0.04
    """
    if success_rate < 0 or success_rate > 1 or mean_cost < 0:
        raise ValueError(f"need 0 <= success_rate <= 1 and mean_cost >= 0, got {success_rate}, {mean_cost}")
    return math.inf if success_rate == 0 else mean_cost / success_rate


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def per_item(values: Mapping[str, Sequence[tuple[float, bool]]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-item mean cost and mean success of item id -> [(cost, passed), ...], in item-id order
    (so the bootstrap draws the same items whatever order the records came in: a merged
    run equals the unsharded one)."""
    items = [values[key] for key in sorted(values) if values[key]]
    costs = np.array([sum(c for c, _ in v) / len(v) for v in items], dtype=float)
    wins = np.array([sum(1.0 for _, p in v if p) / len(v) for v in items], dtype=float)
    return costs, wins


def cost_of_pass_interval(
    values: Mapping[str, Sequence[tuple[float, bool]]],
    alpha: float = 0.05,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> tuple[float | None, float | None, float | None]:
    """(cost-of-pass, lo, hi) over items (module docstring); ``None`` for an infinite value.

    ``values``: item id -> its epochs' (cost, passed) pairs.  Resamples draw items with
    replacement from ``numpy.random.default_rng(seed)``; the bounds are the
    ``alpha/2`` and ``1 - alpha/2`` order statistics of the resampled ratios (an
    infinite ratio sorts last).
    """
    costs, wins = per_item(values)
    if costs.size == 0:
        return None, None, None
    point = cost_of_pass(float(costs.mean()), float(wins.mean()))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, costs.size, size=(n_resamples, costs.size))
    c, w = costs[idx].mean(axis=1), wins[idx].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(w > 0, c / np.where(w > 0, w, 1.0), np.inf)
    ratios.sort()
    lo = ratios[int(math.floor(alpha / 2 * (n_resamples - 1)))]
    hi = ratios[int(math.ceil((1 - alpha / 2) * (n_resamples - 1)))]
    return _finite(point), _finite(float(lo)), _finite(float(hi))


__all__ = ["N_RESAMPLES", "cost_of_pass", "cost_of_pass_interval", "per_item"]
