"""Evaluation grids as data: tables of configurations taken from the papers.

A grid is a list of ``GridEntry`` rows plus the datasets it runs on by default.
Adding an experiment means adding a table here, not a new test function.

- ``search_scaling``: BCAS §3.9 — hybrid retrieval, 16K completion tokens,
  max_searches 1, 2, 3, unlimited; unlimited + planning; + planning and reflection.
- ``context_scaling``: BCAS §3.10 — 500, 1K, 2K, 4K, 16K completion tokens with
  unlimited hybrid searches; 16K + planning; + planning and reflection.
- ``ablation``: BCAS §3.8 — BM25 baseline (unlimited searches, 16K tokens);
  + Plan; + Reflection; + Plan+Reflection; + HS; + HS+R.
- ``madara``: MADARA §4–§6 — NF, 3-Agent, CoT, SDA, SDA+CoT, ATF, PDE, Unif.,
  PDE-Random and the routed MADARA pipeline on CONFLICTS and FEVER: BM25 retrieves 10
  documents per query from the dataset's collection, treatments keep 5, NF reads the
  top 5 (§5.5); evaluated items never include the router's 100 calibration items.
- ``madara_heldout``: MADARA §5.2 / Table 1 / Table 4 — the held-out TriviaQA replication
  of the isolation finding (NF, PDE-Random, Unif., PDE) and of the RSC probe.
- ``rsc``: MADARA §3 / Appendix F — the RSC probe per model × dataset on its
  ``calibration_n`` calibration items.
- ``smoke``: a handful of configurations on a few items, the README's main job on
  the embedded CPU default.

Each grid declares what it measures and how it is tested:

- ``primary_metric``: ``judge`` (BCAS grids, §3.6: the LLM judge's verdict when a judge
  graded the answers, SQuAD EM otherwise; the summary says which) or ``strict_em``
  (MADARA grids, §5.4, with strict token F1 beside it); see :mod:`bcas.grading.outcomes`.
- the paired comparisons: by default every entry against the grid's reference, one Holm
  family per grid; an entry's ``compare`` names its own (entry label, family) pairs, and
  ``holm_scope="model_dataset"`` makes each family per model × dataset (MADARA Table 14:
  scoring-only methods vs NF in one family; PDE and PDE-Random vs NF and PDE vs 3-Agent
  in another).
- ``holdout``: calibration items set aside before the evaluated items are drawn
  (:func:`bcas.data.load_evaluation`).
- ``paper_retrieval``: the retrieval models the paper ran with, so the report can say
  when a run used others (``--bcas-embedder``, ``--bcas-reranker``).

Budgets (BCAS §3.3): the paper grids cap only ``max_searches`` and
``max_total_tokens``; every call may use what remains of the token budget
(``Budget.per_turn_max_tokens`` is ``None``) and the turn bound derives from the
budgets (``AgentConfig.max_turns`` is ``None``).  Only the smoke grid sets a per-call
cap (160 tokens), so that the 135M CPU model stays fast; with its limited searches
its derived turn bound (searches + 3 unusable turns) is below the former fixed cap of
12 turns, so the smoke grid runs exactly as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from bcas.config import AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.grading.outcomes import JUDGE, resolve
from bcas.registry import RUN_KINDS, Registry, RegistryError, mode_uses

HOLM_SCOPES = ("grid", "model_dataset")


@dataclass(frozen=True)
class GridEntry:
    """One configuration of a grid.

    ``kind`` names the run kind (:data:`bcas.registry.RUN_KINDS`: BCAS agent loop,
    MADARA treatment, RSC probe, or a registered one);
    ``reference`` marks the configuration the grid's paired comparisons use;
    ``requires`` lists requirement markers (``gpu``, ``slow``, ``judge``, ``vllm``);
    ``compare``: (label of another entry, Holm family) pairs this entry is tested
    against; empty means the grid's reference in the grid's one family.
    """

    kind: str
    config: RunConfig
    reference: bool = False
    requires: tuple[str, ...] = ()
    name: str = ""
    datasets: tuple[str, ...] = ()
    compare: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        template = RUN_KINDS.meta(self.kind, "label", "{config.label}") if self.kind in RUN_KINDS else "{config.label}"
        return str(template).format(config=self.config)


@dataclass(frozen=True)
class Grid:
    """A named table of configurations and the datasets it runs on.

    An entry with its own ``datasets`` runs only on those (of the grid's datasets).
    """

    name: str
    entries: tuple[GridEntry, ...]
    datasets: tuple[str, ...]
    limit: int | None = None
    description: str = ""
    kind_labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    primary_metric: str = JUDGE
    holm_scope: str = "grid"
    holdout: int = 0
    paper_retrieval: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.holm_scope not in HOLM_SCOPES:
            raise ValueError(f"grid {self.name!r}: holm_scope must be one of {HOLM_SCOPES}, got {self.holm_scope!r}")
        for entry in self.entries:
            if entry.kind not in RUN_KINDS:
                raise RegistryError(
                    f"grid {self.name!r}: unknown run kind {entry.kind!r}; registered: {', '.join(RUN_KINDS.names())}"
                )
        labels = [e.label for e in self.entries]
        for entry in self.entries:
            for other, _family in entry.compare:
                if other not in labels or other == entry.label:
                    raise ValueError(
                        f"grid {self.name!r}: entry {entry.label!r} is compared with {other!r}, "
                        f"which is not another entry of the grid ({labels})"
                    )

    def metric(self, judge: bool | None = None, records: Iterable[dict[str, Any]] = ()) -> str:
        """The primary metric as used (:func:`bcas.grading.outcomes.resolve`)."""
        return resolve(self.primary_metric, records, judge)

    def comparisons(self, label: str) -> list[tuple[str, str]]:
        """(label compared with, Holm family) of the entry ``label``; [] for the reference or an unknown label."""
        entry = next((e for e in self.entries if e.label == label), None)
        if entry is None:
            ref = self.reference
            return [] if ref is None or ref.label == label else [(ref.label, "")]
        if entry.compare:
            return list(entry.compare)
        ref = self.reference
        return [] if ref is None or ref is entry else [(ref.label, "")]

    def retrieval_notes(self, configs: Iterable[dict[str, Any]]) -> list[str]:
        """Which retrieval models the run used where the paper names one, and where they differ."""
        notes = []
        for role, paper in self.paper_retrieval.items():
            used = sorted({str((c.get("retrieval") or {}).get(role)) for c in configs if _uses(c, role)})
            if not used:
                continue
            differs = [u for u in used if u != paper]
            tail = f"; differs from the paper's {paper}" if differs else " (the paper's)"
            notes.append(f"{self.name}: {role} {', '.join(used)}{tail}")
        return notes

    def cases(self, datasets: tuple[str, ...] | None = None) -> list[tuple[str, GridEntry]]:
        """(dataset, entry) pairs of this grid, in table order, dataset-major."""
        chosen = datasets or self.datasets
        out = []
        for ds in chosen:
            for entry in self.entries:
                if entry.datasets and ds not in entry.datasets and datasets is None:
                    continue
                out.append((ds, entry))
        return out

    @property
    def reference(self) -> GridEntry | None:
        for entry in self.entries:
            if entry.reference:
                return entry
        return None


def _uses(config: dict[str, Any], role: str) -> bool:
    """Does a run configuration (as a dict) use its retrieval ``role`` (embedder, reranker)?"""
    mode = str((config.get("retrieval") or {}).get("mode", ""))
    return mode_uses(mode, "dense") if role == "embedder" else mode_uses(mode, "rerank")


def with_retrieval_models(entry: GridEntry, embedder: str | None = None, reranker: str | None = None) -> GridEntry:
    """``entry`` with the chosen embedder / reranker where its retrieval mode uses them.

    An entry whose mode uses neither (BM25, the MADARA grids) is returned unchanged, so
    its configuration id, and the answers recorded under it, stay the same.
    """
    r = entry.config.retrieval
    changes: dict[str, Any] = {}
    if embedder and mode_uses(r.mode, "dense") and r.embedder != embedder:
        changes["embedder"] = embedder
    if reranker and mode_uses(r.mode, "rerank") and r.reranker != reranker:
        changes["reranker"] = reranker
    if not changes:
        return entry
    return replace(entry, config=replace(entry.config, retrieval=replace(r, **changes)))


def with_calibration_n(entry: GridEntry, calibration_n: int) -> GridEntry:
    """``entry`` probing ``calibration_n`` calibration items (MADARA Algorithm 2's C) instead of its own number.

    For the entries that use calibration items (the RSC probe, the routed pipeline;
    the harness asks the run kind); the number is part of the configuration id, so a
    quick run's profiles and answers never stand in for a full run's.
    """
    if entry.config.assess.calibration_n == calibration_n:
        return entry
    assess = replace(entry.config.assess, calibration_n=calibration_n)
    return replace(entry, config=replace(entry.config, assess=assess))


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
) -> GridEntry:
    budget = Budget(max_searches=searches, max_total_tokens=tokens)
    if per_turn is not None:
        budget = replace(budget, per_turn_max_tokens=per_turn)
    config = RunConfig(
        budget=budget,
        retrieval=RetrievalConfig(mode=mode, candidates=candidates),
        agent=AgentConfig(planning=plan, reflection=reflect),
    )
    return GridEntry("bcas", config, reference=reference, requires=requires, datasets=datasets)


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
)

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
)

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
)

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
    description="MADARA §4-§6 treatments and the routed pipeline (10 BM25 documents per query, 5 kept)",
    primary_metric="strict_em",
    holm_scope="model_dataset",
    holdout=CALIBRATION_N,
)

MADARA_HELDOUT = Grid(
    "madara_heldout",
    (
        _madara("nf", reference=True),
        _vs_nf("pde-random", ISOLATION),
        _vs_nf("pde-unif", ISOLATION),
        _vs_nf("pde", ISOLATION),
        GridEntry("rsc", RunConfig(retrieval=MADARA_RETRIEVAL, assess=AssessConfig(doc_source="retrieval"))),
    ),
    datasets=("triviaqa",),
    description="MADARA §5.2 held-out TriviaQA: PDE component ablation (Table 1) and RSC probe (Table 4)",
    primary_metric="strict_em",
    holm_scope="model_dataset",
)

RSC = Grid(
    "rsc",
    (GridEntry("rsc", RunConfig(retrieval=MADARA_RETRIEVAL, assess=AssessConfig(doc_source="retrieval"))),),
    datasets=("conflictqa", "fever"),
    description="MADARA §3 / Appendix F: Reasoning-Score Coupling probe per model x dataset on calibration_n items",
    primary_metric="strict_em",
)

# Small enough for 2 CPU cores in minutes with the embedded 135M model: short turns,
# a 2K-token trajectory budget, few items.  The hybrid case runs on 2WikiMultihopQA,
# whose 180-paragraph collection embeds in seconds (HotpotQA's 4K take minutes on CPU).
_SMOKE_BM25 = ("hotpotqa",)
# The smoke grid's MADARA cases read each item's own documents (fast on CPU); their
# configuration is unchanged since the smoke grid was introduced.
_SMOKE_RETRIEVAL = RetrievalConfig(mode="bm25")
SMOKE = Grid(
    "smoke",
    (
        _bcas(mode="bm25", searches=1, tokens=2000, per_turn=160, reference=True, datasets=_SMOKE_BM25),
        _bcas(mode="bm25", searches=3, tokens=2000, per_turn=160, datasets=_SMOKE_BM25),
        _bcas(mode="bm25", searches=3, tokens=2000, per_turn=160, plan=True, datasets=_SMOKE_BM25),
        _bcas(mode="hybrid", searches=2, tokens=2000, per_turn=160, datasets=("2wikimultihopqa",)),
        _madara("nf", datasets=("conflictqa",), max_tokens=48, doc_source="item", retrieval=_SMOKE_RETRIEVAL),
        _madara("pde", datasets=("conflictqa",), max_tokens=48, doc_source="item", retrieval=_SMOKE_RETRIEVAL),
        _madara("sda", datasets=("conflictqa",), max_tokens=48, doc_source="item", retrieval=_SMOKE_RETRIEVAL),
    ),
    datasets=("hotpotqa", "2wikimultihopqa", "conflictqa"),
    limit=5,
    description="smoke test of the whole stack on the embedded CPU default",
)


def _flat(entry: GridEntry) -> dict[str, Any]:
    """An entry's configuration as ``{"budget.max_searches": 3, ...}`` (seed left out: the session sets it)."""
    out: dict[str, Any] = {"datasets": entry.datasets}
    for part, fields in entry.config.to_dict().items():
        if isinstance(fields, dict):
            out.update({f"{part}.{name}": value for name, value in fields.items()})
    return out


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _numeric(values: list[Any]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)


def axis_extremes(grid: Grid) -> tuple[GridEntry, ...]:
    """The entries that reach both ends of every axis ``grid`` sweeps, in table order.

    Entries are taken per run kind; an axis is a configuration field (or the entry's own
    datasets) whose value differs between entries of one kind.  A numeric axis (a budget,
    a size; ``None`` means unlimited, so it is the largest) gives its first entry at the
    smallest and at the largest value; any other axis (planning, reflection, retrieval
    mode, treatment) its first entry at every value; each kind gives its first entry.
    For the BCAS paper grids: the smallest and largest search budget (unlimited) and token
    budget, planning and reflection on and off, every retrieval mode; for MADARA's, every
    treatment.  A pure function of the table, so a grid added later is covered the same way.
    """
    chosen: set[int] = set()
    by_kind: dict[str, list[int]] = {}
    for i, entry in enumerate(grid.entries):
        by_kind.setdefault(entry.kind, []).append(i)
    for rows in by_kind.values():
        chosen.add(rows[0])
        flat = [_flat(grid.entries[i]) for i in rows]
        for name in sorted(set().union(*flat)):
            values = [f.get(name) for f in flat]
            if len({_key(v) for v in values}) < 2:
                continue
            if _numeric(values):
                ranks = [math.inf if v is None else v for v in values]
                chosen.update(rows[ranks.index(end)] for end in (min(ranks), max(ranks)))
            else:
                first: dict[str, int] = {}
                for i, value in zip(rows, values, strict=True):
                    first.setdefault(_key(value), i)
                chosen.update(first.values())
    return tuple(grid.entries[i] for i in sorted(chosen))


def extreme_cases(grid: Grid, prefer: tuple[str, ...] = ()) -> list[tuple[str, GridEntry]]:
    """(dataset, entry) of each of :func:`axis_extremes`, on one dataset each.

    The dataset is the first of ``prefer`` the entry runs on by default, else its first
    (an entry with its own ``datasets`` runs only on those of the grid's).
    """
    out = []
    for entry in axis_extremes(grid):
        runs_on = [ds for ds, e in grid.cases() if e is entry]
        if runs_on:
            out.append((next((ds for ds in prefer if ds in runs_on), runs_on[0]), entry))
    return out


GRIDS: Registry[Grid] = Registry("grid")


def register_grid(grid: Grid) -> Grid:
    """Add a grid by name (one registration, no dispatch code to edit)."""
    GRIDS.register(grid.name, grid)
    return grid


for _grid in (SEARCH_SCALING, CONTEXT_SCALING, ABLATION, MADARA, MADARA_HELDOUT, RSC, SMOKE):
    register_grid(_grid)


def get_grid(name: str) -> Grid:
    try:
        return GRIDS.get(name)
    except RegistryError:
        raise KeyError(f"unknown grid {name!r}; available: {', '.join(sorted(GRIDS))}") from None
