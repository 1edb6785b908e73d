"""A MADARA treatment on the BCAS search tool (``AgentConfig.assess``: sda | atf | pde).

The treatment post-processes a search's hits before the model sees them (MADARA §4,
applied inside the BCAS loop of BCAS §3.4).  Its model calls are one ``assess`` step in
the ledger, and their completion tokens count against ``max_total_tokens``.  When the
worst case of those calls (every call at its token cap) would not fit in the tokens left
before the forced-answer reserve, the treatment is skipped, the first k hits are kept, and
the step is flagged ``assess_skipped``.
"""

from __future__ import annotations

from typing import Any

from bcas.agent.budget import BudgetLedger, Step
from bcas.config import RunConfig
from bcas.llm.base import ChatModel


class AssessToolError(Exception):
    """The treatment's calls failed; the message names the cause (the loop ends the trajectory)."""


async def assess_search_hits(
    question: str, hits: list[Any], model: ChatModel, config: RunConfig, ledger: BudgetLedger, task: str | None
) -> tuple[list[Any], str]:
    """The hits kept by ``config.agent.assess`` and an extra observation line (PDE's
    per-document answers), with the treatment's step recorded in ``ledger``."""
    method = config.agent.assess
    k = config.retrieval.k
    if method == "none" or not hits:
        return hits[:k], ""
    cfg = config.assess
    worst = 3 * len(hits) * cfg.score_max_tokens
    if method == "pde":
        worst += k * cfg.answer_max_tokens
    reserve = config.budget.forced_answer_tokens
    if worst > ledger.tokens_left - reserve:
        ledger.record(
            Step(kind="assess", calls=0, flag="assess_skipped", retrieved=tuple(h.chunk_id for h in hits[:k]),
                 note=f"{method}: worst case {worst} tokens > {ledger.tokens_left - reserve} left")
        )  # fmt: skip
        return hits[:k], ""
    from bcas.assess import assess_hits
    from bcas.assess.generate import task_of

    try:
        kept, usage = await assess_hits(question, hits, model, method, k, config=cfg, task=task_of(cfg, task))
    except Exception as exc:  # an assessment failure ends the trajectory like a model failure
        raise AssessToolError(f"assess failed: {type(exc).__name__}: {exc}") from exc
    ledger.record(
        Step(
            kind="assess", output=str(usage.get("answer") or ""), tokens_in=int(usage.get("tokens_in", 0)),
            tokens_out=int(usage.get("tokens_out", 0)), calls=int(usage.get("llm_calls", 0)),
            retrieved=tuple(h.chunk_id for h in kept), docs=tuple(h.doc_id for h in kept),
            note=f"{method}: kept {len(kept)} of {len(hits)}",
        )
    )  # fmt: skip
    extra = ""
    if method == "pde" and usage.get("candidates"):
        answers = "; ".join(str(c) for c in usage["candidates"] if c)
        extra = f"\nAnswers found in single documents: {answers}"
    return kept, extra
