"""RSC statistics (MADARA §3.2, Eq. 1-2, Appendix F.2-F.4): Spearman, the trend
coefficient rho*, the coupling classes.  Tie conventions: see :mod:`bcas.assess.rsc`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bcas.assess.aggregate import average_ranks

LEVEL_NAMES = {1: "shuffled", 2: "contradicted", 3: "random"}
QUALITY_ORDERED = "quality-ordered"
STOCHASTIC = "stochastic"
# MADARA Table 4 (‡): every rho_hat_k equal (scores degenerate, e.g. all at the floor), so
# perturbation tells nothing; rho* = 0 would otherwise read as stochastic.
UNINFORMATIVE = "uninformative"


def spearman(x: Sequence[float], y: Sequence[float], undefined: float = 0.0) -> float:
    """Spearman's rho with average ranks for ties; ``undefined`` when either side is constant or n < 2."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"spearman needs equal lengths, got {a.size} and {b.size}")
    if a.size < 2:
        return undefined
    ra, rb = average_ranks(a), average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    if denom == 0.0:
        return undefined
    return float(np.clip((ra * rb).sum() / denom, -1.0, 1.0))


TREND_VALUES = (-1.0, -0.5, 0.0, 0.5, 1.0)


def trend_coefficient(rhos: Sequence[float]) -> float:
    """rho* = Spearman([1, 2, 3], [rho_hat_1, rho_hat_2, rho_hat_3]) (MADARA Eq. 2).

    Ties are broken by level order (see the module docstring); three equal
    values give 0.0.  The result is one of ``TREND_VALUES``.
    """
    r = [float(v) for v in rhos]
    if len(r) != 3:
        raise ValueError(f"trend_coefficient needs exactly 3 per-level correlations, got {len(r)}")
    if any(np.isnan(v) for v in r):
        raise ValueError(f"per-level correlations must be numbers, got {r}")
    if r[0] == r[1] == r[2]:
        return 0.0
    # ordinal ranks 1..3, ties broken by level order (stable sort)
    order = sorted(range(3), key=lambda i: (r[i], i))
    ranks = [0] * 3
    for rank, i in enumerate(order, start=1):
        ranks[i] = rank
    d2 = sum((ranks[i] - (i + 1)) ** 2 for i in range(3))
    return 1.0 - 6.0 * d2 / (3 * (3**2 - 1))


def classify(rho_star: float) -> str:
    """``quality-ordered`` iff rho* = -1 (MADARA Definition 1), else ``stochastic``."""
    return QUALITY_ORDERED if rho_star <= -1.0 + 1e-9 else STOCHASTIC


def is_uninformative(rho_hat: Sequence[float]) -> bool:
    """Whether a profile's three per-level correlations are all equal (MADARA Table 4, ‡: "scores
    degenerate at the absolute floor, making perturbation uninformative").  Degenerate scores
    are what makes them equal in practice, but the test is the equality itself: any profile
    whose perturbation levels cannot be told apart counts, whatever its scores were."""
    r = [float(v) for v in rho_hat]
    return len(r) == 3 and r[0] == r[1] == r[2]


def coupling_state(rho_star: float, rho_1: float, rho1_threshold: float = 0.5) -> str:
    """``stochastic`` | ``weakly-coupled`` | ``strongly-coupled`` (MADARA §3.2)."""
    if classify(rho_star) == STOCHASTIC:
        return STOCHASTIC
    return "weakly-coupled" if rho_1 < rho1_threshold else "strongly-coupled"
