"""The regression gate's power tables: what each number of paired items can detect.

A case facing Holm threshold ``alpha / m`` (``m`` gated cases in its family) needs at
least ``ceil(log2(m / alpha))`` items that only the baseline gets right before the exact
one-sided McNemar test can reject (McNemar 1947, Holm 1979;
``bcas.stats.mcnemar_min_discordant``).  ``bcas gate power`` prints the
documentation's tables (docs/gating.md): the smallest drop each number of paired items can detect for 1, 7 and
30 gated cases, the drop caught with 80% power, and the exact size of the tolerance test
(Tango 1998) on small n.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import gammaln, xlogy

from bcas.gating.sequential import DEFAULT_FALLBACK_SHARE, fixed_power, gate_fails, mcnemar_critical
from bcas.stats import mcnemar_drop_for_power, mcnemar_items_for_power, mcnemar_min_detectable_drop, tango_pvalues

# The paired items a difference needs: one implementation (bcas.stats, layer 0), used by the
# report's verdicts (bcas.report.verdict) and re-exported here beside the gate's other power tables.
__all__ = ["mcnemar_items_for_power", "power_tables", "tango_exact_size", "tango_size_lines"]


def tango_exact_size(n: int, margin: float, alpha: float, grid: int = 400) -> float:
    """Largest rejection probability of the Tango gate at ``alpha`` when the true drop is ``margin``.

    Enumerates every paired table on ``n`` items (trinomial: baseline-only,
    candidate-only, concordant) and maximises over the nuisance P(candidate-only) on
    a grid of ``grid`` points: the test's exact size on the boundary of its null.
    """
    w, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = (w + b) <= n
    w, b = w[keep].astype(float), b[keep].astype(float)
    reject = tango_pvalues(w, b, n, margin) <= alpha
    w, b = w[reject], b[reject]
    if w.size == 0:
        return 0.0
    rest = n - w - b
    log_coef = gammaln(n + 1) - gammaln(w + 1) - gammaln(b + 1) - gammaln(rest + 1)
    worst = 0.0
    for q in np.linspace(0.0, (1.0 - margin) / 2.0, grid):
        terms = log_coef + xlogy(w, q + margin) + xlogy(b, q) + xlogy(rest, max(1.0 - 2.0 * q - margin, 0.0))
        worst = max(worst, float(np.exp(terms).sum()))
    return worst


def power_tables(alpha: float, families: list[int], sizes: list[int], p_better: float) -> str:
    """Markdown tables of the smallest detectable drop and the drop caught with 80% power."""
    head = "| paired items | " + " | ".join(f"{k} gated case{'s' if k > 1 else ''}" for k in families) + " |"
    rule = "|---:|" + "---:|" * len(families)
    tables: list[tuple[str, Callable[[int, float], float | None], str]] = [
        (
            f"Smallest drop that can be significant (points; every discordant item lost), alpha {alpha:g}:",
            mcnemar_min_detectable_drop,
            "cannot fail",
        ),
        (
            f"True drop caught with 80% power when {p_better * 100:g}% of items also flip the other way (points):",
            lambda n, threshold: mcnemar_drop_for_power(n, threshold, 0.8, p_better),
            "never",
        ),
    ]
    out: list[str] = []
    for title, drop_at, none_text in tables:
        if out:
            out.append("")
        out += [title, "", head, rule]
        for n in sizes:
            drops = [drop_at(n, alpha / k) for k in families]
            cells = [none_text if drop is None else f"{drop * 100:.1f}" for drop in drops]
            out.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def tango_size_lines(alpha: float) -> list[str]:
    """The tolerance test's exact size at nominal ``alpha`` (``bcas gate power --tango-size``)."""
    out = [f"\nExact size of the tolerance test at nominal {alpha:g} (true drop = tolerance):\n"]
    out.append("| paired items | 5 pts | 10 pts |\n|---:|---:|---:|")
    for n in (20, 50, 100, 200):
        out.append(f"| {n} | " + " | ".join(f"{tango_exact_size(n, m, alpha):.4f}" for m in (0.05, 0.10)) + " |")
    return out


def sequential_lines(
    alpha: float,
    drops: list[float],
    discordance: float,
    sizes: list[int],
    family: int = 1,
    runs: int = 4000,
    share: float = DEFAULT_FALLBACK_SHARE,
) -> list[str]:
    """``bcas gate power --sequential``: items a sequential gate needs for each drop, by simulation.

    For each drop (points) and horizon N: the sequential gate's power (Monte Carlo over ``runs``
    sequences with ``discordance`` percent discordant items; :func:`bcas.gating.sequential.gate_fails`),
    the mean and 90th percentile of the paired items it used, and the fixed-n gate's exact power
    on N items at the same level (``alpha / family``); ``share``: the fallback share of alpha
    (``--bcas-gate-fallback-share``).
    """

    rng = np.random.default_rng(0)
    out = [
        f"Sequential gate at alpha {alpha:g} ({family} gated case{'s' if family > 1 else ''} per family), "
        f"{discordance:g}% of items discordant, fallback share {share:g}; {runs} simulated runs each:",
        "",
        "| drop (pts) | N | power | mean items | 90% of runs within | fixed-n power at N |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for drop in drops:
        if drop > discordance:
            out.append(f"| {drop:g} | - | a drop of {drop:g} points needs at least {drop:g}% discordant items |||||")
            continue
        p_w, p_b = (discordance + drop) / 200.0, (discordance - drop) / 200.0
        for n in sizes:
            failed, used = gate_fails(p_w, p_b, n, runs, alpha, family_size=family, share=share, rng=rng)
            fixed = fixed_power(n, p_w, p_b, alpha / family, mcnemar_critical(n, alpha / family))
            out.append(
                f"| {drop:g} | {n} | {failed.mean():.3f} | {used.mean():.0f} | {np.quantile(used, 0.9):.0f} | "
                f"{fixed:.3f} |"
            )
    return out
