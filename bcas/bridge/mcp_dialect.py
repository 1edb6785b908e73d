"""The search tool as an MCP server, built with the official ``mcp`` SDK (PyPI ``mcp``, the
``agents`` extra): streamable HTTP on 127.0.0.1 (an ephemeral port), path ``/mcp``.

One tool, ``search(query)``, whose result is the same tool message as the OpenAI dialect's
(:attr:`bcas.bridge.ledger.SearchReply.message`): numbered passages and the searches left,
or, past ``max_searches``, the refusal (never a passage).  The server runs under uvicorn
in a thread of its own with its own event loop; each search runs on the case's loop,
where the retriever lives.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

from bcas.bridge.ledger import SEARCH_DESCRIPTION, SEARCH_TOOL, BridgeLedger
from bcas.bridge.server import LOOPBACK

MCP_PATH = "/mcp"
MISSING = "the MCP dialect needs the official MCP SDK: pip install 'bcas[agents]' (or pip install mcp)"


def mcp_available() -> bool:
    """Whether the official ``mcp`` SDK (2.x: ``mcp.server.mcpserver``) can be imported."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        return False
    return True


def build_app(bridge: BridgeLedger, loop: asyncio.AbstractEventLoop, timeout_s: float = 600.0) -> Any:
    """The Starlette app of the MCP server whose one tool searches through ``bridge`` on ``loop``."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:
        raise RuntimeError(MISSING) from exc

    server: Any = MCPServer(
        "bcas-bridge", instructions="Search tool of a bcas run, under the run's search budget.", log_level="WARNING"
    )

    @server.tool(name=SEARCH_TOOL, description=SEARCH_DESCRIPTION, structured_output=False)  # type: ignore[untyped-decorator]
    async def search(query: str) -> str:
        future = asyncio.run_coroutine_threadsafe(bridge.in_item_context(bridge.search(query, "mcp")), loop)
        reply = await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        return reply.message

    return server.streamable_http_app(streamable_http_path=MCP_PATH, json_response=True, stateless_http=True)


class McpServer:
    """The MCP dialect of one item's bridge on loopback; ``with`` starts and stops it."""

    def __init__(self, bridge: BridgeLedger, loop: asyncio.AbstractEventLoop, timeout_s: float = 600.0) -> None:
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((LOOPBACK, 0))
        self.port = int(self._socket.getsockname()[1])
        config = uvicorn.Config(build_app(bridge, loop, timeout_s), log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="bcas-bridge-mcp", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}{MCP_PATH}"

    def _serve(self) -> None:
        self._server.run(sockets=[self._socket])

    def start(self, wait_s: float = 20.0) -> McpServer:
        self._thread.start()
        deadline = time.monotonic() + wait_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the bridge's MCP server did not start on {LOOPBACK}:{self.port}")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> McpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["MCP_PATH", "McpServer", "build_app", "mcp_available"]
