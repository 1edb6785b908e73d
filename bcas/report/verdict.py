"""No verdict without its evidence: the one wording of "which of two is ahead".

Every place that names a winner or a ranking (a configuration against its reference, two
models on the same configuration, the agent against the methods beside it, ``bcas
compare``, the terminal's end lines, ``summary.json`` and the MLflow tags) takes its words
from :func:`paired_verdict`, so they read the same everywhere.

The rule: one of two configurations (or models) answered on the same items is named ahead
only when the paired test separates them at the stated ``alpha`` after Holm's correction
within its family (exact McNemar on the discordant items, McNemar 1947; Holm 1979):
``p_holm <= alpha``, and the text names it with its Holm p-value.  Otherwise the text says
"not separable at n = K" and how many paired items would detect the observed difference
(or, when none was observed, :data:`SMALLEST_DIFFERENCE`) with 80% power: the exact power of
the one-sided McNemar test at ``alpha / (2 m)`` (two-sided ``alpha``, the threshold the
comparison faces first in a Holm family of ``m``), with each item flipping towards the
leader at the observed rate of discordant items that went its way and towards the other
at the rate that went the other way (:func:`bcas.stats.mcnemar_items_for_power`, the
gate's power computation).  Numbers (accuracies, intervals, costs) are never gated; only
the words that say who is ahead.
"""

from __future__ import annotations

from dataclasses import dataclass

from bcas.stats import mcnemar_items_for_power

POWER = 0.8
SMALLEST_DIFFERENCE = 0.05  # accuracy points of interest (a fraction) when the observed difference is 0
ITEMS_LIMIT = 1_000_000


@dataclass(frozen=True)
class Verdict:
    """Whether the paired test separates ``first`` from ``second``, and the words that say so."""

    separated: bool
    winner: str | None  # the one ahead, named only when separated
    first: str
    second: str
    p_holm: float
    n: int
    n_needed: int | None  # paired items for 80% power (None when separated, or beyond ITEMS_LIMIT)
    difference: float  # the accuracy difference ``n_needed`` is sized for (observed, or SMALLEST_DIFFERENCE)
    alpha: float
    text: str

    def as_dict(self) -> dict[str, object]:
        return {
            "separated": self.separated,
            "winner": self.winner,
            "p_holm": self.p_holm,
            "n": self.n,
            "n_needed": self.n_needed,
            "text": self.text,
        }


def _p(p: float) -> str:
    return f"{p:.3g}"


def paired_verdict(
    first: str,
    second: str,
    first_only: int,
    second_only: int,
    n: int,
    p_holm: float,
    alpha: float = 0.05,
    family_size: int = 1,
    smallest_difference: float = SMALLEST_DIFFERENCE,
) -> Verdict:
    """The verdict on ``first`` against ``second`` (module docstring).

    ``first_only`` / ``second_only``: paired items only ``first`` / only ``second`` got
    right (with several epochs: items whose per-item mean is higher); ``n``: the paired
    items; ``p_holm``: the comparison's Holm-adjusted p-value in a family of
    ``family_size``.
    """
    if n <= 0:
        return Verdict(False, None, first, second, p_holm, 0, None, smallest_difference, alpha,
                       f"{first} vs {second}: not separable: no paired items")  # fmt: skip
    if p_holm <= alpha and first_only != second_only:
        winner, other = (first, second) if first_only > second_only else (second, first)
        text = (
            f"{winner} ahead of {other}: separated at alpha {alpha:g} "
            f"(Holm p = {_p(p_holm)}, exact McNemar on n = {n} paired items)"
        )
        return Verdict(True, winner, first, second, p_holm, n, None, abs(first_only - second_only) / n, alpha, text)
    lead, lag = max(first_only, second_only) / n, min(first_only, second_only) / n
    observed = lead - lag
    difference = observed if observed > 0 else smallest_difference
    lag = min(lag, (1.0 - difference) / 2.0)  # the two flip rates cannot exceed every item
    threshold = alpha / (2 * max(1, family_size))
    needed = mcnemar_items_for_power(lag + difference, lag, threshold, POWER, ITEMS_LIMIT)
    what = (
        f"the observed difference of {observed * 100:.1f} points"
        if observed > 0
        else f"a difference of {difference * 100:g} points (none observed)"
    )
    how_many = f"about {needed:,}" if needed is not None else f"more than {ITEMS_LIMIT:,}"
    text = (
        f"{first} vs {second}: not separable at n = {n} (Holm p = {_p(p_holm)}, alpha {alpha:g}); "
        f"{how_many} paired items would detect {what} with {POWER * 100:.0f}% power"
    )
    return Verdict(False, None, first, second, p_holm, n, needed, difference, alpha, text)


__all__ = ["ITEMS_LIMIT", "POWER", "SMALLEST_DIFFERENCE", "Verdict", "paired_verdict"]
