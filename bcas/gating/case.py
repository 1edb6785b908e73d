"""The gate of one finished case: its accuracy floor and its paired test against the baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from bcas.harness.gate_power import GatePlan
    from bcas.run.session import BcasSession, CaseOutcome
    from bcas.run.settings import Case


def gate_case(
    session: BcasSession,
    case: Case,
    outcome: CaseOutcome,
    floor: float | None,
    config: pytest.Config | None = None,
    plan: GatePlan | None = None,
) -> list[str]:
    """Absolute floor and paired baseline check of one case; returns failure messages.

    ``plan``: the gate's plan of the run (default: the one pytest made at collection).

    A passed gate result is kept on the session (``gate_results``), written at its close
    for the session-wide Holm step (:func:`bcas.harness.gate_report.session_gate_report`).
    """
    from bcas.harness.gate_power import gate_in_session, primary_metric

    failures = []
    settings = session.settings
    floor = floor if floor is not None else settings.min_accuracy
    if floor is not None:
        from bcas.grading.outcomes import outcome as passed

        # The grid's primary metric, as the report and the paired gate use (an
        # ungraded, empty or errored answer counts as wrong).
        metric = settings.gate_metric or primary_metric(case.grid, settings.judge != "none")
        n = len(outcome.records)
        acc = sum(bool(passed(r, metric)) for r in outcome.records) / n if n else 0.0
        if acc < floor:
            failures.append(
                f"regression gate: {case.id}: {metric} accuracy {acc:.3f} over {n} items is below the floor {floor:.3f}"
            )
    if settings.baseline:
        res = gate_in_session(session, case, outcome.records, config, plan)
        if res is not None:
            session.gate_results.append(res)
            if res.failed_now:
                failures.append(res.message())
    return failures
