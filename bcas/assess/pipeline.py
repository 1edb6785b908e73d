"""MADARA treatments per query, the routed pipeline, and hit post-processing for BCAS.

``run_madara(item, model, retriever, config)`` runs one method on one item and
returns its record (``answer_madara``: its answer, without identity or grades).  The method is ``AssessConfig.method``:

=============  =====================================================  ==========================
method         what it does (MADARA section)                          LLM calls (m docs, top k)
=============  =====================================================  ==========================
``nf``         every gathered document to the generator (§5.3 (1))   1 generation
``3-agent``    base scores, weights (0.4, 0.3, 0.3), top-k (§5.3 (2))  3m assessment + 1
``cot``        CoT de-polarised scores, weighted top-k (§4.1)         3m assessment + 1
``sda``        base scores, percentile ranks, top-k (§4.2, Alg. 1)    3m assessment + 1
``sda-cot``    CoT scores, percentile ranks, top-k (Table 14, App. C) 3m assessment + 1
``rrf``        base scores, reciprocal rank fusion (Appendix C)       3m assessment + 1
``atf``        base scores, keep >= mu - 0.5 sigma (§4.3)             3m assessment + 1
``pde``        base scores, answer per top-k doc, weighted vote §4.4  3m assessment + k
``pde-unif``   as PDE with a uniform vote (Table 1 "Unif.")           3m assessment + k
``pde-random`` k random docs, answer each, uniform vote (§6.1)        k generation
``madara``     the routed treatment (Algorithm 2): PDE/SDA/CoT/ATF    as the chosen treatment
=============  =====================================================  ==========================

The paper's Appendix K quotes about 19 calls for 3-Agent; the counts here come
from our own ledger (3 agents x m documents, one call each, plus generation).

Documents (§5.5: "reranking top-k=5 from 10 retrieved documents"; see
:mod:`bcas.assess.documents`): ``AssessConfig.doc_source`` = ``retrieval`` takes the top
``n_docs`` (10) hits of the retriever for the question, from the dataset's whole
collection (padded up to ``n_docs`` from the collection with ``pad_docs``); the
treatments select ``k`` (5) of them and No-Filter reads all of them (§5.3 (1): "NF: all
documents to generator (standard RAG)"; ``nf_docs`` caps it).  ``item`` takes the item's
own documents (CONFLICTS ships 4, FEVER 1), at most ``n_docs``.  The choice is recorded
(``extra["doc_source"]``, ``extra["retrieved_docs"]``), and every record says which
documents reached generation: ``extra["context_doc_ids"]`` (document ids in the
order the generator saw them; for PDE the union of its single-document calls) and
``extra["context_chunk_ids"]``.

A new treatment is one ``@treatment("name")`` coroutine taking a
``TreatmentContext`` and returning a ``TreatmentOutcome``.

``assess_hits`` is the entry point for the BCAS agent's ``search_database`` tool
(``AgentConfig.assess``); see its docstring.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bcas.assess.agents import AGENTS, AssessDocument, Assessment, score_documents
from bcas.assess.aggregate import (
    atf_filter,
    order_best_first,
    rrf_select,
    sda_select,
    weighted_scores,
)
from bcas.assess.documents import DOC_ORDER, AssessError, gather_documents, nf_count
from bcas.assess.generate import SCORING_FOR_TASK, generate_answer, task_of
from bcas.assess.pde import extract_per_document, random_subset, vote
from bcas.assess.router import RoutingDecision
from bcas.assess.usage import Ledger, Usage
from bcas.callshape import CallShape
from bcas.config import AssessConfig, RunConfig
from bcas.grading import score_prediction, strict_exact_match
from bcas.llm.base import ChatModel, ModelError
from bcas.llm.usage import metering
from bcas.records import Answer, AnswerIdentity, Grades, Record, build_record
from bcas.registry import ROUTED_METHOD as ROUTED
from bcas.registry import TREATMENTS, routed_modes

# --------------------------------------------------------------------------- treatments


@dataclass
class TreatmentContext:
    model: ChatModel
    question: str
    documents: list[AssessDocument]
    task: str
    config: AssessConfig
    seed: int | str
    ledger: Ledger


@dataclass
class TreatmentOutcome:
    prediction: str
    raw: str = ""
    selected: list[int] = field(default_factory=list)
    assessment: Assessment | None = None
    doc_scores: list[float] | None = None  # aggregated per-document scores used for selection
    candidates: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


Treatment = Callable[[TreatmentContext], Awaitable[TreatmentOutcome]]


def treatment(name: str, **meta: Any) -> Callable[[Treatment], Treatment]:
    """Register a treatment coroutine under ``name`` (then a valid ``AssessConfig.method``).

    One registration, from a ``conftest.py``, a ``-p`` plugin or a ``bcas.plugins`` entry
    point: ``@treatment("mine")``.  ``meta``: ``routed_mode`` (Algorithm 2 may choose it)
    and ``agent_tool`` (it can post-process the BCAS search tool's hits) -- see
    :data:`bcas.registry.TREATMENTS`.  The built-in treatments below are registered there.
    """

    def register(fn: Treatment) -> Treatment:
        TREATMENTS.register(name, fn, **meta)
        return fn

    return register


async def _generate_from(ctx: TreatmentContext, indices: Sequence[int], tag: str) -> tuple[str, str]:
    docs = [ctx.documents[i] for i in indices]
    return await generate_answer(ctx.model, ctx.question, docs, ctx.task, ctx.config, ctx.ledger, tag=tag)


async def _assess(ctx: TreatmentContext, cot: bool = False) -> Assessment:
    return await score_documents(ctx.model, ctx.question, ctx.documents, ctx.config, cot=cot, ledger=ctx.ledger)


async def _nf(ctx: TreatmentContext) -> TreatmentOutcome:
    # MADARA §5.3 (1) "NF: all documents to generator (standard RAG)", unassessed.
    selected = list(range(nf_count(ctx.config, len(ctx.documents))))
    answer, raw = await _generate_from(ctx, selected, "nf")
    return TreatmentOutcome(answer, raw, selected)


async def _scored_topk(ctx: TreatmentContext, cot: bool, select: str) -> TreatmentOutcome:
    assessment = await _assess(ctx, cot=cot)
    S = assessment.matrix
    cfg = ctx.config
    ws = [float(v) for v in weighted_scores(S, cfg.weights)] if S else []
    if not S:
        selected: list[int] = []
    elif select == "weighted":
        selected = order_best_first(ws)[: cfg.k]
    elif select == "sda":
        selected = sda_select(S, cfg.k)
    elif select == "rrf":
        selected = rrf_select(S, cfg.k, cfg.rrf_c)
    elif select == "atf":
        selected = atf_filter(ws, cfg.k, cfg.atf_kappa)
    else:  # pragma: no cover - internal misuse
        raise ValueError(select)
    answer, raw = await _generate_from(ctx, selected, select)
    return TreatmentOutcome(answer, raw, selected, assessment, ws)


def _scored_treatment(cot: bool, select: str, doc: str) -> Treatment:
    """A treatment that scores the documents (CoT or not) and selects top k by ``select``."""

    async def run(ctx: TreatmentContext) -> TreatmentOutcome:
        return await _scored_topk(ctx, cot=cot, select=select)

    run.__doc__ = doc
    return run


_three_agent = _scored_treatment(False, "weighted", "MADARA §5.3 (2) 3-Agent: base scores, weighted top k.")
_cot = _scored_treatment(True, "weighted", "MADARA §4.1 CoT: de-polarised scores, weighted top k.")
_sda = _scored_treatment(False, "sda", "MADARA §4.2 SDA (Algorithm 1): base scores, percentile ranks, top k.")
_sda_cot = _scored_treatment(
    True, "sda", 'CoT de-polarised scores (§4.1) aligned by SDA (Algorithm 1): MADARA Table 14 / Appendix C "SDA+CoT".'
)
_rrf = _scored_treatment(False, "rrf", "MADARA Appendix C RRF: base scores, reciprocal rank fusion.")
_atf = _scored_treatment(False, "atf", "MADARA §4.3 ATF: base scores, keep >= mu - kappa sigma.")


async def _extract_and_vote(
    ctx: TreatmentContext, indices: list[int], weights: list[float] | None
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    docs = [ctx.documents[i] for i in indices]
    replies = await extract_per_document(ctx.model, ctx.question, docs, ctx.task, ctx.config, ctx.ledger)
    answers = [a for a, _ in replies]
    winner, groups = vote(answers, weights)
    candidates = [
        {
            "doc_index": i,
            "doc_id": ctx.documents[i].doc_id,
            "answer": a,
            "raw": raw,
            "weight": None if weights is None else weights[n],
        }
        for n, (i, (a, raw)) in enumerate(zip(indices, replies, strict=True))
    ]
    group_view = [{"answer": g.answer, "weight": g.weight, "members": [indices[p] for p in g.members]} for g in groups]
    return winner, candidates, group_view


async def _assessed_vote(ctx: TreatmentContext, weighted: bool) -> TreatmentOutcome:
    """The top-k documents by weighted score, one answer each, then a vote weighted by score or uniform."""
    assessment = await _assess(ctx, cot=False)
    S = assessment.matrix
    ws = [float(v) for v in weighted_scores(S, ctx.config.weights)] if S else []
    selected = order_best_first(ws)[: ctx.config.k]
    weights = [ws[i] for i in selected] if weighted else None
    winner, candidates, groups = await _extract_and_vote(ctx, selected, weights)
    return TreatmentOutcome(winner, "", selected, assessment, ws, candidates, {"vote_groups": groups})


async def _pde(ctx: TreatmentContext) -> TreatmentOutcome:
    """MADARA §4.4 PDE: per-document extraction, votes weighted by the assessment scores."""
    return await _assessed_vote(ctx, weighted=True)


async def _pde_unif(ctx: TreatmentContext) -> TreatmentOutcome:
    """MADARA Table 1 "Unif.": PDE's assessment-guided top-k documents, then a uniform vote."""
    return await _assessed_vote(ctx, weighted=False)


async def _pde_random(ctx: TreatmentContext) -> TreatmentOutcome:
    selected = random_subset(len(ctx.documents), ctx.config.k, ctx.seed)
    winner, candidates, groups = await _extract_and_vote(ctx, selected, None)
    return TreatmentOutcome(winner, "", selected, None, None, candidates, {"vote_groups": groups})


# --------------------------------------------------------------------------- call structures

_SCORED = ("3-agent", "cot", "sda", "sda-cot", "rrf", "atf")  # 3 agents x m documents, then one generation
_VOTED = ("pde", "pde-unif")  # 3 agents x m documents, then one extraction per top-k document


def treatment_shape(method: str, cfg: AssessConfig, documents: float) -> CallShape:
    """The calls of treatment ``method`` on an item of ``documents`` gathered documents (the
    estimate's, :mod:`bcas.callshape`), from the structure above: ``nf`` one generation over
    :func:`nf_count` documents; the scored treatments three assessment agents per document
    (one call each) and the generation over the k chosen; PDE one extraction per chosen
    document; ``pde-random`` its k extractions alone; the routed pipeline (``madara``)
    as the treatment the router picks, between the cheapest and the dearest it can pick.
    A treatment registered with a ``shape`` metadata (``(AssessConfig, documents) -> CallShape``)
    gives its own; one without is assumed to assess every document and generate once."""
    m = float(documents)
    agents = float(len(AGENTS))
    k = float(min(cfg.k, documents))
    score_cap = float(cfg.max_tokens if method in ("cot", "sda-cot") else cfg.score_max_tokens)
    answer_cap = float(cfg.answer_max_tokens)
    searches = 1.0 if cfg.doc_source == "retrieval" else 0.0
    if method == ROUTED:
        routes = [treatment_shape(name, cfg, documents) for name in routed_modes().values()]
        dear = max(routes, key=lambda r: r.calls)
        cheap = min(routes, key=lambda r: r.calls)
        return CallShape(
            calls=dear.calls, calls_min=cheap.calls, searches=searches, out_tokens=dear.out_tokens,
            passages=dear.passages, note="the route the RSC profile picks decides",
        )  # fmt: skip
    if method == "nf":
        shown = float(nf_count(cfg, int(documents)))
        return CallShape(calls=1, searches=searches, out_tokens=answer_cap, passages=shown)
    if method in _SCORED:
        return CallShape(
            calls=agents * m + 1, searches=searches, out_tokens=agents * m * score_cap + answer_cap,
            passages=agents * m + k,
        )  # fmt: skip
    if method in _VOTED:
        return CallShape(
            calls=agents * m + k, searches=searches, out_tokens=agents * m * score_cap + k * answer_cap,
            passages=agents * m + k,
        )  # fmt: skip
    if method == "pde-random":
        return CallShape(calls=k, searches=searches, out_tokens=k * answer_cap, passages=k)
    declared = TREATMENTS.meta(method, "shape") if method in TREATMENTS else None
    if callable(declared):
        shape: CallShape = declared(cfg, documents)
        return shape
    return CallShape(
        calls=agents * m + 1, searches=searches, out_tokens=agents * m * score_cap + answer_cap,
        passages=agents * m + k, note=f"{method} declares no call structure: assessed and generated as 3-Agent",
    )  # fmt: skip


# --------------------------------------------------------------------------- records


def context_doc_ids(docs: Sequence[AssessDocument], outcome: TreatmentOutcome) -> list[str]:
    """Document ids passed to generation, first occurrence kept (PDE: the union of its calls)."""
    indices = [c["doc_index"] for c in outcome.candidates] if outcome.candidates else list(outcome.selected)
    return list(dict.fromkeys(docs[i].doc_id for i in indices))


def _resolve_decision(profile: Any, decision: RoutingDecision | None, cfg: AssessConfig) -> RoutingDecision:
    if decision is not None:
        return decision
    if profile is not None:
        routed: RoutingDecision = profile.decision(cfg.tau_nf, cfg.rho1_threshold)
        return routed
    raise AssessError(
        "method 'madara' routes with an RSC profile: pass profile=await bcas.assess.rsc.probe(...) "
        "or decision=bcas.assess.router.decide(em_nf, rho_star, rho_1)"
    )


# The ledger's counts a MADARA record carries in ``extra``.
_RECORD_USAGE_FIELDS = (
    "llm_calls",
    "assessment_calls",
    "generation_calls",
    "rescore_calls",
    "rerank_calls",
    "cached_calls",
    "model_errors",
)


def _usage_fields(usage: Usage) -> dict[str, Any]:
    return {name: getattr(usage, name) for name in _RECORD_USAGE_FIELDS}


async def run_madara(
    item: Any,
    model: ChatModel,
    retriever: Any,
    config: RunConfig | AssessConfig,
    *,
    dataset: Any = None,
    task: str | None = None,
    profile: Any = None,
    decision: RoutingDecision | None = None,
    run_id: str | None = None,
) -> Record:
    """Run ``config.assess.method`` on one item; returns its record (MADARA §4-§5, Algorithm 2).

    ``dataset`` (a ``bcas.data.Dataset``) supplies name, hash, task and scoring
    rule; the task comes from ``task``, ``AssessConfig.task`` or the dataset's task
    (:func:`~bcas.assess.generate.task_of`; ``factoid`` without one), never from the
    item's gold answers.  Method ``madara`` needs ``profile`` (an
    ``RSCProfile`` with ``em_nf``) or ``decision``.  A model failure during
    generation yields a record with an empty prediction, ``stop_reason``
    ``error`` and the error text in ``error``; a failed assessment call is a
    missing score.  ``Record.method`` is ``"madara"``; ``extra["assess_method"]``
    is the configured method and ``extra["treatment"]`` the one applied.  The answer is
    :func:`answer_madara`'s, made a record by :func:`bcas.records.build_record`.
    """
    run_config = config if isinstance(config, RunConfig) else RunConfig(assess=config)
    answer = await answer_madara(
        item, model, retriever, run_config, dataset=dataset, task=task, profile=profile, decision=decision
    )
    scoring = getattr(dataset, "scoring", None) or SCORING_FOR_TASK.get(answer.extra["task"], "qa")
    correct, f1 = score_prediction(answer.prediction, list(item.answers), scoring)
    identity = AnswerIdentity(
        run_id=run_id or uuid.uuid4().hex[:12],
        config_id=run_config.config_id,
        config=run_config.to_dict(),
        dataset=getattr(dataset, "name", None) or "",
        dataset_hash=getattr(dataset, "hash", None) or "",
        item_id=item.id,
        question=item.question,
        answers=list(item.answers),
        model_fingerprint="",
        prompt_hash="",
    )
    return build_record(answer, identity, Grades(bool(correct), float(f1)))


async def answer_madara(
    item: Any,
    model: ChatModel,
    retriever: Any,
    config: RunConfig | AssessConfig,
    *,
    dataset: Any = None,
    task: str | None = None,
    profile: Any = None,
    decision: RoutingDecision | None = None,
) -> Answer:
    """MADARA's answer to one item (MADARA §4-§5, Algorithm 2): as :func:`run_madara`, without
    identity or grades (``extra["task"]`` is the task it answered as)."""
    run_config = config if isinstance(config, RunConfig) else RunConfig(assess=config)
    cfg = run_config.assess
    started = time.perf_counter()
    task = task or task_of(cfg, getattr(dataset, "task", None))
    method, routing = _choose_treatment(cfg, profile, decision)
    fn = TREATMENTS.get(method)

    ledger = Ledger(seed=run_config.seed)
    with metering() as meter:  # the llm reranker's calls, made for this item while retrieving
        docs = await gather_documents(item, retriever, cfg, run_config.seed)
    ledger.add_metered("rerank", meter, tag="retrieve")
    ctx = TreatmentContext(model, item.question, docs, task, cfg, f"{run_config.seed}:{item.id}", ledger)
    outcome, stop_reason, error = await _apply_treatment(fn, ctx)
    usage = ledger.usage()
    run = _MadaraRun(item, cfg, method, task, docs, outcome, ledger, usage, routing, profile)
    return Answer(
        prediction=outcome.prediction,
        method="madara",
        model=getattr(model, "model_id", "unknown"),
        label=f"madara/{cfg.method}",
        searches_used=1 if cfg.doc_source == "retrieval" else 0,
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        llm_calls=usage.llm_calls,
        stop_reason=stop_reason,
        error=error,
        latency_s=time.perf_counter() - started,
        steps=_madara_steps(run),
        extra=_madara_extra(run),
    )


def _choose_treatment(
    cfg: AssessConfig, profile: Any, decision: RoutingDecision | None
) -> tuple[str, RoutingDecision | None]:
    """The treatment to apply and, for method ``madara``, the routing decision that chose it (Algorithm 2)."""
    if cfg.method != "madara":
        return cfg.method, None
    routing = _resolve_decision(profile, decision, cfg)
    return routed_modes()[routing.mode], routing


async def _apply_treatment(fn: Treatment, ctx: TreatmentContext) -> tuple[TreatmentOutcome, str, str | None]:
    """The treatment's outcome, stop reason and error: a model failure is an empty answer, not a raise."""
    try:
        return await fn(ctx), "answered", None
    except ModelError as exc:
        return TreatmentOutcome(""), "error", f"ModelError: {exc}"


@dataclass
class _MadaraRun:
    """What one MADARA run produced, read by the record's ``steps`` and ``extra``."""

    item: Any
    cfg: AssessConfig
    method: str  # the treatment applied (the routed one for ``madara``)
    task: str
    docs: list[AssessDocument]
    outcome: TreatmentOutcome
    ledger: Ledger
    usage: Usage
    routing: RoutingDecision | None
    profile: Any

    def tokens(self, kind: str) -> tuple[int, int]:
        """Prompt and completion tokens of the ledger's calls of ``kind``."""
        entries = [e for e in self.ledger.entries if e.kind == kind]
        return sum(e.prompt_tokens for e in entries), sum(e.completion_tokens for e in entries)


def _madara_steps(run: _MadaraRun) -> list[dict[str, Any]]:
    """The record's steps: retrieve, rerank (the ``llm`` reranker's calls, when it made any),
    assess (when the treatment scored documents), generate."""
    docs, outcome, assessment = run.docs, run.outcome, run.outcome.assessment
    steps: list[dict[str, Any]] = [
        {
            "kind": "retrieve",
            "query": run.item.question,
            "source": run.cfg.doc_source,
            "retrieved": [d.chunk_id or d.doc_id for d in docs],
            "docs": [d.doc_id for d in docs],
        }
    ]
    if run.usage.rerank_calls:
        t_in, t_out = run.tokens("rerank")
        cached = sum(1 for e in run.ledger.entries if e.kind == "rerank" and e.cached)
        steps.append(
            {
                "kind": "rerank",
                "query": run.item.question,
                "calls": run.usage.rerank_calls,
                "tokens_in": t_in,
                "tokens_out": t_out,
                "note": f"{run.usage.rerank_calls} re-ranking calls ({cached} from cache)",
            }
        )
    if assessment is not None:
        t_in, t_out = run.tokens("assessment")
        steps.append(
            {
                "kind": "assess",
                "cot": assessment.cot,
                "calls": run.usage.assessment_calls,
                "tokens_in": t_in,
                "tokens_out": t_out,
                "docs": [d.doc_id for d in docs],
            }
        )
    t_in, t_out = run.tokens("generation")
    steps.append(
        {
            "kind": "generate",
            "output": outcome.raw if outcome.raw else [c["raw"] for c in outcome.candidates],
            "calls": run.usage.generation_calls,
            "tokens_in": t_in,
            "tokens_out": t_out,
            "docs": [docs[i].doc_id for i in outcome.selected],
        }
    )
    return steps


def _madara_extra(run: _MadaraRun) -> dict[str, Any]:
    """The record's ``extra``: documents, scores, selection, routing and the ledger's counts."""
    cfg, docs, outcome, assessment, routing = run.cfg, run.docs, run.outcome, run.outcome.assessment, run.routing
    extra: dict[str, Any] = {
        "assess_method": cfg.method,
        "treatment": run.method,
        "task": run.task,
        "doc_source": cfg.doc_source,
        "doc_ids": [d.doc_id for d in docs],
        "doc_order": DOC_ORDER,
        "retrieved_docs": sum(1 for d in docs if not d.padded),
        "chunk_ids": [d.chunk_id for d in docs],
        "scores": assessment.matrix if assessment is not None else None,
        "agents": ["relevance", "consistency", "conflict"],
        "doc_scores": outcome.doc_scores,
        "selected_docs": [docs[i].doc_id for i in outcome.selected],
        "selected_indices": list(outcome.selected),
        "context_doc_ids": context_doc_ids(docs, outcome),
        "context_chunk_ids": [docs[i].chunk_id or docs[i].doc_id for i in outcome.selected],
        "candidates": outcome.candidates,
        "missing_scores": assessment.missing if assessment is not None else [],
        "reasoning": assessment.reasoning if assessment is not None and assessment.cot else None,
        "routing": routing.to_dict() if routing is not None else None,
        "rsc_profile_id": getattr(run.profile, "id", None) or (routing.profile_id if routing else None),
        **_usage_fields(run.usage),
        **outcome.extra,
    }
    if cfg.method == "atf" or run.method == "atf":
        extra["atf_kappa"] = cfg.atf_kappa
    return extra


async def run_nf_for_probe(
    model: ChatModel,
    items: Sequence[Any],
    per_item_docs: Sequence[list[AssessDocument]],
    config: AssessConfig,
    results: list[dict[str, Any]] | None = None,
    ledger: Ledger | None = None,
    task: str | None = None,
) -> tuple[float, Usage]:
    """EvalNF(M, C) of Algorithm 2, line 6: No-Filter exact match on the calibration items.

    No-Filter reads every gathered document (``nf_docs`` caps it) as the ``nf`` treatment
    does; EM is MADARA's
    strict EM (§5.4: lower-case and white space only) of the parsed answer.  ``results``,
    when given, receives one entry per item (its answer, whether it matched, its calls and
    tokens); ``ledger``, when given, receives the calls (each tagged ``nf:<item id>``).
    ``task``: the calibration dataset's task (:func:`~bcas.assess.generate.task_of`), one
    for every item.
    """
    ledger = Ledger() if ledger is None else ledger
    task = task_of(config, task)
    start = len(ledger.entries)

    async def one(item: Any, docs: list[AssessDocument]) -> dict[str, Any]:
        used = docs[: nf_count(config, len(docs))]
        tag = f"nf:{item.id}"
        answer, _ = await generate_answer(model, item.question, used, task, config, ledger, tag=tag)
        mine = [e for e in ledger.entries if e.tag == tag]
        return {
            "item_id": item.id,
            "answer": answer,
            "correct": strict_exact_match(answer, list(item.answers)),
            "docs": [d.doc_id for d in used],
            "calls": len(mine),
            "tokens_in": sum(e.prompt_tokens for e in mine),
            "tokens_out": sum(e.completion_tokens for e in mine),
        }

    outcomes = await asyncio.gather(*(one(i, d) for i, d in zip(items, per_item_docs, strict=True)))
    if results is not None:
        results.extend(outcomes)
    usage = Ledger(entries=ledger.entries[start:]).usage()
    return (sum(o["correct"] for o in outcomes) / len(outcomes) if outcomes else 0.0), usage
