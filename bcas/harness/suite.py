"""The grid case as a pytest test, importable from any folder.

``benchmarks/test_grids.py`` and a user's own test file hold one line,
``from bcas.harness.suite import test_case``; pytest collects the imported function
there, and the bcas plugin parametrises it over the chosen grids (one case per
model x dataset x configuration).  A ``conftest.py`` beside that file can register
grids and datasets (``bcas.grids.register_grid``,
``bcas.data.register_dataset``); see the documentation, docs/extending.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bcas.gating.case import gate_case
from bcas.harness.gate_hooks import options_of, plan_of
from bcas.run.cost import CaseStopped

if TYPE_CHECKING:
    from bcas.run.session import BcasSession
    from bcas.run.settings import Case


def test_case(bcas_case: Case, bcas_session: BcasSession, request: pytest.FixtureRequest) -> None:
    """Run one grid case; fail on a broken invariant, the accuracy floor or the regression gate."""
    bcas_session.gate_plan = plan_of(request.config)  # --bcas-gate-sequential orders and stops items by it
    try:
        outcome = bcas_session.run_case(bcas_case)
    except CaseStopped as stop:  # --bcas-max-cost: skipped with its reason, resumable
        pytest.skip(str(stop))
    assert not outcome.violations, f"{bcas_case.id}: " + "; ".join(outcome.violations)
    marker = request.node.get_closest_marker("min_accuracy")
    floor = float(marker.args[0]) if marker and marker.args else None
    config = request.config
    failures = gate_case(bcas_session, bcas_case, outcome, floor, plan_of(config), options_of(config))
    if failures:  # the verdict is the message: no traceback or test source (the gate's table follows the run)
        pytest.fail("\n".join(failures), pytrace=False)
