"""``Results.passed``: a Python caller sees every failure the pytest front door fails on.

The pytest door ends the session with a failure when the gate's session-wide Holm
step-down rejects a case that passed where it ran (``bcas.gating.report``); the API's
verdict must say the same, beside broken invariants and in-place gate failures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from bcas.api import Results
from bcas.gating.report import GateReport

STEP_DOWN = "b: paired McNemar p = 0.03125 <= Holm step-down threshold 0.03125 (regression)"


def _results(tmp_path: Path, gate: GateReport | None, failures: dict[str, list[str]] | None = None) -> Results:
    return Results(
        run_dir=tmp_path, settings=cast(Any, None), records=[], summary=[], comparisons=[], model_comparisons=[],
        gate=gate, report_path=None, failures=failures or {},
    )  # fmt: skip


def _gate(holm_failures: list[str]) -> GateReport:
    return GateReport("base.json", 0.05, "grid", "mcnemar", ["correct_em"], [], holm_failures=holm_failures)


def test_a_holm_step_down_rejection_fails_the_api_results(tmp_path: Path) -> None:
    assert not _results(tmp_path, _gate([STEP_DOWN])).passed  # no case failed in place, the session did


def test_results_pass_only_without_any_failure(tmp_path: Path) -> None:
    assert _results(tmp_path, None).passed  # no gate asked for
    assert _results(tmp_path, _gate([])).passed  # a gate that rejected nothing
    assert not _results(tmp_path, _gate([]), {"case-a": ["accuracy 0.400 below the floor 0.900"]}).passed
