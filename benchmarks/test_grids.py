"""The evaluation grids as pytest cases (what a user runs).

``pytest benchmarks --bcas-grid smoke`` runs the smoke grid on the embedded CPU
default; see ``pytest --help`` (section "bcas") for models, datasets, grids, the
judge, price sheets, the baseline gate and the report directory.
"""

from __future__ import annotations

import pytest


def test_case(bcas_case, bcas_session, request: pytest.FixtureRequest) -> None:
    outcome = bcas_session.run_case(bcas_case)
    assert not outcome.violations, f"{bcas_case.id}: " + "; ".join(outcome.violations)
    marker = request.node.get_closest_marker("min_accuracy")
    floor = float(marker.args[0]) if marker and marker.args else None
    failures = bcas_session.gate(bcas_case, outcome, floor)
    assert not failures, "\n".join(failures)
