"""The RSC profile of a model-task pair (MADARA §3.2, Appendix F.2-F.4, G.2): pooled
rho_hat_k, rho*, rho_bar, bootstrap stability and the split-half check; saved as JSON.

``rho_hat_k`` pools the (normal, perturbed) score pairs of every calibration query, document
and assessment agent in ``AssessConfig.rsc_agents`` into one Spearman per level (Eq. 1; the
paper's Table 13 calls the pooled values canonical; whether it pools the three agents is
not stated, ``docs/fidelity.md``).  A profile whose three ``rho_hat_k`` are equal is
``uninformative`` (Table 4, ‡: degenerate scores), never ``stochastic``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bcas.assess.router import RoutingDecision, decide
from bcas.assess.rsc.stats import (
    LEVEL_NAMES,
    UNINFORMATIVE,
    classify,
    coupling_state,
    is_uninformative,
    spearman,
    trend_coefficient,
)


@dataclass(frozen=True)
class Triple:
    """One calibration (query, document, agent) with its normal and per-level scores."""

    query: int
    doc: int
    agent: str
    normal: float | None
    perturbed: tuple[float | None, float | None, float | None]


def pooled_rhos(triples: Sequence[Triple]) -> tuple[float, float, float]:
    """rho_hat_k for k = 1, 2, 3 over every triple whose two scores are present (Eq. 1)."""
    out = []
    for k in range(3):
        pairs = [
            (float(t.normal), float(v)) for t in triples if t.normal is not None and (v := t.perturbed[k]) is not None
        ]
        out.append(spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else 0.0)
    return out[0], out[1], out[2]


@dataclass(frozen=True)
class RSCProfile:
    """The RSC diagnosis of one model-task pair (plus EM_NF when measured)."""

    id: str
    model: str
    rho_hat: tuple[float, float, float]
    rho_star: float
    rho_bar: float
    classification: str
    state: str
    em_nf: float | None
    n_queries: int
    n_triples: int
    agents: tuple[str, ...]
    item_ids: tuple[str, ...] = ()
    per_query_mean: tuple[float | None, float | None, float | None] = (None, None, None)
    bootstrap: dict[str, Any] = field(default_factory=dict)
    split_half: dict[str, Any] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    extreme_fraction: float | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def rho_1(self) -> float:
        return self.rho_hat[0]

    @property
    def coupling(self) -> str | None:
        """``weak`` / ``strong`` for quality-ordered pairs, ``None`` for stochastic ones."""
        return {"weakly-coupled": "weak", "strongly-coupled": "strong"}.get(self.state)

    def decision(self, tau_nf: float | None = None, rho1_threshold: float | None = None) -> RoutingDecision:
        """The router's decision from this profile (Algorithm 2); needs ``em_nf``."""
        if self.em_nf is None:
            raise ValueError("this profile has no EM_NF; probe with AssessConfig(probe_nf=True) or route() by hand")
        tau = self.config.get("tau_nf", 0.30) if tau_nf is None else tau_nf
        r1t = self.config.get("rho1_threshold", 0.5) if rho1_threshold is None else rho1_threshold
        uninformative = self.classification == UNINFORMATIVE
        return decide(self.em_nf, self.rho_star, self.rho_1, tau, r1t, profile_id=self.id, uninformative=uninformative)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RSCProfile:
        d = dict(data)
        for key in ("rho_hat", "agents", "item_ids", "per_query_mean"):
            if key in d:
                d[key] = tuple(d[key])
        return cls(**d)

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> RSCProfile:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def _per_query_means(triples: Sequence[Triple]) -> tuple[float | None, float | None, float | None]:
    """Mean over queries of the within-query Spearman (Appendix F.2); undefined queries skipped."""
    by_query: dict[int, list[Triple]] = {}
    for t in triples:
        by_query.setdefault(t.query, []).append(t)
    out: list[float | None] = []
    for k in range(3):
        values = []
        for ts in by_query.values():
            pairs = [
                (float(t.normal), float(v)) for t in ts if t.normal is not None and (v := t.perturbed[k]) is not None
            ]
            rho = spearman([p[0] for p in pairs], [p[1] for p in pairs], undefined=float("nan"))
            if not np.isnan(rho):
                values.append(rho)
        out.append(float(np.mean(values)) if values else None)
    return out[0], out[1], out[2]


def bootstrap_stability(
    triples: Sequence[Triple], n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05, rho1_threshold: float = 0.5
) -> dict[str, Any]:
    """Percentile CIs of rho_hat_k and rho* and classification stability over query resamples (Appendix G.2)."""
    queries = sorted({t.query for t in triples})
    if n_resamples <= 0 or not queries:
        return {"n_resamples": 0}
    by_query: dict[int, list[Triple]] = {q: [] for q in queries}
    for t in triples:
        by_query[t.query].append(t)
    full = pooled_rhos(triples)
    full_star = trend_coefficient(full)
    full_class, full_state = classify(full_star), coupling_state(full_star, full[0], rho1_threshold)
    rng = np.random.default_rng(seed)
    rhos = np.empty((n_resamples, 3))
    stars = np.empty(n_resamples)
    same_class = same_state = 0
    for b in range(n_resamples):
        picked = rng.integers(0, len(queries), size=len(queries))
        sample = [t for i in picked for t in by_query[queries[i]]]
        r = pooled_rhos(sample)
        s = trend_coefficient(r)
        rhos[b], stars[b] = r, s
        same_class += classify(s) == full_class
        same_state += coupling_state(s, r[0], rho1_threshold) == full_state
    lo, hi = 100 * alpha / 2, 100 * (1 - alpha / 2)
    return {
        "n_resamples": n_resamples,
        "alpha": alpha,
        "rho_hat_ci": [[float(np.percentile(rhos[:, k], lo)), float(np.percentile(rhos[:, k], hi))] for k in range(3)],
        "rho_star_ci": [float(np.percentile(stars, lo)), float(np.percentile(stars, hi))],
        "classification_stability": same_class / n_resamples,
        "state_stability": same_state / n_resamples,
    }


def split_half(triples: Sequence[Triple]) -> dict[str, Any]:
    """Appendix F.3: rho* on the first and the last half of the queries, and whether they agree."""
    queries = sorted({t.query for t in triples})
    if len(queries) < 2:
        return {}
    half = len(queries) // 2
    first, last = set(queries[:half]), set(queries[half:])
    r1 = pooled_rhos([t for t in triples if t.query in first])
    r2 = pooled_rhos([t for t in triples if t.query in last])
    s1, s2 = trend_coefficient(r1), trend_coefficient(r2)
    return {
        "first": {"rho_hat": list(r1), "rho_star": s1},
        "last": {"rho_hat": list(r2), "rho_star": s2},
        "same_classification": classify(s1) == classify(s2),
    }


def profile_from_triples(
    triples: Sequence[Triple],
    *,
    model: str = "unknown",
    profile_id: str = "",
    em_nf: float | None = None,
    agents: tuple[str, ...] = (),
    item_ids: tuple[str, ...] = (),
    n_bootstrap: int = 1000,
    seed: int = 0,
    rho1_threshold: float = 0.5,
    usage: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
) -> RSCProfile:
    """All RSC statistics from collected scores (pure; no model calls)."""
    rho_hat = pooled_rhos(triples)
    rho_star = trend_coefficient(rho_hat)
    normal = [t.normal for t in triples if t.normal is not None]
    degenerate = is_uninformative(rho_hat)  # Table 4 (‡): not stochastic, uninformative
    missing = {"normal": sum(t.normal is None for t in triples)}
    for k in range(3):
        missing[LEVEL_NAMES[k + 1]] = sum(t.normal is not None and t.perturbed[k] is None for t in triples)
    return RSCProfile(
        id=profile_id,
        model=model,
        rho_hat=rho_hat,
        rho_star=rho_star,
        rho_bar=float(np.mean(rho_hat)),
        classification=UNINFORMATIVE if degenerate else classify(rho_star),
        state=UNINFORMATIVE if degenerate else coupling_state(rho_star, rho_hat[0], rho1_threshold),
        em_nf=em_nf,
        n_queries=len({t.query for t in triples}),
        n_triples=len(triples),
        agents=agents,
        item_ids=item_ids,
        per_query_mean=_per_query_means(triples),
        bootstrap=bootstrap_stability(triples, n_bootstrap, seed, rho1_threshold=rho1_threshold),
        split_half=split_half(triples),
        missing=missing,
        extreme_fraction=(sum(s in (0.0, 5.0) for s in normal) / len(normal)) if normal else None,
        usage=usage or {},
        config=config or {},
    )
