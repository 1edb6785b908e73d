"""The ``agents`` grid: agents written elsewhere, through the bridge, beside the BCAS loop and the
methods at the same budgets (the ``baselines`` table, BCAS §6.1 / §7, with bridged agents added).

Per dataset (HotpotQA, 2WikiMultihopQA, TriviaQA) and retrieval mode (BM25; hybrid +
re-ranking): the loop, the five methods of :mod:`bcas.methods` and every bridged agent at 3
searches and 2K completion tokens, each compared with the loop of its mode in one Holm family
(:data:`bcas.grids.baselines.AGENT_VS_METHOD`), so the report's agent-against-methods table
(paired difference, McNemar, cost per correct answer, p50 latency) has a row per agent.

Built in: the Search-R1-style agent (:mod:`bcas.bridge.search_r1`, Jin et al. 2025), which
needs no extra package.  Your own agents (a framework's, a command): :func:`agents_grid`
builds the same table with them, e.g. in a ``conftest.py``::

    register_grid(agents_grid(name="my_agents", agents=(
        ("search_r1", SEARCH_R1),
        ("mine", BridgedAgent(command=("python3", "my_agent.py"), timeout_s=120)),
    )))
"""

from __future__ import annotations

from dataclasses import replace

from bcas.config import BridgedAgent, RetrievalConfig
from bcas.grids.baselines import BASELINE_DATASETS, BASELINE_METHODS, BASELINE_MODES, baselines_grid
from bcas.grids.table import Grid, register_grid

SEARCH_R1 = BridgedAgent(callable="search_r1", dialects=("retriever",), timeout_s=600.0, name="search_r1")
AGENTS_BUILTIN = (("search_r1", SEARCH_R1),)


def agents_grid(
    agents: tuple[tuple[str, BridgedAgent], ...] = AGENTS_BUILTIN,
    searches: int | None = 3,
    tokens: int = 2000,
    name: str = "agents",
    methods: tuple[str, ...] = BASELINE_METHODS,
    datasets: tuple[str, ...] = BASELINE_DATASETS,
    modes: tuple[tuple[str, RetrievalConfig], ...] = BASELINE_MODES,
) -> Grid:
    """The baselines table at ``searches`` and ``tokens`` with the bridged ``agents`` added (module docstring)."""
    grid = baselines_grid(searches, tokens, name, methods, datasets, modes, bridged=agents)
    names = ", ".join(n for n, _ in agents)
    described = f"bridged agents ({names}) beside {grid.description}"
    return replace(grid, description=described)


AGENTS_GRID = register_grid(agents_grid())

__all__ = ["AGENTS_BUILTIN", "AGENTS_GRID", "SEARCH_R1", "agents_grid"]
