"""Reliability over tries: pass@k, pass^k and answer flips (``--bcas-epochs n``).

With ``n`` tries of an item of which ``c`` passed:

- **pass@k** -- the chance that at least one of ``k`` tries drawn without replacement
  from the ``n`` passes -- has the unbiased estimator of Chen et al. (2021, "Evaluating
  Large Language Models Trained on Code", §2.1, eq. 1): ``1 - C(n-c, k) / C(n, k)``;
- **pass^k** -- the chance that all ``k`` tries pass, the reliability measure of
  τ-bench (Yao et al., 2024, "τ-bench: A Benchmark for Tool-Agent-User Interaction",
  §3) -- has the unbiased estimator ``C(c, k) / C(n, k)``.

Both are averaged over items (each item weighs the same), with a percentile bootstrap
interval over items (:func:`bcas.stats.bootstrap_ci`, seeded).  pass@1 = pass^1 = the
accuracy.  The **flip share** is the share of items tried more than once whose outcome
is not the same in every try.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb

from bcas.stats import bootstrap_ci


def _check(n: int, c: int, k: int) -> None:
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need n >= 1 tries and 0 <= c <= n passes, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must lie between 1 and the number of tries {n}, got {k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one item with ``c`` of ``n`` tries passing (Chen et al. 2021, eq. 1).

    >>> pass_at_k(3, 1, 2)  # 1 - C(2,2)/C(3,2)
    0.6666666666666666
    """
    _check(n, c, k)
    total = comb(n, k)
    return (total - comb(n - c, k)) / total  # one division of integers: exact to the last bit


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k of one item: all ``k`` tries pass (τ-bench, Yao et al. 2024, §3).

    >>> pass_hat_k(3, 2, 2)  # C(2,2)/C(3,2)
    0.3333333333333333
    """
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def tries(outcomes: Mapping[str, Sequence[bool]]) -> dict[str, tuple[int, int]]:
    """Item id -> (tries, passes)."""
    return {item: (len(v), sum(1 for x in v if x)) for item, v in outcomes.items() if len(v)}


def over_items(
    outcomes: Mapping[str, Sequence[bool]], k: int, estimator: str = "pass@k", seed: int = 0
) -> tuple[float, float, float] | None:
    """(mean, lo, hi) of an estimator over items with at least ``k`` tries; ``None`` if there are none.

    ``estimator``: ``"pass@k"`` or ``"pass^k"``; the interval is a 95% percentile
    bootstrap over items (items with fewer than ``k`` tries are left out).
    """
    fn = {"pass@k": pass_at_k, "pass^k": pass_hat_k}[estimator]
    counted = tries(outcomes)
    # in item-id order: the bootstrap draws the same items whatever order the records came in
    values = [fn(*counted[item], k) for item in sorted(counted) if counted[item][0] >= k]
    if not values:
        return None
    lo, hi = bootstrap_ci(values, seed=seed)
    return sum(values) / len(values), lo, hi


def flip_share(outcomes: Mapping[str, Sequence[bool]]) -> float | None:
    """Share of items with two or more tries whose outcome differs between tries.

    >>> flip_share({"a": [True, False], "b": [True, True], "c": [False]})
    0.5
    """
    multi = [v for v in outcomes.values() if len(v) >= 2]
    if not multi:
        return None
    return sum(1 for v in multi if len(set(v)) > 1) / len(multi)


__all__ = ["flip_share", "over_items", "pass_at_k", "pass_hat_k", "tries"]
