"""MADARA routing rule (Algorithm 2, lines 7-15)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.assess.router import (
    _RHO_STAR_EPS,
    MODES,
    RHO1_THRESHOLD,
    TAU_NF,
    RoutingDecision,
    RoutingError,
    decide,
    route,
)
from bcas.assess.rsc import TREND_VALUES

em = st.floats(0, 1, allow_nan=False)
rho = st.floats(-1, 1, allow_nan=False)
rho_star = st.sampled_from(TREND_VALUES) | rho


def test_paper_thresholds():
    assert TAU_NF == 0.30
    assert RHO1_THRESHOLD == 0.5


@settings(deadline=None)
@given(em, rho_star, rho)
def test_router_is_total_and_follows_algorithm_2(e, rs, r1):
    mode = route(e, rs, r1)
    assert mode in MODES
    if e < 0.30:
        expected = "PDE"
    elif rs > -1.0 + _RHO_STAR_EPS:  # rho* within rounding of -1 is quality-ordered
        expected = "SDA"
    elif r1 < 0.5:
        expected = "CoT"
    else:
        expected = "ATF"
    assert mode == expected


@pytest.mark.parametrize(
    ("args", "mode"),
    [
        ((0.10, -1.0, 0.9), "PDE"),
        ((0.29999, 0.5, 0.1), "PDE"),
        ((0.30, -0.5, 0.9), "SDA"),
        ((0.80, 1.0, 0.9), "SDA"),
        ((0.80, -1.0, 0.49), "CoT"),
        ((0.30, -1.0, 0.5), "ATF"),
        ((1.00, -1.0, 1.0), "ATF"),
    ],
)
def test_each_branch_is_reachable_with_boundaries(args, mode):
    assert route(*args) == mode


def test_thresholds_are_configurable():
    assert route(0.25, -1.0, 0.6, tau_nf=0.2) == "ATF"
    assert route(0.8, -1.0, 0.6, rho1_threshold=0.7) == "CoT"


@pytest.mark.parametrize("bad", [(float("nan"), -1, 0.5), (42.0, -1, 0.5), (0.5, -2, 0.5), (0.5, -1, float("nan"))])
def test_out_of_domain_inputs_raise(bad):
    with pytest.raises(RoutingError):
        route(*bad)


def test_decision_records_inputs_and_reason():
    d = decide(0.62, -1.0, 0.31, profile_id="rsc-x")
    assert d.mode == "CoT"
    assert (d.em_nf, d.rho_star, d.rho_1, d.tau_nf, d.rho1_threshold) == (0.62, -1.0, 0.31, 0.30, 0.5)
    assert "weakly coupled" in d.reason and "0.310" in d.reason
    assert RoutingDecision.from_dict(d.to_dict()) == d
    for args in [(0.1, -1, 0.9), (0.6, -0.5, 0.9), (0.6, -1, 0.9)]:
        dd = decide(*args)
        assert dd.mode.lower() in dd.reason.lower()
