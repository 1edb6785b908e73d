"""The sequential gate's exact boundary for a known number of items (no tolerance).

Ville's inequality bounds the chance that a nonnegative supermartingale ever reaches ``c``
by ``1/c`` over an unbounded horizon; a gated case looks at most ``N`` paired items (its
planned items), and over ``N`` items the chance is smaller.  Without a tolerance the
e-process is a function of the counts of discordant items only (``bcas.gating.sequential``),
so that chance is computed exactly: under the null's boundary (a discordant item is the
baseline's with probability 1/2) the counts are a fair random walk over the discordant items,
and the probability that the e-process reaches ``c`` within ``N`` items is a dynamic programme
over (items, baseline-only items), absorbing the paths that reach ``c``.

Two monotonicities make it a bound over the whole null:

* the e-process grows with each baseline-only item and falls with each current-only item, so
  a discordant item that is the baseline's with probability ``q < 1/2`` reaches ``c`` less often
  (a coupling of the two walks);
* fewer discordant items than ``N`` give the walk fewer steps, and reaching ``c`` within ``d``
  steps implies reaching it within ``d + 1``: the chance is largest when every item is discordant.

So ``P(max_{t <= N} e_t >= c) <= tail(N, c)`` for every null and every share of discordant
items, however often the gate looks (at most ``N`` times).  The threshold is the smallest
value the e-process can take whose tail is at most the level (:func:`threshold`); the exact
p-value of a case is ``tail(N, max e)`` (valid at any stopping time up to ``N``: the maximum
seen so far is at most the maximum over ``N`` items).  This is the boundary of a closed
sequential test (Wald 1947, §3; Siegmund 1985, *Sequential Analysis*, ch. 2-3: the exact
crossing probability of a random walk boundary by recursion) drawn on the mixture
e-process; Ville's ``1/c`` (Ville 1939) bounds it for every ``N`` and is the rule beyond
:data:`EXACT_MAX_ITEMS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

EXACT_MAX_ITEMS = 3000
"""Largest N the boundary is computed for exactly (the DP is O(N^2)); beyond it Ville's 1/level."""
TOL = 1e-9
"""Log e-values within this of a boundary count as reaching it (the same paths in the DP and the gate)."""

Row = Callable[[int], np.ndarray]
"""``row(t)``: the log e-values after ``t`` discordant items, ``w`` = 0..t of them the baseline's."""


def crossing_chance(n: int, log_c: float, row: Row) -> float:
    """The chance, under a fair walk of ``n`` discordant items, that the log e-value reaches ``log_c``."""
    alive = np.zeros(n + 2)
    alive[0] = 1.0
    crossed = 0.0
    for t in range(1, n + 1):
        step = np.zeros(n + 2)
        step[: t + 1] = 0.5 * alive[: t + 1]
        step[1 : t + 1] += 0.5 * alive[:t]
        hit = row(t) >= log_c - TOL
        crossed += float(step[: t + 1][hit].sum())
        step[: t + 1][hit] = 0.0
        alive = step
    return crossed


def threshold(n: int, level: float, row: Row) -> float:
    """The smallest e-value the process can take (after at most ``n`` items) whose chance of being
    reached within ``n`` items is at most ``level``; Ville's ``1/level`` when ``n`` exceeds
    :data:`EXACT_MAX_ITEMS` or no such value lies below it."""
    ville = 1.0 / level
    if n < 1 or n > EXACT_MAX_ITEMS:
        return ville
    values = np.unique(np.concatenate([row(t) for t in range(1, n + 1)]))
    values = values[(values > 0.0) & (values <= math.log(ville) + TOL)]
    if values.size == 0 or crossing_chance(n, float(values[-1]), row) > level:
        return ville
    lo, hi = -1, values.size - 1  # values[hi] passes; values[lo] fails (or lo = -1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if crossing_chance(n, float(values[mid]), row) <= level:
            hi = mid
        else:
            lo = mid
    return float(math.exp(values[hi]))


def tail(n: int, e: float, row: Row) -> float:
    """The exact p-value of a case whose e-process reached at most ``e`` within ``n`` items:
    the chance of reaching ``e`` within ``n`` under the null's boundary (Ville's ``1/e`` beyond
    :data:`EXACT_MAX_ITEMS`, and never above it)."""
    if e <= 1.0:
        return 1.0
    if n < 1 or n > EXACT_MAX_ITEMS:
        return 1.0 / e
    return min(1.0 / e, crossing_chance(n, math.log(e), row))


__all__ = ["EXACT_MAX_ITEMS", "TOL", "crossing_chance", "tail", "threshold"]
