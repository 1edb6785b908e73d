"""The papers' grids as data (BCAS §3.8-§3.10; MADARA §4-§6, Appendices C and K) and the
smoke grid.  See :mod:`bcas.grids` for what each measures.  Each grid is registered
(:func:`bcas.grids.table.register_grid`) where it is defined."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bcas.config import ACTION_FORMATS, GUARDED_LOOP, AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.grids.table import Grid, GridEntry, register_grid


def _bcas(
    mode: str = "hybrid",
    searches: int | None = None,
    tokens: int = 16000,
    plan: bool = False,
    reflect: bool = False,
    candidates: int = 100,
    reference: bool = False,
    requires: tuple[str, ...] = (),
    per_turn: int | None = None,
    datasets: tuple[str, ...] = (),
    action_format: str = "json",
    name: str = "",
    cite: bool = False,
    abstain: bool = False,
    guarded: bool = False,
    k: int = 5,
) -> GridEntry:
    # The paper grids run the paper's loop (the AgentConfig defaults, BCAS §3.4); the
    # project's own CPU grids keep the guarded rules (bcas.config.GUARDED_LOOP).
    rules = GUARDED_LOOP if guarded else {}
    budget = Budget(max_searches=searches, max_total_tokens=tokens)
    if per_turn is not None:
        budget = replace(budget, per_turn_max_tokens=per_turn)
    config = RunConfig(
        budget=budget,
        retrieval=RetrievalConfig(mode=mode, candidates=candidates, k=k),
        agent=AgentConfig(
            planning=plan, reflection=reflect, action_format=action_format, cite=cite, abstain=abstain, **rules
        ),
    )
    return GridEntry("bcas", config, reference=reference, requires=requires, datasets=datasets, name=name)


# MADARA §5.2: "BM25 retrieval" -- plain BM25, without BCAS's phrase boosting.
MADARA_RETRIEVAL = RetrievalConfig(mode="bm25", phrase_boost=False)


def _madara(
    method: str,
    reference: bool = False,
    doc_source: str = "retrieval",
    datasets: tuple[str, ...] = (),
    compare: tuple[tuple[str, str], ...] = (),
    retrieval: RetrievalConfig = MADARA_RETRIEVAL,
    **kw: object,
) -> GridEntry:
    # §5.5 "top-k=5 from 10 retrieved documents": every item chooses among n_docs documents.
    kw.setdefault("pad_docs", doc_source == "retrieval")
    config = RunConfig(
        retrieval=retrieval,
        assess=AssessConfig(method=method, doc_source=doc_source, **kw),  # type: ignore[arg-type]
    )
    return GridEntry("madara", config, reference=reference, datasets=datasets, compare=compare)


NF = "madara/nf"
SCORING = "scoring-only vs NF"  # MADARA Table 14, top section
ISOLATION = "isolation (PDE)"  # MADARA Table 14, bottom section
ROUTED = "routed vs NF"  # MADARA Table 2
BCAS_PAPER_RETRIEVAL = {"embedder": "bge-m3", "reranker": "bge-reranker-v2-m3"}  # BCAS §3.5


def _vs_nf(method: str, family: str) -> GridEntry:
    """A MADARA treatment tested against no filtering (NF) in the Holm family ``family``."""
    return _madara(method, compare=((NF, family),))


SEARCH_SCALING = Grid(
    "search_scaling",
    (
        _bcas(searches=1, reference=True),
        _bcas(searches=2),
        _bcas(searches=3),
        _bcas(searches=None),
        _bcas(searches=None, plan=True),
        _bcas(searches=None, plan=True, reflect=True),
    ),
    datasets=("triviaqa", "hotpotqa", "2wikimultihopqa"),
    description="BCAS §3.9 search scaling: hybrid retrieval, 16K tokens",
    paper_retrieval=BCAS_PAPER_RETRIEVAL,
    paper="BCAS §3.9",
)
register_grid(SEARCH_SCALING)

CONTEXT_SCALING = Grid(
    "context_scaling",
    (
        _bcas(tokens=500),
        _bcas(tokens=1000),
        _bcas(tokens=2000),
        _bcas(tokens=4000),
        _bcas(tokens=16000, reference=True),
        _bcas(tokens=16000, plan=True),
        _bcas(tokens=16000, plan=True, reflect=True),
    ),
    datasets=("triviaqa", "hotpotqa", "2wikimultihopqa"),
    description="BCAS §3.10 context scaling: unlimited hybrid searches",
    paper_retrieval=BCAS_PAPER_RETRIEVAL,
    paper="BCAS §3.10",
)
register_grid(CONTEXT_SCALING)

ABLATION = Grid(
    "ablation",
    (
        _bcas(mode="bm25", reference=True),
        _bcas(mode="bm25", plan=True),
        _bcas(mode="bm25", reflect=True),
        _bcas(mode="bm25", plan=True, reflect=True),
        _bcas(mode="hybrid"),
        _bcas(mode="hybrid_rerank", candidates=100),
    ),
    datasets=("hotpotqa",),
    description="BCAS §3.8 component ablation on HotpotQA (BM25 baseline, unlimited searches, 16K)",
    paper_retrieval=BCAS_PAPER_RETRIEVAL,
    paper="BCAS §3.8",
)
register_grid(ABLATION)

_RSC_ASSESS = AssessConfig(doc_source="retrieval", pad_docs=True)  # the probe sees what the treatments see
CALIBRATION_N = AssessConfig().calibration_n  # MADARA §5.5: n = 100 calibration queries

MADARA = Grid(
    "madara",
    (
        _madara("nf", reference=True),
        _vs_nf("3-agent", SCORING),
        _vs_nf("cot", SCORING),
        _vs_nf("sda", SCORING),
        _vs_nf("sda-cot", SCORING),
        _vs_nf("atf", SCORING),
        _madara("pde", compare=((NF, ISOLATION), ("madara/3-agent", ISOLATION))),
        _vs_nf("pde-unif", ISOLATION),
        _vs_nf("pde-random", ISOLATION),
        _vs_nf("madara", ROUTED),
    ),
    datasets=("conflictqa", "fever"),
    description="MADARA §4-§6 treatments and the routed pipeline (10 BM25 documents per query, 5 kept, NF reads 10)",
    primary_metric="strict_em",
    holdout=CALIBRATION_N,
    paper="MADARA §4-§6, Table 2, Table 14",
)
register_grid(MADARA)

MADARA_HELDOUT = Grid(
    "madara_heldout",
    (
        _madara("nf", reference=True),
        _vs_nf("pde-random", ISOLATION),
        _vs_nf("pde-unif", ISOLATION),
        _vs_nf("pde", ISOLATION),
        GridEntry("rsc", RunConfig(retrieval=MADARA_RETRIEVAL, assess=_RSC_ASSESS)),
    ),
    datasets=("triviaqa",),
    description=(
        "MADARA §5.2 held-out TriviaQA: PDE component ablation (Table 1) and RSC probe (Table 4); the probe's "
        "calibration items are held out of evaluation (the shipped 50-item sample needs --bcas-calibration-n)"
    ),
    primary_metric="strict_em",
    holdout=CALIBRATION_N,  # Algorithm 2: C disjoint from the evaluated items, as in ``madara``
    paper="MADARA §5.2, Table 1, Table 4",
)
register_grid(MADARA_HELDOUT)

RSC = Grid(
    "rsc",
    (GridEntry("rsc", RunConfig(retrieval=MADARA_RETRIEVAL, assess=_RSC_ASSESS)),),
    datasets=("conflictqa", "fever"),
    description="MADARA §3 / Appendix F: Reasoning-Score Coupling probe per model x dataset on calibration_n items",
    primary_metric="strict_em",
    paper="MADARA §3, Appendix F",
)
register_grid(RSC)

MUSIQUE_ASSESS = {"doc_source": "item", "n_docs": 20}  # §6.5: "20 mixed supporting/distractor paragraphs"


def _musique(method: str, **kw: object) -> GridEntry:
    return _madara(method, **{**MUSIQUE_ASSESS, **kw})  # type: ignore[arg-type]


MUSIQUE = Grid(
    "musique",
    (
        _musique("nf", reference=True),
        _musique("3-agent", compare=((NF, SCORING),)),
        _musique("cot", compare=((NF, SCORING),)),
        _musique("sda", compare=((NF, SCORING),)),
        _musique("pde", compare=((NF, ISOLATION), ("madara/3-agent", ISOLATION))),
        _musique("pde-random", compare=((NF, ISOLATION),)),
        _musique("madara", compare=((NF, ROUTED),)),
    ),
    datasets=("musique",),
    limit=100,
    description="MADARA §6.5 multi-hop: 100 MuSiQue queries x 20 paragraphs (NF reads 20, treatments keep 5)",
    primary_metric="strict_em",
    holdout=CALIBRATION_N,
    paper="MADARA §6.5, Table 6, Appendix J",
)
register_grid(MUSIQUE)

RRF = "madara/rrf"
SDA_VS_RRF = Grid(
    "sda_vs_rrf",
    (
        _madara("rrf", reference=True),
        _madara("sda", compare=((RRF, "SDA vs RRF"),)),
        _madara("sda-cot", compare=((RRF, "SDA vs RRF"),)),
    ),
    datasets=("conflictqa",),
    description="MADARA Appendix C: SDA and SDA+CoT against RRF (k = 60) on the same 3-agent scores",
    primary_metric="strict_em",
    holdout=CALIBRATION_N,
    paper="MADARA Appendix C, Table 7",
)
register_grid(SDA_VS_RRF)

# MADARA §6.4: a dense retriever (Contriever) and a generative reranker (Qwen3-0.6B) in
# place of BM25; the reranker re-orders BM25's 100 best candidates (its depth is not stated).
MADARA_DENSE = RetrievalConfig(mode="dense")
MADARA_RERANKED = RetrievalConfig(mode="bm25_rerank", phrase_boost=False, candidates=100)


def _robust(method: str, retrieval: RetrievalConfig, tag: str, reference: bool = False) -> GridEntry:
    entry = _madara(method, retrieval=retrieval, reference=reference)
    family = f"isolation ({tag})"
    compare = ((f"{tag}/nf", family),) if method != "nf" else ()
    return replace(entry, name=f"{tag}/{method}", compare=compare)


RETRIEVAL_ROBUSTNESS = Grid(
    "retrieval_robustness",
    (
        _robust("nf", MADARA_RETRIEVAL, "bm25", reference=True),
        _robust("pde", MADARA_RETRIEVAL, "bm25"),
        _robust("nf", MADARA_DENSE, "dense"),
        _robust("pde", MADARA_DENSE, "dense"),
        _robust("nf", MADARA_RERANKED, "rerank"),
        _robust("pde", MADARA_RERANKED, "rerank"),
    ),
    datasets=("triviaqa",),
    description="MADARA §6.4 retrieval robustness: NF and PDE with BM25, dense, and reranked BM25 (TriviaQA)",
    primary_metric="strict_em",
    paper="MADARA §6.4, Table 5, Appendix H.1",
    paper_retrieval={"embedder": "contriever", "reranker": "qwen3-reranker-0.6b"},
)
register_grid(RETRIEVAL_ROBUSTNESS)

# Appendix K: the cross-encoder keeps 5 of BM25's 10 documents; NF reads those 5.
CROSS_ENCODER_RETRIEVAL = RetrievalConfig(mode="bm25_rerank", phrase_boost=False, candidates=10)
CROSS_ENCODER = Grid(
    "cross_encoder",
    (
        _madara("nf", reference=True),
        replace(
            _madara("nf", retrieval=CROSS_ENCODER_RETRIEVAL, n_docs=5),
            name="ce/nf",
            compare=((NF, "reranking vs NF"),),
        ),
        _vs_nf("3-agent", SCORING),
    ),
    datasets=("conflictqa", "fever"),
    description="MADARA Appendix K: reranked top 5 of BM25's 10 vs NF on all 10, with 3-Agent's cost beside",
    primary_metric="strict_em",
    holdout=CALIBRATION_N,
    paper="MADARA Appendix K, Table 18",
    paper_retrieval={"reranker": "ms-marco-MiniLM-L-12-v2"},
)
register_grid(CROSS_ENCODER)

# Small enough for 2 CPU cores in about three minutes with the embedded 135M model:
# short turns, a 2K-token trajectory budget, three passages a search (BCAS §3.5 shows
# five; each search's passages are most of a call's new prompt tokens), two items per
# case (the fewest a paired comparison has).  docs/measured.md gives where the time goes:
# at five items and five passages the grid took 9 to 10 minutes, PDE's twelve
# assessments per item and the multi-search cases' growing prompts the most.  The hybrid
# case runs on 2WikiMultihopQA, whose 180-paragraph collection embeds in seconds
# (HotpotQA's 4K take minutes on CPU).
_SMOKE_K = 3


def _smoke_bcas(mode: str, searches: int, datasets: tuple[str, ...], **options: Any) -> GridEntry:
    return _bcas(
        mode=mode, searches=searches, tokens=2000, per_turn=160, guarded=True, datasets=datasets, k=_SMOKE_K, **options
    )


_SMOKE_BM25 = ("hotpotqa",)
# The smoke grid's MADARA cases read each item's own documents (fast on CPU); their
# configuration is unchanged since the smoke grid was introduced.
_SMOKE_RETRIEVAL = RetrievalConfig(mode="bm25")
SMOKE = Grid(
    "smoke",
    (
        _smoke_bcas("bm25", 1, _SMOKE_BM25, reference=True),
        _smoke_bcas("bm25", 3, _SMOKE_BM25),
        _smoke_bcas("bm25", 3, _SMOKE_BM25, plan=True),
        _smoke_bcas("hybrid", 2, ("2wikimultihopqa",)),
        _madara("nf", datasets=("conflictqa",), max_tokens=48, doc_source="item", retrieval=_SMOKE_RETRIEVAL),
        # k=2: half of conflictqa's 4 documents per item, as §5.5 keeps 5 of 10 (a filter needs more than k).
        _madara("pde", datasets=("conflictqa",), max_tokens=48, doc_source="item", k=2, retrieval=_SMOKE_RETRIEVAL),
        _madara("sda", datasets=("conflictqa",), max_tokens=48, doc_source="item", k=2, retrieval=_SMOKE_RETRIEVAL),
    ),
    datasets=("hotpotqa", "2wikimultihopqa", "conflictqa"),
    limit=2,
    description="smoke test of the whole stack on the embedded CPU default",
)
register_grid(SMOKE)

# The action format as an axis (BCAS §3.1 asks for a model-agnostic tool description, so
# the format is measured, not fixed): the smoke grid's short turns, two searches (so the
# model also chooses when to stop), the format the only difference.  A label names a
# format other than JSON (RunConfig.label); the JSON entry is named so that every view
# shows its format too.  Each format is compared with JSON per model x dataset.
_FORMAT_ENTRIES = tuple(
    _bcas(mode="bm25", searches=2, tokens=2000, per_turn=160, guarded=True, action_format=fmt, reference=fmt == "json")
    for fmt in ACTION_FORMATS
)
FORMATS = Grid(
    "formats",
    tuple(replace(e, name=f"{e.label}/json") if e.reference else e for e in _FORMAT_ENTRIES),
    datasets=("hotpotqa",),
    limit=5,
    description="action formats (BCAS §3.1): JSON actions vs Thought/Action/Query text vs native tool calls",
    holm_scope="cell",
)
register_grid(FORMATS)

# Beyond accuracy (no paper grid: the metrics of docs/metrics.md that need the loop to offer
# something more): the formats grid's cases with a cite list in the final answer (citation
# precision / recall, ALCE §2.2) and with an abstain action (SimpleQA's not attempted), each
# compared with the plain loop per model x dataset.
EVIDENCE = Grid(
    "evidence",
    (
        _bcas(mode="bm25", searches=2, tokens=2000, per_turn=160, guarded=True, reference=True),
        _bcas(mode="bm25", searches=2, tokens=2000, per_turn=160, guarded=True, cite=True),
        _bcas(mode="bm25", searches=2, tokens=2000, per_turn=160, guarded=True, abstain=True),
    ),
    datasets=("hotpotqa",),
    limit=5,
    description="citations and abstention: the loop asked for a cite list, and offered an abstain action",
    holm_scope="cell",
)
register_grid(EVIDENCE)
