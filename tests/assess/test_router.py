"""MADARA routing rule (Algorithm 2, lines 7-15)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.algorithm2 import paper_route, paper_text, paper_threshold, quotes_match_the_paper
from support.skips import in_ci

from bcas.assess.router import (
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
# rho* is one of five trend values (MADARA Definition 1); arbitrary floats are drawn too,
# except within 1e-6 above -1, where a computed -1 may carry float noise (own test below).
rho_star = st.sampled_from(TREND_VALUES) | rho.filter(lambda r: r == -1.0 or r >= -1.0 + 1e-6)


def test_paper_thresholds():
    """The defaults are the thresholds §5 states (tau_NF = 30%, rho_hat_1 = 0.5)."""
    assert TAU_NF == pytest.approx(paper_threshold("em_nf")) == 0.30
    assert RHO1_THRESHOLD == paper_threshold("rho_1")
    assert paper_threshold("rho_star") == -1.0


def test_quoted_algorithm_is_the_papers():
    """The expected routes come from a quote of Algorithm 2; the quote must be verbatim."""
    path = paper_text()
    if path is None:
        message = "shared/papers/madara-isolate-or-score.txt not beside the repository"
        if in_ci():
            pytest.fail(f"{message}: CI checks the quote against the paper, so the text must be there")
        pytest.skip(message)
    quotes_match_the_paper(path)


@settings(deadline=None)
@given(em, rho_star, rho)
def test_router_is_total_and_follows_algorithm_2(e, rs, r1):
    """Expected mode from Algorithm 2's text (``support.algorithm2``), not from the router's
    constants.  Catches a flipped comparison, a swapped branch or threshold, and a branch
    checked out of order."""
    mode = route(e, rs, r1)
    assert mode in MODES
    assert mode == paper_route(e, rs, r1)


# Every boundary of the three comparisons, on both sides.
BOUNDARY_GRID = list(
    itertools.product((0.0, 0.2999, 0.30, 0.3001, 1.0), TREND_VALUES, (-1.0, 0.0, 0.4999, 0.5, 0.5001, 1.0))
)


def check_router(route_fn) -> None:  # noqa: ANN001
    for e, rs, r1 in BOUNDARY_GRID:
        assert route_fn(e, rs, r1) == paper_route(e, rs, r1), (e, rs, r1)


def test_router_matches_algorithm_2_on_every_boundary():
    check_router(route)


def _rho_star_inclusive(e, rs, r1):  # noqa: ANN001
    return "PDE" if e < 0.3 else "SDA" if rs >= -1.0 else "CoT" if r1 < 0.5 else "ATF"


def _tau_inclusive(e, rs, r1):  # noqa: ANN001
    return "PDE" if e <= 0.3 else "SDA" if rs > -1.0 else "CoT" if r1 < 0.5 else "ATF"


def _coupling_swapped(e, rs, r1):  # noqa: ANN001
    return "PDE" if e < 0.3 else "SDA" if rs > -1.0 else "ATF" if r1 < 0.5 else "CoT"


def _coupling_first(e, rs, r1):  # noqa: ANN001
    return "PDE" if e < 0.3 else "CoT" if r1 < 0.5 else "SDA" if rs > -1.0 else "ATF"


@pytest.mark.parametrize("broken", [_rho_star_inclusive, _tau_inclusive, _coupling_swapped, _coupling_first])
def test_router_check_catches_broken_rules(broken):
    """Mutation check: each broken variant of the rule fails the boundary check."""
    with pytest.raises(AssertionError):
        check_router(broken)


def test_float_noise_at_minus_one_is_quality_ordered():
    """A rho* computed as -1 up to float rounding is the paper's -1.0, not "> -1.0"."""
    assert route(0.8, -1.0 + 1e-12, 0.9) == paper_route(0.8, -1.0, 0.9) == "ATF"
    assert route(0.8, -1.0 + 1e-12, 0.1) == paper_route(0.8, -1.0, 0.1) == "CoT"


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
