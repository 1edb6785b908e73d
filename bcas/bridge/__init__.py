"""The bridge from a user's agent to the ledger: any agent under the same budgets.

During a case of the ``agent`` run kind (:mod:`bcas.run.bridged`), bcas serves on loopback,
per item, an OpenAI-compatible chat endpoint in front of the configured backend and the
search tool over the configured retrieval in three dialects (an OpenAI function schema,
an MCP server, the Search-R1/FlashRAG retriever API).  Every call and every search lands on
the item's ledger (:class:`bcas.agent.budget.BudgetLedger`, BCAS §3.3) and the budgets hold
whatever the agent does (:mod:`bcas.bridge.ledger`).
"""

from bcas.bridge.ledger import DIALECTS, SEARCH_TOOL, BridgeLedger, BudgetRefused, SearchReply, refusal_message
from bcas.bridge.server import BridgeServer, search_tool_schema
from bcas.bridge.session import API_KEY, Endpoints, open_bridge

__all__ = [
    "API_KEY",
    "DIALECTS",
    "SEARCH_TOOL",
    "BridgeLedger",
    "BridgeServer",
    "BudgetRefused",
    "Endpoints",
    "SearchReply",
    "open_bridge",
    "refusal_message",
    "search_tool_schema",
]
