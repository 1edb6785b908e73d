"""One item's bridge, open: the servers of the chosen dialects and the endpoints an agent is given."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from bcas.bridge.ledger import DIALECTS, BridgeLedger
from bcas.bridge.server import BridgeServer
from bcas.config import RunConfig
from bcas.items import Item
from bcas.llm.base import ChatModel

API_KEY = "bcas-bridge"
"""The API key the bridge hands agents (clients insist on one; the bridge checks none)."""


@dataclass(frozen=True)
class Endpoints:
    """Where an agent finds the bridge of its item (all on 127.0.0.1).

    ``openai_base_url``: the chat API's base (``.../v1``); ``model``: the name to ask for;
    ``tools_url`` / ``tool_call_url``: the search tool's OpenAI schema and its call;
    ``retrieve_url``: the Search-R1/FlashRAG retriever API; ``mcp_url``: the MCP server
    (streamable HTTP), ``""`` when the MCP dialect is not served.
    """

    openai_base_url: str
    model: str
    tools_url: str
    tool_call_url: str
    retrieve_url: str
    budget_url: str
    mcp_url: str = ""
    max_searches: int | None = None
    max_total_tokens: int = 0
    api_key: str = API_KEY

    def env(self) -> dict[str, str]:
        """The environment variables a command agent gets (the OpenAI client's own two included)."""
        return {
            "BCAS_OPENAI_BASE_URL": self.openai_base_url,
            "BCAS_MODEL": self.model,
            "BCAS_TOOLS_URL": self.tools_url,
            "BCAS_TOOL_CALL_URL": self.tool_call_url,
            "BCAS_RETRIEVE_URL": self.retrieve_url,
            "BCAS_BUDGET_URL": self.budget_url,
            "BCAS_MCP_URL": self.mcp_url,
            "BCAS_MAX_SEARCHES": "" if self.max_searches is None else str(self.max_searches),
            "BCAS_MAX_TOTAL_TOKENS": str(self.max_total_tokens),
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": self.api_key,
        }


def check_dialects(dialects: Sequence[str]) -> tuple[str, ...]:
    unknown = [d for d in dialects if d not in DIALECTS]
    if unknown:
        raise ValueError(f"dialects: unknown {unknown}; choose from {list(DIALECTS)}")
    return tuple(dialects)


@contextlib.asynccontextmanager
async def open_bridge(
    item: Item,
    model: ChatModel,
    retriever: Any,
    config: RunConfig,
    dialects: Sequence[str] = DIALECTS,
    timeout_s: float = 600.0,
) -> AsyncIterator[tuple[BridgeLedger, Endpoints]]:
    """Serve ``item``'s bridge on loopback while the block runs; yields its ledger and endpoints.

    The OpenAI chat endpoint, the OpenAI tool schema and the retriever API are always served
    (one HTTP server); the MCP server only when ``dialects`` names ``mcp``
    (:mod:`bcas.bridge.mcp_dialect`, which needs the ``mcp`` SDK).
    """
    check_dialects(dialects)
    loop = asyncio.get_running_loop()
    bridge = BridgeLedger(item, model, retriever, config)
    async with contextlib.AsyncExitStack() as stack:
        http = stack.enter_context(BridgeServer(bridge, loop, timeout_s))
        mcp_url = ""
        if "mcp" in dialects:
            from bcas.bridge.mcp_dialect import McpServer

            mcp = McpServer(bridge, loop, timeout_s)
            await asyncio.to_thread(mcp.start)
            stack.push_async_callback(asyncio.to_thread, mcp.close)
            mcp_url = mcp.url
        base = http.base_url
        yield (
            bridge,
            Endpoints(
                openai_base_url=f"{base}/v1",
                model=str(getattr(model, "model_id", "model")),
                tools_url=f"{base}/v1/tools",
                tool_call_url=f"{base}/v1/tools/call",
                retrieve_url=f"{base}/retrieve",
                budget_url=f"{base}/v1/budget",
                mcp_url=mcp_url,
                max_searches=config.budget.max_searches,
                max_total_tokens=config.budget.max_total_tokens,
            ),
        )


__all__ = ["API_KEY", "Endpoints", "check_dialects", "open_bridge"]
