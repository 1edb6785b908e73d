"""MADARA treatments on the BCAS ``search_database`` tool's hits (beyond the papers):
``AgentConfig.assess`` = ``sda`` | ``atf`` | ``pde`` post-processes each search's hits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bcas.assess.agents import AssessDocument, score_documents
from bcas.assess.aggregate import atf_filter, order_best_first, sda_select, weighted_scores
from bcas.assess.documents import AssessError
from bcas.assess.pipeline import TreatmentContext, _extract_and_vote
from bcas.assess.usage import Ledger
from bcas.config import AssessConfig
from bcas.llm.base import ChatModel
from bcas.registry import agent_tool_methods


async def assess_hits(
    question: str,
    hits: Sequence[Any],
    model: ChatModel,
    method: str,
    k: int,
    *,
    config: AssessConfig | None = None,
    task: str = "factoid",
) -> tuple[list[Any], dict[str, Any]]:
    """Post-process a search tool's hits with a MADARA treatment (beyond the paper).

    For the BCAS ``search_database`` tool when ``AgentConfig.assess`` is not
    ``none``.  ``hits`` are ``bcas.retrieval.Hit``s (anything with ``doc_id``,
    ``title``, ``text``); the returned hits are the same objects.

    - ``none``: the first ``k`` hits, no calls.
    - ``sda``: the three agents score every hit (base prompts); SDA top-k.
    - ``atf``: the same scores, weighted (0.4, 0.3, 0.3); hits >= mu - 0.5 sigma,
      at least 2, at most k.
    - ``pde``: weighted top-k hits, one extraction call per kept hit; the hits
      come back with the winning answer's supporters first, and
      ``usage["candidates"]`` / ``usage["answer"]`` carry the per-hit answers and
      the score-weighted vote, so the agent can show them in its observation.

    ``usage`` holds ``llm_calls``, ``assessment_calls``, ``generation_calls``,
    ``tokens_in`` and ``tokens_out`` (provider-reported), which the agent must
    add to its budget ledger, plus ``method``, ``scores`` (m x 3, ``None`` for
    missing), ``doc_scores`` and ``selected`` (indices into ``hits``).
    """
    if method not in agent_tool_methods():
        raise AssessError(f"assess_hits method must be one of {agent_tool_methods()}, got {method!r}")
    if k < 1:
        raise AssessError(f"k must be >= 1, got {k}")
    cfg = config or AssessConfig(method="3-agent")
    hits = list(hits)
    ledger = Ledger()
    info: dict[str, Any] = {"method": method, "scores": None, "doc_scores": None, "candidates": [], "answer": None}
    if method == "none" or not hits:
        selected = list(range(min(k, len(hits))))
    else:
        docs = [AssessDocument.from_any(h) for h in hits]
        assessment = await score_documents(model, question, docs, cfg, cot=False, ledger=ledger)
        S = assessment.matrix
        ws = [float(v) for v in weighted_scores(S, cfg.weights)]
        info["scores"], info["doc_scores"] = S, ws
        if method == "sda":
            selected = sda_select(S, k)
        elif method == "atf":
            selected = atf_filter(ws, k, cfg.atf_kappa)
        else:
            top = order_best_first(ws)[:k]
            ctx = TreatmentContext(model, question, docs, task, cfg, 0, ledger)
            winner, candidates, groups = await _extract_and_vote(ctx, top, [ws[i] for i in top])
            supporters = groups[0]["members"] if groups else []
            selected = supporters + [i for i in top if i not in supporters]
            info["candidates"], info["answer"] = candidates, winner
    info["selected"] = selected
    usage = {**ledger.usage().to_dict(), **info}
    return [hits[i] for i in selected], usage
