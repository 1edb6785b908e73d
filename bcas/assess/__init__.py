"""MADARA: three-agent document assessment, treatments, RSC probe and router.

Implements "To Isolate or to Score? Model-Adaptive Assessment for Cost-Efficient
Multi-Agent RAG" (papers/madara-isolate-or-score.txt):

- ``agents``: Relevance Assessor, Consistency Verifier, Conflict Detector; base
  and CoT de-polarisation prompts (§4.1, Appendix N); the m x 3 score matrix.
- ``aggregate``: weighted baseline, SDA (Algorithm 1), RRF (Appendix C), ATF (§4.3).
- ``generate`` / ``pde``: generator prompts, per-document extraction, Unif. and
  PDE-Random (§4.4, §6.1, Table 1).
- ``rsc``: the Reasoning-Score Coupling probe (§3, Appendix F, G.2).
- ``router``: Algorithm 2's routing rule.
- ``pipeline``: ``run_madara`` (one method or the routed pipeline on one item)
  and ``assess_hits`` (MADARA treatments for the BCAS search tool).

Typical use::

    profile = await rsc.probe(model, calibration.items, retriever, config, task=calibration.task)
    decision = profile.decision()
    record = await run_madara(item, model, retriever, config, dataset=ds, decision=decision)
"""

from bcas.assess.agents import AGENTS, AssessDocument, Assessment, parse_score, score_documents
from bcas.assess.aggregate import (
    ATF_KAPPA,
    BASELINE_WEIGHTS,
    RRF_C,
    atf_filter,
    rrf_select,
    sda_select,
    weighted_scores,
)
from bcas.assess.documents import AssessError
from bcas.assess.hits import assess_hits
from bcas.assess.pipeline import answer_madara, run_madara, treatment
from bcas.assess.router import TAU_NF, RoutingDecision, decide, route
from bcas.assess.rsc import RSCProfile, probe, trend_coefficient
from bcas.assess.usage import Ledger, Usage
from bcas.registry import TREATMENTS

__all__ = [
    "AGENTS",
    "ATF_KAPPA",
    "BASELINE_WEIGHTS",
    "RRF_C",
    "TAU_NF",
    "TREATMENTS",
    "AssessDocument",
    "AssessError",
    "Assessment",
    "Ledger",
    "RSCProfile",
    "RoutingDecision",
    "Usage",
    "assess_hits",
    "atf_filter",
    "decide",
    "parse_score",
    "probe",
    "route",
    "rrf_select",
    "answer_madara",
    "run_madara",
    "score_documents",
    "sda_select",
    "trend_coefficient",
    "treatment",
    "weighted_scores",
]
