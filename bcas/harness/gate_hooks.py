"""The regression gate at the pytest front door: its options, its plan at collection, its JUnit properties.

The gate itself is :mod:`bcas.gating` (a function of records, without pytest).  This
module keeps what belongs to pytest: the stash keys that hold the gate's options and
plan for the session, the conversion of a :class:`bcas.gating.GateError` into a
``pytest.UsageError`` (so a bad option or baseline stops the session before any case
runs), the plan's lines in the terminal, and the per-case properties of ``--junitxml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bcas.gating.baseline import GateResult
from bcas.gating.errors import BaselineError, GateError
from bcas.gating.plan import GateOptions, GatePlan, plan_gate, resumed_gate_problem
from bcas.gating.report import junit_properties
from bcas.harness import state
from bcas.harness.settings import _get

if TYPE_CHECKING:
    from bcas.run.settings import Case

GATE_PLAN = pytest.StashKey[GatePlan]()
GATE_OPTIONS = pytest.StashKey[GateOptions]()


def read_options(config: pytest.Config) -> None:
    """``--bcas-alpha``, ``--bcas-gate-family``, ``--bcas-max-drop``, ``--bcas-gate-strict``,
    ``--bcas-gate-sequential``, ``--bcas-gate-fallback-share`` into the stash."""
    try:
        config.stash[GATE_OPTIONS] = GateOptions.parse(
            _get(config, "alpha"),
            _get(config, "gate-family"),
            _get(config, "max-drop"),
            _get(config, "gate-strict"),
            _get(config, "gate-sequential"),
            _get(config, "gate-fallback-share"),
        )
    except GateError as exc:
        raise pytest.UsageError(str(exc)) from None


def plan_of(config: pytest.Config) -> GatePlan | None:
    """The gate's plan made at collection (None: no baseline, or nothing collected)."""
    return config.stash.get(GATE_PLAN, None)


def options_of(config: pytest.Config) -> GateOptions:
    return config.stash.get(GATE_OPTIONS, GateOptions())


def collected_plan(
    config: pytest.Config,
    cases: Sequence[Case],
    limits: Mapping[str, int | None],
    baseline: str,
    seed: int,
    run_dir: Path,
    token: str,
    identity: Callable[[Case], tuple[str, str]] | None = None,
    allow_mismatch: bool = False,
    new_model: bool = False,
) -> GatePlan:
    """Plan the gate for the collected cases, keep it in ``config.stash``, write it, and report it.

    Raises ``pytest.UsageError`` for an unreadable baseline, for cases whose answers differ
    in identity from the baseline's (without ``--bcas-allow-mismatch``), and under
    ``--bcas-gate-strict`` when a gated case cannot fail or no case is gated -- before any
    case runs.
    """
    settings = config.stash.get(state.SETTINGS, None)
    options = replace(options_of(config), metric=settings.gate_metric if settings is not None else None)
    judge = settings is not None and settings.judge not in (None, "none")
    resumed = resumed_gate_problem(run_dir, token, options)
    if resumed:
        raise pytest.UsageError(resumed)
    try:
        plan = plan_gate(cases, limits, baseline, seed, options, identity, allow_mismatch, judge, new_model)
    except BaselineError as exc:
        raise pytest.UsageError(f"--bcas-baseline: {exc}") from None
    refusal = plan.refusal()
    if refusal:
        raise pytest.UsageError(
            f"--bcas-baseline: {refusal}. Pass --bcas-gate-new-model to gate a new model against the "
            "baseline's, or --bcas-allow-mismatch to compare any difference anyway (the override is written "
            "into the report)."
        )
    config.stash[GATE_PLAN] = plan
    worker = getattr(config, "workerinput", {}).get("workerid")
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None and worker is None:
        for line in plan.lines():
            tr.write_line("[bcas] " + line, yellow="CANNOT" in line or "not gated" in line)
    problem = plan.usage_problem()
    if problem and options.strict:
        raise pytest.UsageError(problem + " (--bcas-gate-strict)")
    if not config.option.collectonly:  # written only for a run: a refused or collect-only session writes nothing
        plan.save(run_dir, token, worker)
    return plan


def add_junit_properties(item: Any, results: list[GateResult]) -> None:
    """Append the gate's properties of the case ``item`` runs to ``item.user_properties``."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "bcas_case" not in callspec.params:
        return
    case = callspec.params["bcas_case"]
    plan = plan_of(item.config)
    result = next((r for r in reversed(results) if r.case_id == case.id), None)
    item.user_properties.extend(junit_properties(result, plan.cases.get(case.id) if plan else None))
