"""Reasoning-Score Coupling probe (MADARA §3, Appendix F, Appendix G.2).

On a label-free calibration set the agents score every document with CoT
reasoning (the *normal* scores).  Each reasoning chain is then perturbed at three
levels of increasing severity (§3.1, Appendix F.1) and the agent re-scores the
same document given the perturbed reasoning:

1. *Shuffled*: the chain's sentences permuted with a fixed seed
   (``shuffle_sentences``);
2. *Contradicted*: antonym substitution of the listed polarity words, both
   directions, and inverted numeric quality phrases ("high quality" ->
   "low quality", "score of 4" -> "score of 1") (``contradict``);
3. *Random*: the chain replaced by the chain of a different (query, document)
   pair drawn uniformly (``random_chain``).

rho_hat_k = Spearman(s_normal, s_Pk) pooled over all calibration (query,
document, agent) triples (Eq. 1, Appendix F.2); rho* = Spearman([1, 2, 3],
[rho_hat_1, rho_hat_2, rho_hat_3]) (Eq. 2, ``trend_coefficient``); the pair is
*quality-ordered* iff rho* = -1, else *stochastic*; a quality-ordered pair is
*weakly* coupled if rho_hat_1 < 0.5 and *strongly* coupled otherwise (§3.2);
rho_bar = mean of the three rho_hat_k (Eq. 4, Appendix F.4).  Stability: 1,000
bootstrap resamples over queries (Appendix G.2) and the split-half check
(Appendix F.3).  The No-Filter EM of the calibration set (Algorithm 2, line 6,
the only step that uses labels) completes the router's inputs.

Conventions (defined here because the paper leaves them open):

- ``spearman`` ranks ties by their average rank (scipy's ``spearmanr``); when
  either side is constant or fewer than two pairs exist the correlation is
  undefined and ``spearman`` returns 0.0 (no evidence of coupling), never NaN.
- ``trend_coefficient`` breaks ties between the three rho_hat_k by level order
  (the earlier level gets the lower rank), so a tie never counts as degradation
  and rho* always lies in {-1, -0.5, 0, 0.5, 1} (average ranks would give
  +/-0.866 for a two-way tie, outside the paper's five values); e.g. rho_hat_2 ==
  rho_hat_3 < rho_hat_1 gives -0.5, the paper's Gemma-2 x CONFLICTS case
  (Table 13).  Three equal values carry no trend information and give 0.0.
- The normal score is the score of the CoT call itself; a triple enters rho_hat_k
  only if both its normal and its level-k score were parsed (missing scores are
  counted in the profile, never imputed).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bcas.assess.agents import (
    RESCORE_SCHEMA,
    AssessDocument,
    parse_score,
    rescore_messages,
    score_documents,
    use_schema,
)
from bcas.assess.aggregate import average_ranks
from bcas.assess.router import RoutingDecision, decide
from bcas.assess.usage import Ledger
from bcas.config import AssessConfig, RunConfig
from bcas.llm.base import ChatModel, ChatRequest, ModelError

LEVELS: tuple[int, int, int] = (1, 2, 3)
LEVEL_NAMES = {1: "shuffled", 2: "contradicted", 3: "random"}
QUALITY_ORDERED = "quality-ordered"
STOCHASTIC = "stochastic"

# --------------------------------------------------------------------------- statistics


def spearman(x: Sequence[float], y: Sequence[float], undefined: float = 0.0) -> float:
    """Spearman's rho with average ranks for ties; ``undefined`` when either side is constant or n < 2."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"spearman needs equal lengths, got {a.size} and {b.size}")
    if a.size < 2:
        return undefined
    ra, rb = average_ranks(a), average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    if denom == 0.0:
        return undefined
    return float(np.clip((ra * rb).sum() / denom, -1.0, 1.0))


TREND_VALUES = (-1.0, -0.5, 0.0, 0.5, 1.0)


def trend_coefficient(rhos: Sequence[float]) -> float:
    """rho* = Spearman([1, 2, 3], [rho_hat_1, rho_hat_2, rho_hat_3]) (MADARA Eq. 2).

    Ties are broken by level order (see the module docstring); three equal
    values give 0.0.  The result is one of ``TREND_VALUES``.
    """
    r = [float(v) for v in rhos]
    if len(r) != 3:
        raise ValueError(f"trend_coefficient needs exactly 3 per-level correlations, got {len(r)}")
    if any(np.isnan(v) for v in r):
        raise ValueError(f"per-level correlations must be numbers, got {r}")
    if r[0] == r[1] == r[2]:
        return 0.0
    # ordinal ranks 1..3, ties broken by level order (stable sort)
    order = sorted(range(3), key=lambda i: (r[i], i))
    ranks = [0] * 3
    for rank, i in enumerate(order, start=1):
        ranks[i] = rank
    d2 = sum((ranks[i] - (i + 1)) ** 2 for i in range(3))
    return 1.0 - 6.0 * d2 / (3 * (3**2 - 1))


def classify(rho_star: float) -> str:
    """``quality-ordered`` iff rho* = -1 (MADARA Definition 1), else ``stochastic``."""
    return QUALITY_ORDERED if rho_star <= -1.0 + 1e-9 else STOCHASTIC


def coupling_state(rho_star: float, rho_1: float, rho1_threshold: float = 0.5) -> str:
    """``stochastic`` | ``weakly-coupled`` | ``strongly-coupled`` (MADARA §3.2)."""
    if classify(rho_star) == STOCHASTIC:
        return STOCHASTIC
    return "weakly-coupled" if rho_1 < rho1_threshold else "strongly-coupled"


# --------------------------------------------------------------------------- perturbations

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(steps: Sequence[str]) -> list[str]:
    """A reasoning chain as sentences: every step split at sentence boundaries."""
    out: list[str] = []
    for step in steps:
        out.extend(s.strip() for s in _SENTENCE_END.split(step.strip()) if s.strip())
    return out


def _rng(seed: int | str, *key: Hashable) -> random.Random:
    digest = hashlib.sha256(repr((seed, *key)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def shuffle_sentences(steps: Sequence[str], seed: int | str = 0, key: Hashable = ()) -> list[str]:
    """Level 1 (Appendix F.1): the chain's sentences permuted with a fixed seed.

    The permutation depends only on ``seed`` and ``key`` (e.g. the (query,
    document, agent) triple), so a probe is reproducible.  The multiset of
    sentences is preserved.
    """
    sentences = split_sentences(steps)
    _rng(seed, "shuffle", key).shuffle(sentences)
    return sentences


POLARITY_PAIRS: tuple[tuple[str, str], ...] = (
    ("relevant", "irrelevant"),
    ("relevance", "irrelevance"),
    ("consistent", "inconsistent"),
    ("consistency", "inconsistency"),
    ("supports", "contradicts"),
    ("support", "contradict"),
    ("supported", "contradicted"),
    ("supporting", "contradicting"),
    ("accurate", "inaccurate"),
    ("accuracy", "inaccuracy"),
    ("reliable", "unreliable"),
    ("reliability", "unreliability"),
    ("correct", "incorrect"),
    ("trustworthy", "untrustworthy"),
    ("agrees", "disagrees"),
    ("agree", "disagree"),
    ("confirms", "denies"),
    ("useful", "useless"),
    ("strong", "weak"),
    ("strongly", "weakly"),
)
"""Polarity words of the Contradicted perturbation; each is replaced by its partner, both directions."""

ANTONYMS: dict[str, str] = {**{a: b for a, b in POLARITY_PAIRS}, **{b: a for a, b in POLARITY_PAIRS}}

_POLARITY_RE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, ANTONYMS), key=len, reverse=True)) + r")\b", re.IGNORECASE
)
_QUALITY_RE = re.compile(r"\b(high|low)(?=[\s-]+(?:quality|relevance|confidence|reliability|score)\b)", re.IGNORECASE)
_SCORE_OF_RE = re.compile(r"\b(score\s+of\s+)([0-5])\b", re.IGNORECASE)
_OUT_OF_RE = re.compile(r"(?<![\d.])([0-5])(\s*(?:/|out of)\s*5)\b", re.IGNORECASE)


def _match_case(template: str, word: str) -> str:
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def contradict(text: str) -> str:
    """Level 2 (Appendix F.1): antonym substitution and inverted numeric quality phrases.

    Every listed polarity word (``POLARITY_PAIRS``, whole words, any case) is
    replaced by its partner in one pass, keeping its case pattern; "high"/"low"
    before quality/relevance/confidence/reliability/score swap; "score of N" and
    "N/5" become 5 - N.
    """
    out = _POLARITY_RE.sub(lambda m: _match_case(m.group(1), ANTONYMS[m.group(1).lower()]), text)
    out = _QUALITY_RE.sub(lambda m: _match_case(m.group(1), "low" if m.group(1).lower() == "high" else "high"), out)
    out = _SCORE_OF_RE.sub(lambda m: f"{m.group(1)}{5 - int(m.group(2))}", out)
    out = _OUT_OF_RE.sub(lambda m: f"{5 - int(m.group(1))}{m.group(2)}", out)
    return out


def contradict_steps(steps: Sequence[str]) -> list[str]:
    return [contradict(s) for s in steps]


def random_chain(
    chains: Mapping[Hashable, Sequence[str]], key: Hashable, seed: int | str = 0
) -> tuple[Hashable, list[str]] | None:
    """Level 3 (Appendix F.1): the chain of a different (query, document) pair, drawn uniformly.

    ``chains`` maps (query, document) keys to reasoning chains; the returned key
    is never ``key``.  ``None`` when no other pair exists.
    """
    others = sorted((k for k in chains if k != key), key=repr)
    if not others:
        return None
    other = _rng(seed, "random", key).choice(others)
    return other, list(chains[other])


# --------------------------------------------------------------------------- profile


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
        pairs = [(t.normal, t.perturbed[k]) for t in triples if t.normal is not None and t.perturbed[k] is not None]
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
        return decide(self.em_nf, self.rho_star, self.rho_1, tau, r1t, profile_id=self.id)

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
            pairs = [(t.normal, t.perturbed[k]) for t in ts if t.normal is not None and t.perturbed[k] is not None]
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
    missing = {"normal": sum(t.normal is None for t in triples)}
    for k in range(3):
        missing[LEVEL_NAMES[k + 1]] = sum(t.normal is not None and t.perturbed[k] is None for t in triples)
    return RSCProfile(
        id=profile_id,
        model=model,
        rho_hat=rho_hat,
        rho_star=rho_star,
        rho_bar=float(np.mean(rho_hat)),
        classification=classify(rho_star),
        state=coupling_state(rho_star, rho_hat[0], rho1_threshold),
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


# --------------------------------------------------------------------------- probe


def profile_id_for(model_id: str, item_ids: Sequence[str], config: RunConfig) -> str:
    """Stable id of a probe setup: model, calibration items, assessment config and seed."""
    payload = json.dumps(
        {"model": model_id, "items": list(item_ids), "assess": asdict(config.assess), "seed": config.seed},
        sort_keys=True,
        default=list,
    )
    return "rsc-" + hashlib.sha256(payload.encode()).hexdigest()[:16]


async def _rescore(
    model: ChatModel,
    ledger: Ledger,
    agent: str,
    question: str,
    docs: list[AssessDocument],
    index: int,
    reasoning: str,
    config: AssessConfig,
) -> float | None:
    request = ChatRequest(
        messages=rescore_messages(agent, question, docs, index, reasoning, config),
        max_tokens=config.rescore_max_tokens,
        temperature=config.temperature,
        json_schema=RESCORE_SCHEMA if use_schema(model, config) else None,
    )
    try:
        result = await ledger.chat(model, request, "rescore", tag=f"{agent}:{index}")
    except ModelError:
        return None
    return parse_score(result.text).score


async def probe(model: ChatModel, items: Sequence[Any], retriever: Any, config: RunConfig | AssessConfig) -> RSCProfile:
    """Run the RSC probe (and, with ``probe_nf``, the No-Filter EM) on calibration items.

    A coroutine (model calls are async).  ``items`` are ``bcas.data.Item``s, the
    calibration set C of Algorithm 2: pass items no evaluated case will see
    (``bcas.data.load_calibration``, the first ``calibration_n`` items of the seeded
    permutation; the suite's runner does); the first ``AssessConfig.calibration_n``
    are used.  Documents come from ``AssessConfig.doc_source`` exactly as in
    ``run_madara``, and EM_NF reads the retrieval top ``k`` with MADARA's strict EM.
    The probe's own calls are reported in ``RSCProfile.usage``.
    """
    from bcas.assess.pipeline import gather_documents, run_nf_for_probe

    run_config = config if isinstance(config, RunConfig) else RunConfig(assess=config)
    cfg = run_config.assess
    items = list(items)[: cfg.calibration_n]
    if not items:
        raise ValueError("the RSC probe needs at least one calibration item")
    ledger = Ledger(seed=run_config.seed)
    seed = run_config.seed

    per_item_docs = await asyncio.gather(*(gather_documents(item, retriever, cfg) for item in items))
    assessments = await asyncio.gather(
        *(
            score_documents(model, item.question, docs, cfg, cot=True, ledger=ledger, agents=cfg.rsc_agents)
            for item, docs in zip(items, per_item_docs, strict=True)
        )
    )
    # chains by agent -> {(query, doc): steps}
    chains: dict[str, dict[tuple[int, int], list[str]]] = {a: {} for a in cfg.rsc_agents}
    normal: dict[tuple[int, int, str], float | None] = {}
    for q, assessment in enumerate(assessments):
        for v in assessment.verdicts:
            normal[(q, v.doc_index, v.agent)] = v.score
            if v.score is not None and v.reasoning_steps:
                chains[v.agent][(q, v.doc_index)] = v.reasoning_steps

    jobs: list[tuple[tuple[int, int, str], int, Any]] = []
    for (q, d, agent), score in normal.items():
        steps = chains[agent].get((q, d))
        if score is None or not steps:
            continue
        docs = assessments[q].documents
        question = items[q].question
        key = (q, d, agent)
        level_texts = {
            1: " ".join(shuffle_sentences(steps, seed, key)),
            2: " ".join(contradict_steps(steps)),
        }
        other = random_chain(chains[agent], (q, d), seed)
        if other is not None:
            level_texts[3] = " ".join(other[1])
        for level, text in level_texts.items():
            jobs.append((key, level, _rescore(model, ledger, agent, question, docs, d, text, cfg)))
    scores = await asyncio.gather(*(job[2] for job in jobs))
    perturbed: dict[tuple[int, int, str], list[float | None]] = {}
    for (key, level, _), score in zip(jobs, scores, strict=True):
        perturbed.setdefault(key, [None, None, None])[level - 1] = score

    triples = [
        Triple(q, d, agent, s, tuple(perturbed.get((q, d, agent), [None, None, None])))  # type: ignore[arg-type]
        for (q, d, agent), s in sorted(normal.items())
    ]
    probe_usage = ledger.usage()
    em_nf = None
    if cfg.probe_nf:
        em_nf, nf_usage = await run_nf_for_probe(model, items, per_item_docs, cfg)
        probe_usage = probe_usage + nf_usage
    item_ids = tuple(item.id for item in items)
    return profile_from_triples(
        triples,
        model=getattr(model, "model_id", "unknown"),
        profile_id=profile_id_for(getattr(model, "model_id", "unknown"), item_ids, run_config),
        em_nf=em_nf,
        agents=cfg.rsc_agents,
        item_ids=item_ids,
        n_bootstrap=cfg.rsc_bootstrap,
        seed=seed,
        rho1_threshold=cfg.rho1_threshold,
        usage=probe_usage.to_dict(),
        config={"tau_nf": cfg.tau_nf, "rho1_threshold": cfg.rho1_threshold, "doc_source": cfg.doc_source},
    )


__all__ = [
    "ANTONYMS",
    "LEVEL_NAMES",
    "POLARITY_PAIRS",
    "RSCProfile",
    "Triple",
    "bootstrap_stability",
    "classify",
    "contradict",
    "coupling_state",
    "pooled_rhos",
    "probe",
    "profile_from_triples",
    "random_chain",
    "shuffle_sentences",
    "spearman",
    "split_half",
    "split_sentences",
    "trend_coefficient",
]
