"""The ``baselines`` grid: is agency worth its cost?  (BCAS §6.1: "Future work should add direct
non-agentic baselines"; §7: the paper's comparisons "do not directly estimate the incremental value
of multi-turn agency over one-shot retrieval".)

Per dataset (HotpotQA, 2WikiMultihopQA, TriviaQA, the paper's three) and per retrieval mode (BM25
with phrase boosting; hybrid + re-ranking, hybrid top-100 re-ranked to the top 5, BCAS §3.5): the
BCAS loop and the five methods of :mod:`bcas.methods` at one matched budget, 3 searches and 2K
completion tokens (``closed_book`` and ``retrieve_read`` use 0 and 1 of the searches; their
configurations say so).  Each method is compared with the loop of its retrieval mode, the cell's
reference (``closed_book``, which retrieves nothing, with the loop of both modes), in one Holm
family over the grid's models × datasets (:data:`AGENT_VS_METHOD`).

Other budgets: :func:`baselines_grid` builds the same table at another budget under its own name;
register it (``register_grid(baselines_grid(searches=5, tokens=4000))`` in a ``conftest.py``) and
run it with ``--bcas-grid baselines_s5_t4k`` (docs/grids.md).
"""

from __future__ import annotations

from dataclasses import replace

from bcas.config import AgentConfig, BridgedAgent, Budget, RetrievalConfig, RunConfig
from bcas.grids.paper import BCAS_PAPER_RETRIEVAL
from bcas.grids.table import Grid, GridEntry, register_grid
from bcas.registry import METHODS

AGENT_VS_METHOD = "agent vs method"
"""The Holm family of every method-against-the-loop comparison of a baselines grid."""
AGENT = "bcas"
BASELINE_METHODS = ("closed_book", "retrieve_read", "iter_retgen", "ircot", "self_ask")
BASELINE_MODES = (
    ("bm25", RetrievalConfig(mode="bm25")),
    ("hs+r", RetrievalConfig(mode="hybrid_rerank", candidates=100)),
)
BASELINE_DATASETS = ("hotpotqa", "2wikimultihopqa", "triviaqa")
_SPENDS = {"none": 0, "one": 1}


def method_searches(method: str, searches: int | None) -> int | None:
    """The searches a method is given of a budget of ``searches``: 0 for the model alone, 1 for
    retrieve-then-read, all of them for the iterative methods (``METHODS`` metadata ``searches``)."""
    spends = str(METHODS.meta(method, "searches", "budget")) if method in METHODS else "budget"
    if spends in _SPENDS:
        return _SPENDS[spends] if searches is None else min(searches, _SPENDS[spends])
    return searches


def _tokens_tag(tokens: int) -> str:
    return f"{tokens // 1000}k" if tokens % 1000 == 0 else str(tokens)


def baselines_grid(
    searches: int | None = 3,
    tokens: int = 2000,
    name: str | None = None,
    methods: tuple[str, ...] = BASELINE_METHODS,
    datasets: tuple[str, ...] = BASELINE_DATASETS,
    modes: tuple[tuple[str, RetrievalConfig], ...] = BASELINE_MODES,
    bridged: tuple[tuple[str, BridgedAgent], ...] = (),
) -> Grid:
    """The baselines table at a budget of ``searches`` and ``tokens`` (see the module docstring).

    ``name`` defaults to ``baselines`` at the matched budget (3 searches, 2K tokens) and to
    ``baselines_s<searches>_t<tokens>`` otherwise; ``methods`` may name any registered method;
    ``modes``: (label tag, retrieval) pairs, the loop of each being its methods' reference;
    ``bridged``: (name, agent) pairs of agents that answer through the bridge (the ``agent`` run
    kind, :mod:`bcas.bridge`), one entry ``agent/<name>/<tag>`` per mode at the whole budget,
    each compared with the loop of its mode in the same family as the methods.
    """
    budget = Budget(max_searches=searches, max_total_tokens=tokens)
    if name is None:
        tag = f"s{'u' if searches is None else searches}_t{_tokens_tag(tokens)}"
        name = "baselines" if (searches, tokens) == (3, 2000) else f"baselines_{tag}"
    entries: list[GridEntry] = []
    agents = [f"{AGENT}/{tag}" for tag, _ in modes]
    for i, (_tag, retrieval) in enumerate(modes):
        agent = RunConfig(budget=budget, retrieval=retrieval, agent=AgentConfig())
        entries.append(GridEntry(AGENT, agent, reference=i == 0, name=agents[i]))
    for method in methods:
        spend = replace(budget, max_searches=method_searches(method, searches))
        if spend.max_searches == 0:  # it retrieves nothing: one entry, compared with the loop of each mode
            config = RunConfig(budget=spend, retrieval=modes[0][1])
            compare = tuple((a, AGENT_VS_METHOD) for a in agents)
            entries.append(GridEntry(method, config, name=method, compare=compare))
            continue
        for (tag, retrieval), agent_label in zip(modes, agents, strict=True):
            config = RunConfig(budget=spend, retrieval=retrieval)
            entries.append(GridEntry(method, config, name=f"{method}/{tag}", compare=((agent_label, AGENT_VS_METHOD),)))
    for agent_name, outside in bridged:
        for (tag, retrieval), agent_label in zip(modes, agents, strict=True):
            config = RunConfig(budget=budget, retrieval=retrieval, bridged=outside)
            entries.append(
                GridEntry("agent", config, name=f"agent/{agent_name}/{tag}", compare=((agent_label, AGENT_VS_METHOD),))
            )
    return Grid(
        name,
        tuple(entries),
        datasets=datasets,
        description=(
            f"the BCAS loop against closed-book, retrieve-then-read, Iter-RetGen, IRCoT and Self-Ask at "
            f"{'unlimited' if searches is None else searches} searches and {tokens} completion tokens, "
            "BM25 and hybrid + re-ranking (BCAS §6.1, §7)"
        ),
        paper="BCAS §6.1, §7 (the baselines the paper leaves out)",
        paper_retrieval=BCAS_PAPER_RETRIEVAL,
    )


BASELINES = register_grid(baselines_grid())

__all__ = [
    "AGENT_VS_METHOD",
    "BASELINES",
    "BASELINE_DATASETS",
    "BASELINE_METHODS",
    "BASELINE_MODES",
    "baselines_grid",
    "method_searches",
]
