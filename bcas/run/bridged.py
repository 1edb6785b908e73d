"""The ``agent`` run kind: a user's agent, written on any framework or none, answers each item
through the bridge (:mod:`bcas.bridge`), on the item's ledger and under the case's budgets.

A grid entry of kind ``agent`` carries its agent in ``RunConfig.bridged``
(:class:`bcas.config.BridgedAgent`: a callable or a command, a timeout, the dialects).  Per
item, the bridge is served on loopback, the agent runs against it
(:func:`bcas.bridge.runner.run_agent`) and the bridge's ledger becomes the record's
trajectory (:func:`bcas.bridge.runner.answer_of_bridge`).  The agent's code is part of the
answer identity (the configuration id, :func:`bcas.identity.agent_code_id`): changing it
answers again; rerunning it unchanged resumes.
"""

from __future__ import annotations

import time
from typing import Any

from bcas.config import RunConfig
from bcas.items import Item
from bcas.records import Answer
from bcas.registry import RegistryError
from bcas.run.pipelines import ItemKind, KindContext, budget_problems, with_titles


class AgentKind(ItemKind):
    """A bridged agent (:mod:`bcas.bridge`): its calls and searches on the ledger, its budgets held by the bridge."""

    def needs_retriever(self, config: RunConfig) -> bool:
        return True

    async def prepare(self, ctx: KindContext, todo: list[Item]) -> None:
        """A case without an agent, or asking for the MCP dialect without the SDK, stops before its first item."""
        spec = ctx.config.bridged
        if spec is None:
            raise RegistryError(
                f"{ctx.case.id}: a grid entry of kind 'agent' needs RunConfig(bridged=BridgedAgent(...))"
            )
        if "mcp" in spec.dialects:
            from bcas.bridge.mcp_dialect import MISSING, mcp_available

            if not mcp_available():
                raise RegistryError(f"{ctx.case.id}: {MISSING}")

    async def answer(self, ctx: KindContext, item: Item, config: RunConfig) -> Answer:
        from bcas.bridge.runner import answer_of_bridge, run_agent
        from bcas.bridge.session import open_bridge

        spec = config.bridged
        if spec is None:
            raise RegistryError(f"{ctx.case.id}: the agent run kind needs RunConfig.bridged")
        started = time.perf_counter()
        retriever = ctx.retriever_for(item)
        async with open_bridge(item, ctx.model, retriever, config, spec.dialects, spec.timeout_s) as (bridge, ends):
            outcome = await run_agent(spec, item.question, ends)
        return with_titles(ctx, answer_of_bridge(bridge, outcome, spec, time.perf_counter() - started))

    def finish(self, ctx: KindContext, item: Item, answer: Answer) -> Answer:
        with_recall: Answer = ctx.session.with_evidence_recall(ctx.case.dataset, item, answer)
        return with_recall

    def check(self, config: RunConfig, records: list[dict[str, Any]]) -> list[str]:
        """Searches within ``max_searches``; the agent's completion tokens within ``max_total_tokens``
        (the bridge caps each call at the tokens left, :mod:`bcas.bridge.ledger`)."""
        return budget_problems(config, records)


AGENT = AgentKind()

__all__ = ["AGENT", "AgentKind"]
