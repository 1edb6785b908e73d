"""Checks of the selected cases against the data and models given, once, before anything runs.

:mod:`bcas.run.checks` looks at each option alone; what is checked here needs the cases
(grid x model x dataset) a run would start.  A grid that cannot run on the data given
stops the run with one :class:`~bcas.run.options.OptionError` naming the option that
fixes it, before any model loads (the pytest front door shows it as a usage error
after collection, so only the selected cases count; :func:`bcas.evaluate` as a
``ValueError`` naming the keyword argument), instead of one traceback per case:

- **calibration** (MADARA Algorithm 2): a grid that holds its calibration split out of
  evaluation needs more items than the split, and a case that calibrates (the routed
  pipeline, the RSC probe) at least ``calibration_n`` items (``--bcas-calibration-n``);
- **context window**: a budgeted case whose token budget and forced answer alone exceed
  the model's context window (``--bcas-model``): its items could only end at the window,
  never at the budget the case measures (BCAS §3.3).

:func:`calibration_notes` says up front how many model calls each calibration probe
makes (MADARA §3 and Appendix F: each calibration item's documents are scored with CoT
by every agent, each chain re-scored at three perturbation levels, plus one EvalNF call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bcas.config import RunConfig
from bcas.data import Dataset, DatasetError, load_dataset
from bcas.grids import get_grid
from bcas.registry import RUN_KINDS
from bcas.run.checks import usage
from bcas.run.options import OptionError
from bcas.run.pipelines import run_kind
from bcas.run.plan import case_config
from bcas.run.settings import Case, Settings

# Each calibration chain is scored once and re-scored at three perturbation levels
# (MADARA Appendix F: shuffled, contradicted, another query's chain).
PROBE_SCORINGS = 4


def _full(name: str, seed: int) -> Dataset | None:
    try:
        return load_dataset(name, None, seed)
    except (DatasetError, OSError, KeyError, ValueError):
        return None  # an unreadable dataset is reported by the case that loads it


def check_cases(settings: Settings, cases: Sequence[Case], windows: Mapping[str, int | None] | None = None) -> None:
    """Raise one :class:`OptionError` for the first of ``cases`` that cannot run on the data and models given."""
    datasets: dict[str, Dataset | None] = {}
    for case in cases:
        if case.dataset not in datasets:
            datasets[case.dataset] = _full(case.dataset, settings.seed)
        full = datasets[case.dataset]
        config = case_config(case, settings.seed, bool(settings.corpus))
        if full is not None:
            _check_calibration(case, settings, full)
        _check_window(case, config, (windows or {}).get(case.model.label))


def _check_calibration(case: Case, settings: Settings, full: Dataset) -> None:
    grid = get_grid(case.grid)
    held = grid.holdout_for(settings.calibration_n)
    config = case_config(case, settings.seed, bool(settings.corpus))
    probed = config.assess.calibration_n if run_kind(case.entry.kind).calibrates(config) else 0
    n = len(full.items)
    if held and n <= held:
        raise usage(
            "calibration-n",
            f"grid {case.grid} calibrates MADARA's router on {held} items of {case.dataset_label} and evaluates "
            f"other items (MADARA Algorithm 2: disjoint), but {case.dataset_label} has {n}; give a calibration "
            f"size of at most {max(n - 1, 1)}, or a dataset of more than {held} items",
        )
    if probed and n < probed:
        raise usage(
            "calibration-n",
            f"{case.grid}/{case.entry.label} probes {probed} calibration items of {case.dataset_label} (MADARA "
            f"Algorithm 2), but {case.dataset_label} has {n}; give a calibration size of at most {n}, or a larger "
            "dataset",
        )


def window_need(kind: str, config: RunConfig) -> int | None:
    """Tokens a case of ``kind`` under ``config`` needs the window to hold before its first prompt:
    its token budget and forced answer (BCAS §3.3); None for a kind without a token budget."""
    if kind not in RUN_KINDS or not RUN_KINDS.meta(kind, "budgeted", False):
        return None
    return int(config.budget.max_total_tokens) + int(config.budget.forced_answer_tokens)


def _check_window(case: Case, config: RunConfig, window: int | None) -> None:
    need = window_need(case.entry.kind, config)
    if window and need is not None and need > window:
        raise usage(
            "model",
            f"{case.model.label} has a context window of {window:,} tokens, and {case.grid}/{case.entry.label}'s "
            f"token budget ({config.budget.max_total_tokens:,}) and forced answer ({config.budget.forced_answer_tokens}) "
            f"alone need {need:,} (BCAS §3.3): its items could only end at the window; leave the case out (pytest: -k), "
            "or evaluate a model with a larger context window",
        )


def probe_calls(config: RunConfig, documents: int) -> int:
    """Model calls of one calibration item at most: every agent scores every document with CoT and
    re-scores its chain at three perturbation levels (MADARA Appendix F), plus EvalNF (Algorithm 2)."""
    agents = len(config.assess.rsc_agents)
    return agents * documents * PROBE_SCORINGS + (1 if config.assess.probe_nf else 0)


def calibration_notes(settings: Settings, cases: Sequence[Case], option: str = "--bcas-calibration-n") -> list[str]:
    """One line per calibration probe the cases will run (model x dataset x probe), its calls at most;
    ``option``: how the front door spells the calibration size (``calibration_n=`` for the API)."""
    seen: set[tuple[str, str, int, int, tuple[str, ...], bool]] = set()
    lines = []
    for case in cases:
        config = case_config(case, settings.seed, bool(settings.corpus))
        if case.entry.kind not in RUN_KINDS or not run_kind(case.entry.kind).calibrates(config):
            continue
        assess = config.assess
        key = (case.model.label, case.dataset, assess.calibration_n, assess.n_docs, assess.rsc_agents, assess.probe_nf)
        if key in seen:
            continue
        seen.add(key)
        per_item = probe_calls(config, assess.n_docs)
        total = per_item * assess.calibration_n
        lines.append(
            f"calibration: {case.model.label} on {case.dataset_label} probes {assess.calibration_n} calibration items "
            f"before {case.id}'s first answer: up to {total:,} model calls ({per_item} per item: "
            f"{len(assess.rsc_agents)} agents x {assess.n_docs} documents x {PROBE_SCORINGS} scorings"
            f"{' + 1 EvalNF' if assess.probe_nf else ''}); a smaller calibration size ({option}) lowers it"
        )
    return lines


__all__ = ["OptionError", "calibration_notes", "check_cases", "probe_calls", "window_need"]
