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
  documents per query from the dataset's collection (padded to 10 from the collection
  where fewer share a query term), treatments keep 5 (§5.5), NF reads all 10 (§5.3 (1));
  evaluated items never include the router's 100 calibration items.
- ``madara_heldout``: MADARA §5.2 / Table 1 / Table 4 — the held-out TriviaQA replication
  of the isolation finding (NF, PDE-Random, Unif., PDE) and of the RSC probe.
- ``rsc``: MADARA §3 / Appendix F — the RSC probe per model × dataset on its
  ``calibration_n`` calibration items.
- ``musique``: MADARA §6.5 / Table 6 — NF, 3-Agent, CoT, SDA, PDE, PDE-Random and the
  routed pipeline on 100 MuSiQue queries, each over its own 20 supporting and distractor
  paragraphs (NF reads all 20, treatments keep 5); 100 calibration items set aside.
- ``sda_vs_rrf``: MADARA Appendix C / Table 7 — SDA and SDA+CoT against RRF (k = 60) on
  the same 3-agent scores, CONFLICTS.
- ``retrieval_robustness``: MADARA §6.4 / Table 5 / Appendix H.1 — NF and PDE on TriviaQA
  with BM25, dense retrieval and BM25 re-ordered by a reranker (10 documents each).
- ``cross_encoder``: MADARA Appendix K / Table 18 — NF over the 5 documents a reranker
  keeps of BM25's 10 (the paper's cross-encoder ms-marco-MiniLM-L-12-v2) against NF over
  all 10, beside 3-Agent's cost.
- ``formats``: the action format as an axis: JSON actions (the reference),
  ``Thought/Action/Query`` text and native tool calls on the same items and budget.
- ``evidence``: the formats grid's JSON case as the reference, with a cite list in the
  final answer (citation precision / recall) and with an abstain action (not attempted).
- ``baselines``: BCAS §6.1 / §7 -- the BCAS loop against closed-book, retrieve-then-read,
  Iter-RetGen, IRCoT and Self-Ask (:mod:`bcas.methods`) at 3 searches and 2K tokens, BM25 and
  hybrid + re-ranking, on the paper's three datasets (:mod:`bcas.grids.baselines`).
- ``agents``: the baselines table with agents written elsewhere added, answering through the
  bridge (the built-in Search-R1-style agent; :func:`agents_grid` adds your own), each compared
  with the loop of its retrieval mode (:mod:`bcas.grids.agents`, :mod:`bcas.bridge`).
- ``smoke``: a handful of configurations on a few items, the README's main job on
  the embedded CPU default.

Each grid declares what it measures and how it is tested:

- ``paper``: the paper section a grid reproduces ("" for the project's own grids); a
  paper grid whose metric is ``judge`` run without a judge says in its summary that its
  primary metric is SQuAD EM as a proxy (``--bcas-require-judge`` makes that an error).
- ``primary_metric``: ``judge`` (BCAS grids, §3.6: the LLM judge's verdict when a judge
  graded the answers, SQuAD EM otherwise; the summary says which) or ``strict_em``
  (MADARA grids, §5.4, with strict token F1 beside it); see :mod:`bcas.grading.outcomes`.
- the paired comparisons: by default every entry against the grid's reference, one Holm
  family per grid; an entry's ``compare`` names its own (entry label, family) pairs.
  ``holm_scope``: ``grid`` (default) pools each family over the run's models × datasets,
  as MADARA Table 14 does (scoring-only methods vs NF in one family; PDE and PDE-Random
  vs NF and PDE vs 3-Agent in another; the routed pipeline vs NF, Table 2, in a third);
  ``cell`` corrects per model × dataset.  ``--bcas-holm-scope`` overrides it for a run
  (:func:`with_holm_scope`).
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

from bcas.grids.agents import AGENTS_GRID, agents_grid
from bcas.grids.baselines import AGENT_VS_METHOD, BASELINES, baselines_grid
from bcas.grids.paper import (
    ABLATION,
    BCAS_PAPER_RETRIEVAL,
    CALIBRATION_N,
    CONTEXT_SCALING,
    CROSS_ENCODER,
    EVIDENCE,
    FORMATS,
    ISOLATION,
    MADARA,
    MADARA_HELDOUT,
    MADARA_RETRIEVAL,
    MUSIQUE,
    NF,
    RETRIEVAL_ROBUSTNESS,
    ROUTED,
    RSC,
    SCORING,
    SDA_VS_RRF,
    SEARCH_SCALING,
    SMOKE,
)
from bcas.grids.table import (
    GRIDS,
    HOLM_SCOPES,
    Grid,
    GridEntry,
    axis_extremes,
    base_label,
    extreme_cases,
    get_grid,
    register_grid,
    with_calibration_n,
    with_holm_scope,
    with_retrieval_models,
)

__all__ = [
    "ABLATION",
    "AGENTS_GRID",
    "AGENT_VS_METHOD",
    "BASELINES",
    "BCAS_PAPER_RETRIEVAL",
    "CALIBRATION_N",
    "CONTEXT_SCALING",
    "CROSS_ENCODER",
    "EVIDENCE",
    "FORMATS",
    "GRIDS",
    "Grid",
    "GridEntry",
    "HOLM_SCOPES",
    "ISOLATION",
    "MADARA",
    "MADARA_HELDOUT",
    "MADARA_RETRIEVAL",
    "MUSIQUE",
    "NF",
    "RETRIEVAL_ROBUSTNESS",
    "ROUTED",
    "RSC",
    "SCORING",
    "SDA_VS_RRF",
    "SEARCH_SCALING",
    "SMOKE",
    "agents_grid",
    "axis_extremes",
    "base_label",
    "baselines_grid",
    "extreme_cases",
    "get_grid",
    "register_grid",
    "with_calibration_n",
    "with_holm_scope",
    "with_retrieval_models",
]
