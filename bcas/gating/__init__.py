"""The regression gate, a pure function of records: baselines, the paired test, the plan, the report.

* :mod:`bcas.gating.baseline`: baseline files (``bcas gate write RUN_DIR
  OUT.json``), pairing a case with the baseline's, the paired test (exact McNemar or
  Tango's tolerance test) and the Holm step-down over each family;
* :mod:`bcas.gating.plan`: what each case can detect, known before any case runs;
* :mod:`bcas.gating.case`: one finished case's floor and paired test;
* :mod:`bcas.gating.report`: the session's verdict (``gate-report.json``, terminal,
  HTML, JUnit properties);
* :mod:`bcas.gating.power`: the power tables (``bcas gate power``).

Both front doors call it: the pytest plugin through :mod:`bcas.harness.gate_hooks`
(stash keys, usage errors, collection and report hooks) and :func:`bcas.evaluate`.
Nothing here imports pytest; a bad option or an unreadable baseline is a
:class:`GateError` (a ``ValueError``) that each front door shows its own way.
"""

from bcas.gating.baseline import (
    DEFAULT_METRIC,
    BaselineCase,
    GateResult,
    build_baseline,
    check_baseline,
    holm_families,
    holm_session,
    item_outcomes,
    load_baseline,
    load_baseline_cases,
    match_baseline,
    paired_result,
    paired_test,
)
from bcas.gating.case import gate_case
from bcas.gating.errors import BaselineError, GateError
from bcas.gating.plan import CasePlan, GateOptions, GatePlan, case_result, plan_gate, primary_metric
from bcas.gating.report import GateReport, build_report, session_gate_report

__all__ = [
    "DEFAULT_METRIC",
    "BaselineCase",
    "BaselineError",
    "CasePlan",
    "GateError",
    "GateOptions",
    "GatePlan",
    "GateReport",
    "GateResult",
    "build_baseline",
    "build_report",
    "case_result",
    "check_baseline",
    "gate_case",
    "holm_families",
    "holm_session",
    "item_outcomes",
    "load_baseline",
    "load_baseline_cases",
    "match_baseline",
    "paired_result",
    "paired_test",
    "plan_gate",
    "primary_metric",
    "session_gate_report",
]
