"""The MADARA routing rule (MADARA §4.5, Appendix E, Algorithm 2, lines 7-15).

Two diagnostics choose the treatment for a model-task pair: the No-Filter exact
match on the calibration set (context-handling capacity) and the RSC profile
(rho*, rho_hat_1) from ``bcas.assess.rsc``:

    EM_NF < tau_NF           -> PDE   (weak baseline: isolate documents)
    elif uninformative       -> PDE   (every rho_hat_k equal, Table 4 ‡: scores carry no order)
    elif rho* > -1           -> SDA   (stochastic scoring: rank-normalise)
    elif rho_hat_1 < 0.5     -> CoT   (quality-ordered, weakly coupled)
    else                     -> ATF   (quality-ordered, strongly coupled)

The thresholds are configuration (``AssessConfig.tau_nf``, ``rho1_threshold``);
the defaults are the paper's pilot-derived values (§5.5).  An uninformative profile (the
RSC probe's three per-level correlations equal: degenerate scores, Table 4 ‡) has rho* = 0
and would read as stochastic; the paper says only that such a failure "independently
necessitates per-document isolation" (§6.3), so it is routed to PDE (``docs/fidelity.md``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

TAU_NF: float = 0.30
"""tau_NF: No-Filter EM below which a model is routed to PDE (MADARA §5.5)."""

RHO1_THRESHOLD: float = 0.5
"""rho_hat_1 separating weakly from strongly coupled models (MADARA §3.2, Appendix B)."""

QUALITY_ORDERED_RHO_STAR: float = -1.0
"""rho* of perfect monotonic degradation (MADARA Definition 1)."""

Mode = Literal["PDE", "SDA", "CoT", "ATF"]
MODES: tuple[str, ...] = ("PDE", "SDA", "CoT", "ATF")

# rho* takes one of five values; allow float noise when comparing with -1.
_RHO_STAR_EPS = 1e-9


class RoutingError(ValueError):
    """A routing input is outside its domain (NaN, EM outside [0, 1], rho outside [-1, 1])."""


def _check(name: str, value: float, lo: float, hi: float, hint: str = "") -> float:
    v = float(value)
    if math.isnan(v) or not lo - 1e-12 <= v <= hi + 1e-12:
        raise RoutingError(f"{name} must be a number in [{lo}, {hi}], got {value!r}{hint}")
    return v


def route(
    em_nf: float,
    rho_star: float,
    rho_1: float,
    tau_nf: float = TAU_NF,
    rho1_threshold: float = RHO1_THRESHOLD,
    uninformative: bool = False,
) -> Mode:
    """Algorithm 2, lines 7-15: the treatment for one model-task pair.

    ``em_nf`` is a fraction in [0, 1] (not a percentage); ``rho_star`` and
    ``rho_1`` are correlations in [-1, 1].  Total over that domain; NaN or
    out-of-range inputs raise ``RoutingError``.
    """
    em = _check("em_nf", em_nf, 0.0, 1.0, " (a fraction, e.g. 0.42 for 42%)")
    rs = _check("rho_star", rho_star, -1.0, 1.0)
    r1 = _check("rho_1", rho_1, -1.0, 1.0)
    if em < tau_nf or uninformative:
        return "PDE"
    if rs > QUALITY_ORDERED_RHO_STAR + _RHO_STAR_EPS:
        return "SDA"
    if r1 < rho1_threshold:
        return "CoT"
    return "ATF"


@dataclass(frozen=True)
class RoutingDecision:
    """A routing outcome with the inputs and thresholds that produced it."""

    mode: str
    em_nf: float
    rho_star: float
    rho_1: float
    tau_nf: float = TAU_NF
    rho1_threshold: float = RHO1_THRESHOLD
    reason: str = ""
    profile_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoutingDecision:
        return cls(**data)


def decide(
    em_nf: float,
    rho_star: float,
    rho_1: float,
    tau_nf: float = TAU_NF,
    rho1_threshold: float = RHO1_THRESHOLD,
    profile_id: str | None = None,
    uninformative: bool = False,
) -> RoutingDecision:
    """``route`` plus a human-readable reason naming the branch taken."""
    mode = route(em_nf, rho_star, rho_1, tau_nf, rho1_threshold, uninformative)
    if mode == "PDE" and em_nf >= tau_nf:
        reason = (
            f"EM_NF={em_nf:.3f} >= tau_NF={tau_nf:.2f} but the RSC profile is uninformative (every rho_hat_k "
            "equal: degenerate scores, Table 4 ‡): isolate documents (PDE)"
        )
    elif mode == "PDE":
        reason = f"EM_NF={em_nf:.3f} < tau_NF={tau_nf:.2f}: weak baseline, isolate documents (PDE)"
    elif mode == "SDA":
        reason = (
            f"EM_NF={em_nf:.3f} >= tau_NF={tau_nf:.2f} and rho*={rho_star:+.2f} > -1: "
            "stochastic scoring, percentile-rank alignment (SDA)"
        )
    elif mode == "CoT":
        reason = (
            f"EM_NF={em_nf:.3f} >= tau_NF={tau_nf:.2f}, rho*=-1 (quality-ordered) and "
            f"rho_1={rho_1:.3f} < {rho1_threshold:.2f}: weakly coupled, CoT de-polarisation"
        )
    else:
        reason = (
            f"EM_NF={em_nf:.3f} >= tau_NF={tau_nf:.2f}, rho*=-1 (quality-ordered) and "
            f"rho_1={rho_1:.3f} >= {rho1_threshold:.2f}: strongly coupled, threshold filtering (ATF)"
        )
    return RoutingDecision(
        mode, float(em_nf), float(rho_star), float(rho_1), tau_nf, rho1_threshold, reason, profile_id
    )
