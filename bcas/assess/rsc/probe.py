"""The RSC probe (MADARA §3, Appendix F): score calibration documents with CoT, perturb
each chain at three levels, re-score, and build the profile.

:func:`probe_run` also keeps what a run folder's ``rsc/`` records (:class:`ProbeRun`):
the (query, document, agent) triples, the EvalNF answer of every calibration item
(Algorithm 2, line 6) and every call on the probe's ledger, the ``llm`` reranker's
calls made while the calibration documents were retrieved included (kind ``rerank``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bcas.assess.agents import (
    RESCORE_SCHEMA,
    AssessDocument,
    parse_score,
    rescore_messages,
    score_documents,
    use_schema,
)
from bcas.assess.documents import gather_documents
from bcas.assess.pipeline import run_nf_for_probe
from bcas.assess.rsc.perturb import contradict_steps, random_chain, shuffle_sentences
from bcas.assess.rsc.profile import RSCProfile, Triple, profile_from_triples
from bcas.assess.usage import CallEntry, Ledger, Usage
from bcas.callshape import CallShape
from bcas.config import AssessConfig, RunConfig
from bcas.llm.base import ChatModel, ChatRequest, ModelError
from bcas.llm.usage import metering


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


@dataclass
class ProbeRun:
    """A probe's profile and what produced it: triples, EvalNF answers, the ledger's calls."""

    profile: RSCProfile
    triples: list[Triple]
    nf_results: list[dict[str, Any]] = field(default_factory=list)
    entries: list[CallEntry] = field(default_factory=list)
    item_ids: tuple[str, ...] = ()

    def usage_by_phase(self) -> dict[str, Usage]:
        return usage_by_phase(self.entries)


PHASES = {"probe": ("assessment", "rescore"), "evalnf": ("generation",), "retrieve": ("rerank",)}
"""The probe's phases by call kind: CoT scoring and re-scoring (MADARA §3.1), EvalNF
(Algorithm 2, line 6) and re-ranking while the calibration documents are retrieved."""


def usage_by_phase(entries: Sequence[CallEntry]) -> dict[str, Usage]:
    """The totals of ``entries`` for each of :data:`PHASES`."""
    return {name: Ledger(entries=[e for e in entries if e.kind in kinds]).usage() for name, kinds in PHASES.items()}


async def probe(
    model: ChatModel, items: Sequence[Any], retriever: Any, config: RunConfig | AssessConfig, task: str | None = None
) -> RSCProfile:
    """The RSC profile of :func:`probe_run` (see there)."""
    return (await probe_run(model, items, retriever, config, task=task)).profile


async def probe_run(
    model: ChatModel,
    items: Sequence[Any],
    retriever: Any,
    config: RunConfig | AssessConfig,
    task: str | None = None,
) -> ProbeRun:
    """Run the RSC probe (and, with ``probe_nf``, the No-Filter EM) on calibration items.

    A coroutine (model calls are async).  ``items`` are ``bcas.data.Item``s, the
    calibration set C of Algorithm 2: pass items no evaluated case will see
    (``bcas.data.load_calibration``, the first ``calibration_n`` items of the seeded
    permutation; the suite's runner does); the first ``AssessConfig.calibration_n``
    are used.  Documents come from ``AssessConfig.doc_source`` exactly as in
    ``run_madara``, and EM_NF reads every gathered document (as the ``nf`` treatment,
    ``AssessConfig.nf_docs`` caps it) with MADARA's strict EM.
    ``task``: the calibration dataset's task (``Dataset.task``), the EvalNF generator's
    prompt for every item (``AssessConfig.task`` overrides it; never an item's gold).
    The probe's own calls are reported in ``RSCProfile.usage`` (all of them, with
    ``by_phase`` splitting probe, EvalNF and re-ranking calls).
    """
    run_config = config if isinstance(config, RunConfig) else RunConfig(assess=config)
    cfg = run_config.assess
    items = list(items)[: cfg.calibration_n]
    if not items:
        raise ValueError("the RSC probe needs at least one calibration item")
    ledger = Ledger(seed=run_config.seed)
    seed = run_config.seed

    with metering() as meter:  # the llm reranker's calls while the calibration documents are retrieved
        per_item_docs = await asyncio.gather(*(gather_documents(item, retriever, cfg, seed) for item in items))
    ledger.add_metered("rerank", meter, tag="retrieve")
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
    em_nf = None
    nf_results: list[dict[str, Any]] = []
    if cfg.probe_nf:
        em_nf, _ = await run_nf_for_probe(
            model, items, per_item_docs, cfg, results=nf_results, ledger=ledger, task=task
        )
    item_ids = tuple(item.id for item in items)
    usage: dict[str, Any] = ledger.usage().to_dict()
    usage["by_phase"] = {name: u.to_dict() for name, u in usage_by_phase(ledger.entries).items()}
    profile = profile_from_triples(
        triples,
        model=getattr(model, "model_id", "unknown"),
        profile_id=profile_id_for(getattr(model, "model_id", "unknown"), item_ids, run_config),
        em_nf=em_nf,
        agents=cfg.rsc_agents,
        item_ids=item_ids,
        n_bootstrap=cfg.rsc_bootstrap,
        seed=seed,
        rho1_threshold=cfg.rho1_threshold,
        usage=usage,
        config={"tau_nf": cfg.tau_nf, "rho1_threshold": cfg.rho1_threshold, "doc_source": cfg.doc_source},
    )
    return ProbeRun(profile, triples, nf_results, list(ledger.entries), item_ids)


def probe_shape(config: RunConfig, documents: float) -> CallShape:
    """The calls of the probe on one calibration item of ``documents`` documents (the estimate's,
    :mod:`bcas.callshape`), from :func:`probe_run`: each ``rsc_agents`` agent scores each document
    with CoT, each chain is re-scored at up to three perturbation levels (level 3 needs another
    chain of the agent; a score without a chain is not re-scored), and EvalNF generates once
    (``probe_nf``)."""
    cfg = config.assess
    scored = float(len(cfg.rsc_agents)) * float(documents)
    nf = 1.0 if cfg.probe_nf else 0.0
    searches = 1.0 if cfg.doc_source == "retrieval" else 0.0
    return CallShape(
        calls=4 * scored + nf, calls_min=scored + nf, searches=searches,
        out_tokens=scored * (cfg.max_tokens + 3 * cfg.rescore_max_tokens) + nf * cfg.answer_max_tokens,
        passages=4 * scored + nf * float(documents), note="a score with no reasoning chain is not re-scored",
    )  # fmt: skip
