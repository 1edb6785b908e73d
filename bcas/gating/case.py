"""The gate of one finished case: its accuracy floor and its paired test against the baseline.

Both front doors call :func:`gate_case` once a case's records are written: the pytest
test function (``bcas.harness.suite``, with the plan made at collection) and
:func:`bcas.evaluate` (with the plan made before its first case).  The session and the
case are read through the protocols below, so the gate needs nothing of the run layer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from bcas.gating.baseline import GateResult
from bcas.gating.plan import GateOptions, GatePlan, PlannedCase, case_result, plan_gate, primary_metric


class GateSettings(Protocol):
    """The run settings the gate reads (``bcas.run.settings.Settings`` is one)."""

    @property
    def baseline(self) -> str | None: ...
    @property
    def seed(self) -> int: ...
    @property
    def judge(self) -> str: ...
    @property
    def min_accuracy(self) -> float | None: ...
    @property
    def gate_metric(self) -> str | None: ...


class GateSession(Protocol):
    """The running session the gate reads and appends its results to (``bcas.run.session.BcasSession``)."""

    gate_results: list[GateResult]

    @property
    def settings(self) -> GateSettings: ...
    def limit_for(self, case: Any) -> int | None: ...


class CaseRecords(Protocol):
    """A finished case's records (``bcas.run.outcome.CaseOutcome``)."""

    @property
    def records(self) -> list[dict[str, Any]]: ...


def floor_failure(case_id: str, records: list[dict[str, Any]], metric: str, floor: float) -> str | None:
    """The failure message when the case's accuracy in ``metric`` is below ``floor``, else None.

    An ungraded, empty or errored answer counts as wrong, as the report and the paired
    gate count it.
    """
    from bcas.grading.outcomes import outcome as passed

    n = len(records)
    acc = sum(bool(passed(r, metric)) for r in records) / n if n else 0.0
    if acc < floor:
        return f"regression gate: {case_id}: {metric} accuracy {acc:.3f} over {n} items is below the floor {floor:.3f}"
    return None


def gate_case(
    session: GateSession,
    case: PlannedCase,
    outcome: CaseRecords,
    floor: float | None,
    plan: GatePlan | None = None,
    options: GateOptions | None = None,
) -> list[str]:
    """Absolute floor and paired baseline check of one case; returns failure messages.

    ``floor``: the case's own floor (a ``min_accuracy`` marker), else the settings'.
    ``plan``: the gate's plan of the run; a case it does not hold is planned on its own
    with ``options``.  A gate result is kept on the session (``gate_results``), written
    at its close for the session-wide Holm step (:func:`bcas.gating.report.session_gate_report`).
    """
    failures = []
    settings = session.settings
    floor = floor if floor is not None else settings.min_accuracy
    if floor is not None:
        metric = settings.gate_metric or primary_metric(case.grid, settings.judge != "none")
        failure = floor_failure(case.id, outcome.records, metric, floor)
        if failure is not None:
            failures.append(failure)
    if settings.baseline:
        if plan is None or case.id not in plan.cases:
            plan = plan_gate(
                [case],
                {case.id: session.limit_for(case)},
                settings.baseline,
                settings.seed,
                replace(options or GateOptions(), metric=settings.gate_metric),
                judge=settings.judge != "none",
            )
        res = case_result(plan, case.id, outcome.records)
        if res is not None:
            session.gate_results.append(res)
            if res.failed_now:
                failures.append(res.message())
    return failures
