"""Evaluation grids as data: tables of configurations taken from the papers.

A grid is a list of ``GridEntry`` rows plus the datasets it runs on by default.
Adding an experiment means adding a table here, not a new test function.

- ``search_scaling``: BCAS §3.9 — hybrid retrieval, 16K completion tokens,
  max_searches 1, 2, 3, unlimited; unlimited + planning; + planning and reflection.
- ``context_scaling``: BCAS §3.10 — 500, 1K, 2K, 4K, 16K completion tokens with
  unlimited hybrid searches; 16K + planning; + planning and reflection.
- ``ablation``: BCAS §3.8 — BM25 baseline (unlimited searches, 16K tokens);
  + Plan; + Reflection; + Plan+Reflection; + HS; + HS+R.
- ``madara``: MADARA §4–§5 — NF, 3-Agent, CoT, SDA, ATF, PDE, PDE-Random and the
  routed MADARA pipeline.
- ``rsc``: MADARA §3 / Appendix F — the RSC probe per model × dataset.
- ``smoke``: a handful of configurations on a few items, the README's main job on
  the embedded CPU default.

Budgets (BCAS §3.3): the paper grids cap only ``max_searches`` and
``max_total_tokens``; every call may use what remains of the token budget
(``Budget.per_turn_max_tokens`` is ``None``) and the turn bound derives from the
budgets (``AgentConfig.max_turns`` is ``None``).  Only the smoke grid sets a per-call
cap (160 tokens), so that the 135M CPU model stays fast; with its limited searches
its derived turn bound (searches + 3 unusable turns) is below the former fixed cap of
12 turns, so the smoke grid runs exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bcas.config import AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig

KINDS = ("bcas", "madara", "rsc")


@dataclass(frozen=True)
class GridEntry:
    """One configuration of a grid.

    ``kind`` selects the runner (BCAS agent loop, MADARA treatment, RSC probe);
    ``reference`` marks the configuration the grid's paired comparisons use;
    ``requires`` lists requirement markers (``gpu``, ``slow``, ``judge``, ``vllm``).
    """

    kind: str
    config: RunConfig
    reference: bool = False
    requires: tuple[str, ...] = ()
    name: str = ""
    datasets: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.kind == "madara":
            return f"madara/{self.config.assess.method}"
        if self.kind == "rsc":
            return "rsc"
        return self.config.label


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


def _madara(
    method: str,
    reference: bool = False,
    doc_source: str = "item",
    datasets: tuple[str, ...] = (),
    **kw: object,
) -> GridEntry:
    config = RunConfig(
        retrieval=RetrievalConfig(mode="bm25"),
        assess=AssessConfig(method=method, doc_source=doc_source, **kw),  # type: ignore[arg-type]
    )
    return GridEntry("madara", config, reference=reference, datasets=datasets)


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
)

MADARA = Grid(
    "madara",
    (
        _madara("nf", reference=True),
        _madara("3-agent"),
        _madara("cot"),
        _madara("sda"),
        _madara("atf"),
        _madara("pde"),
        _madara("pde-random"),
        _madara("madara"),
    ),
    datasets=("conflictqa", "fever"),
    description="MADARA §4-§5 treatments and the routed pipeline",
)

RSC = Grid(
    "rsc",
    (GridEntry("rsc", RunConfig(assess=AssessConfig(doc_source="item"))),),
    datasets=("conflictqa", "fever"),
    description="MADARA §3 / Appendix F: Reasoning-Score Coupling probe per model x dataset",
)

# Small enough for 2 CPU cores in minutes with the embedded 135M model: short turns,
# a 2K-token trajectory budget, few items.  The hybrid case runs on 2WikiMultihopQA,
# whose 180-paragraph collection embeds in seconds (HotpotQA's 4K take minutes on CPU).
_SMOKE_BM25 = ("hotpotqa",)
SMOKE = Grid(
    "smoke",
    (
        _bcas(mode="bm25", searches=1, tokens=2000, per_turn=160, reference=True, datasets=_SMOKE_BM25),
        _bcas(mode="bm25", searches=3, tokens=2000, per_turn=160, datasets=_SMOKE_BM25),
        _bcas(mode="bm25", searches=3, tokens=2000, per_turn=160, plan=True, datasets=_SMOKE_BM25),
        _bcas(mode="hybrid", searches=2, tokens=2000, per_turn=160, datasets=("2wikimultihopqa",)),
        _madara("nf", datasets=("conflictqa",), max_tokens=48),
        _madara("pde", datasets=("conflictqa",), max_tokens=48),
        _madara("sda", datasets=("conflictqa",), max_tokens=48),
    ),
    datasets=("hotpotqa", "2wikimultihopqa", "conflictqa"),
    limit=5,
    description="smoke test of the whole stack on the embedded CPU default",
)

GRIDS: dict[str, Grid] = {g.name: g for g in (SEARCH_SCALING, CONTEXT_SCALING, ABLATION, MADARA, RSC, SMOKE)}


def register_grid(grid: Grid) -> Grid:
    """Add a grid by name (one registration, no dispatch code to edit)."""
    GRIDS[grid.name] = grid
    return grid


def get_grid(name: str) -> Grid:
    try:
        return GRIDS[name]
    except KeyError:
        raise KeyError(f"unknown grid {name!r}; available: {', '.join(sorted(GRIDS))}") from None
