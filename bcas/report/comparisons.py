"""Paired comparisons of record groups: each pairing compared, Holm-adjusted per family, worded.

A :class:`Comparison` is one group against another on the items both hold, in the grid's
primary metric: the difference with the Newcombe (1998) paired interval (BCAS Figure 3) and
the exact McNemar p-value (:func:`bcas.report.paired.paired`), Holm-adjusted within its
family (Holm 1979; MADARA Table 14 pools a grid's models × datasets, :func:`holm_family`)
and worded by :func:`bcas.report.verdict.paired_verdict`.  The pairings are a group against
the entries its grid compares it with (:func:`_reference_pairings`) or every two models on
one configuration (:func:`_model_pairings`); :mod:`bcas.report.summary` assembles them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

from bcas.grading.outcomes import outcome_fn
from bcas.grids import base_label
from bcas.report.membership import GroupKey, Groups
from bcas.report.paired import PairedResult, epochs_of, paired, per_item_means
from bcas.report.verdict import paired_verdict
from bcas.stats import holm_bonferroni


@dataclass
class Comparison(PairedResult):
    """A paired result of one configuration (or model) against another, with its Holm adjustment."""

    grid: str
    model: str
    dataset: str
    label: str
    reference: str
    p_holm: float
    significant: bool
    family: str = ""  # the Holm family within the grid ("" = the grid's one family)
    metric: str = "correct_em"
    # Who is ahead, in the one wording of bcas.report.verdict: named only when the test separates them
    # after Holm, else "not separable at n = K" with the paired items 80% power needs.
    verdict: str = ""
    items_needed: int | None = None


def _compare(
    grid: str,
    model: str,
    dataset: str,
    label: str,
    ref_label: str,
    cand: list[dict[str, Any]],
    ref: list[dict[str, Any]],
    alpha: float,
    metric: str = "correct_em",
    family: str = "",
) -> Comparison:
    binary = epochs_of(cand) <= 1 and epochs_of(ref) <= 1
    fn = outcome_fn(metric)
    res = paired(per_item_means(cand, fn), per_item_means(ref, fn), binary, alpha)
    return Comparison(
        **asdict(res),
        grid=grid,
        model=model,
        dataset=dataset,
        label=label,
        reference=ref_label,
        p_holm=res.p_value,
        significant=False,
        family=family,
        metric=metric,
    )


def _holm(
    comparisons: list[Comparison], family: Any, alpha: float, names: Callable[[Comparison], tuple[str, str]]
) -> None:
    """Holm-adjust each family's p-values, and word each comparison's verdict (``names``: its two sides)."""
    families: dict[Any, list[Comparison]] = defaultdict(list)
    for comp in comparisons:
        families[family(comp)].append(comp)
    for comps in families.values():
        reject, adjusted = holm_bonferroni([c.p_value for c in comps], alpha=alpha)
        for comp, rej, adj in zip(comps, reject, adjusted, strict=True):
            comp.p_holm = adj
            comp.significant = bool(rej)
            found = paired_verdict(*names(comp), comp.b, comp.c, comp.n_paired, adj, alpha, len(comps))
            comp.verdict, comp.items_needed = found.text, found.n_needed


# (candidate group, the other's label or model, Holm family, candidate records, the other's records)
Pairing = tuple[GroupKey, str, str, list[dict[str, Any]], list[dict[str, Any]]]


def _compare_all(
    pairings: Iterable[Pairing],
    metrics: Mapping[str, str],
    alpha: float,
    family: Callable[[Comparison], Any],
    names: Callable[[Comparison], tuple[str, str]],
) -> list[Comparison]:
    """Each pairing compared (``_compare``) under its grid's metric, then Holm-adjusted within ``family``."""
    out = [
        _compare(grid, model, dataset, label, other, cand, ref, alpha, metrics.get(grid, "correct_em"), fam)
        for (grid, model, dataset, label), other, fam, cand, ref in pairings
    ]
    _holm(out, family, alpha, names)
    return out


def holm_family(comp: Comparison, grids: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The Holm family of a comparison: (grid, family), pooled over models × datasets (MADARA
    Table 14), or per model × dataset when the grid's scope is ``cell``."""
    table = (grids or {}).get(comp.grid)
    if getattr(table, "holm_scope", "grid") == "cell":
        return (comp.grid, comp.model, comp.dataset, comp.family)
    return (comp.grid, comp.family)


def _reference_pairings(
    groups: Groups, references: Mapping[tuple[str, str, str], str], grids: Mapping[str, Any] | None
) -> Iterator[Pairing]:
    """Each group against the entries its grid compares it with (by default the grid's reference)."""
    for (grid, model, dataset, label), recs in sorted(groups.items()):
        table = (grids or {}).get(grid)
        if table is not None and hasattr(table, "comparisons"):
            # The grid declares its comparisons by its own labels; a case label adds the run's
            # departures from them (bcas/hs+r/rc10), found again under the same departures.
            pairs = [(_with_departures(other, label), fam) for other, fam in table.comparisons(base_label(label))]
        else:
            ref_label = references.get((grid, model, dataset))
            pairs = [] if ref_label is None or ref_label == label else [(ref_label, "")]
        for other, family in pairs:
            ref = groups.get((grid, model, dataset, other)) or groups.get((grid, model, dataset, base_label(other)))
            if ref:
                shown = other if (grid, model, dataset, other) in groups else base_label(other)
                yield (grid, model, dataset, label), shown, family, recs, ref


def _with_departures(grid_label: str, case_label: str) -> str:
    """``grid_label`` with the departures ``case_label`` shows (``bcas/bm25``, ``x/hs+r/rc10`` -> ``bcas/bm25/rc10``)."""
    base = base_label(case_label)
    return grid_label + case_label[len(base) :]


def _model_pairings(groups: Groups) -> Iterator[Pairing]:
    """Every two models (in name order) on the same grid, dataset and configuration."""
    by_config: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    for (grid, model, dataset, label), recs in groups.items():
        by_config[(grid, dataset, label)][model] = recs
    for (grid, dataset, label), models in sorted(by_config.items()):
        for first, second in combinations(sorted(models), 2):
            yield (grid, first, dataset, label), second, "", models[first], models[second]
