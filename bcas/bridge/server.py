"""The bridge on the wire: one loopback HTTP server per item (127.0.0.1, an ephemeral port).

Routes (every one answered from the item's :class:`~bcas.bridge.ledger.BridgeLedger`):

* ``POST /v1/chat/completions``: OpenAI-compatible chat completions in front of the
  configured backend, non-streaming, or ``stream: true`` as server-sent events (the whole
  reply in one chunk, then the finish chunk with ``usage``, then ``[DONE]``).  Messages
  may carry text parts, tool calls and tool results; ``tools`` are passed to a backend
  that calls tools natively.  A call past ``max_total_tokens`` is refused: HTTP 400 with
  an OpenAI error object, ``code: "max_total_tokens"`` (``"context_window"`` for a prompt
  that alone fills the model's window).  ``GET /v1/models`` lists the
  one model.
* ``GET /v1/tools``: the search tool as an OpenAI function schema (``{"tools": [...],
  "searches_left": n}``); ``POST /v1/tools/call`` runs one call of it (a tool call as the
  chat API writes it, ``{"id", "function": {"name", "arguments"}}``, or ``{"name",
  "arguments"}``) and answers the ``tool`` message to append (``role``, ``tool_call_id``,
  ``name``, ``content``) with ``searches_left`` beside it.
* ``POST /retrieve``: the retriever API that Search-R1 (Jin et al. 2025, arXiv 2503.09516;
  github.com/PeterGriffinJin/Search-R1, ``search_r1/search/retrieval_server.py``) and
  FlashRAG agents call: ``{"queries": [...], "topk": k, "return_scores": bool}`` answered
  with ``{"result": [[{"document": {"id", "contents"}, "score"}, ...] per query]}``
  (without scores: the documents alone); ``contents`` is the title, a newline, the text,
  as in their corpora.  Each query is one search; a query past the budget gets one
  document whose contents say the budget is spent (never a passage), and the reply says
  ``searches_left``.
* ``GET /v1/budget``: searches and completion tokens used and left.

The server runs in threads of its own; every call and search it receives is run on the
case's event loop (:func:`asyncio.run_coroutine_threadsafe`), where the backend lives, in the
item's context, so the item's timing meter counts its model calls and searches (:mod:`bcas.timing`).
Nothing a model writes is executed: a tool call is read as a query, never run as code.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from bcas.bridge.ledger import SEARCH_DESCRIPTION, SEARCH_TOOL, BridgeLedger, BudgetRefused, refusal_message
from bcas.llm.base import ChatResult, ModelError

T = TypeVar("T")
LOOPBACK = "127.0.0.1"
REFUSED_DOCUMENT_ID = "bcas-search-budget"


def search_tool_schema(searches_left: int | None) -> dict[str, Any]:
    """The search tool as an OpenAI function definition; its description says the searches left."""
    left = "unlimited" if searches_left is None else str(searches_left)
    return {
        "type": "function",
        "function": {
            "name": SEARCH_TOOL,
            "description": f"{SEARCH_DESCRIPTION} Searches left: {left}.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to search for."}},
                "required": ["query"],
            },
        },
    }


def _text_of(content: Any) -> str:
    """A message's content as text (the chat API's list of parts: their text joined)."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content)


def chat_messages(raw: list[Any]) -> list[dict[str, Any]]:
    """The agent's messages as the backends take them: text content, tool calls and tool results kept."""
    messages = []
    for m in raw:
        if not isinstance(m, dict):
            raise ValueError(f"a message must be an object, got {type(m).__name__}")
        role = str(m.get("role") or "user")
        role = "system" if role == "developer" else role
        out: dict[str, Any] = {"role": role, "content": _text_of(m.get("content"))}
        if m.get("tool_calls"):
            out["tool_calls"] = list(m["tool_calls"])
        if m.get("tool_call_id"):
            out["tool_call_id"] = str(m["tool_call_id"])
        if m.get("name") and role == "tool":
            out["name"] = str(m["name"])
        messages.append(out)
    return messages


def completion_body(result: ChatResult, model: str, n: int) -> dict[str, Any]:
    """A chat completion object from a backend's result (usage as the provider reported it)."""
    calls = [c.to_dict() for c in result.tool_calls]
    message: dict[str, Any] = {"role": "assistant", "content": result.text if (result.text or not calls) else None}
    if calls:
        message["tool_calls"] = calls
    if result.reasoning:  # as DeepSeek's and vLLM's servers send it
        message["reasoning_content"] = result.reasoning
    usage = {"prompt_tokens": int(result.prompt_tokens), "completion_tokens": int(result.completion_tokens),
             "total_tokens": int(result.prompt_tokens) + int(result.completion_tokens)}  # fmt: skip
    return {
        "id": f"chatcmpl-bcas-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else result.finish_reason}],
        "usage": usage,
    }


def stream_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as ``chat.completion.chunk`` events: the whole reply, then the finish with ``usage``."""
    choice = body["choices"][0]
    delta: dict[str, Any] = {"role": "assistant", "content": choice["message"].get("content") or ""}
    if choice["message"].get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(choice["message"]["tool_calls"])]
    head = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    return [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {
            **head,
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
            "usage": body["usage"],
        },
    ]


def openai_error(message: str, code: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


class BridgeServer:
    """The item's bridge on 127.0.0.1 (an ephemeral port); ``with`` starts and stops it."""

    def __init__(self, bridge: BridgeLedger, loop: asyncio.AbstractEventLoop, timeout_s: float = 600.0) -> None:
        self.bridge = bridge
        self.loop = loop
        self.timeout_s = timeout_s
        self.calls = 0
        self._httpd = ThreadingHTTPServer((LOOPBACK, 0), _handler(self))
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> BridgeServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="bcas-bridge", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> BridgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- run on the case's loop -----------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(self.bridge.in_item_context(coro), self.loop).result(self.timeout_s)

    # -- the routes ---------------------------------------------------------------------

    def chat(self, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        bridge = self.bridge
        try:
            messages = chat_messages(list(payload.get("messages") or []))
        except ValueError as exc:
            return 400, openai_error(str(exc), "invalid_messages")
        if not messages:
            return 400, openai_error("messages: at least one message is required", "invalid_messages")
        tools = payload.get("tools") or None
        if tools and not getattr(bridge.model, "supports_tools", False):
            problem = getattr(bridge.model, "tools_problem", "")
            return 400, openai_error(f"tools: the configured model cannot call tools natively: {problem}", "tools")
        requested = payload.get("max_completion_tokens") or payload.get("max_tokens")
        stop = payload.get("stop")
        stop = [stop] if isinstance(stop, str) else stop
        try:
            result = self.run(
                bridge.chat(messages, int(requested) if requested else None, stop=stop, tools=tools,
                            temperature=float(payload.get("temperature") or 0.0))
            )  # fmt: skip
        except BudgetRefused as exc:
            return 400, openai_error(f"bcas bridge: {exc}", exc.code, "budget_exhausted")
        except ModelError as exc:
            return 502, openai_error(f"bcas bridge: the backend failed: {exc}", "backend_error", "api_error")
        self.calls += 1
        return 200, completion_body(result, str(getattr(bridge.model, "model_id", "model")), self.calls)

    def tool_call(self, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        given = payload.get("function")
        function: dict[str, Any] = given if isinstance(given, dict) else payload
        name = str(function.get("name") or "")
        if name != SEARCH_TOOL:
            return 400, openai_error(f"name: unknown tool {name!r}; the bridge serves {SEARCH_TOOL!r}", "unknown_tool")
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError as exc:
                return 400, openai_error(f"arguments: not JSON ({exc.msg})", "invalid_arguments")
        query = arguments.get("query") if isinstance(arguments, dict) else None
        if not isinstance(query, str) or not query.strip():
            return 400, openai_error("arguments: a non-empty string 'query' is required", "invalid_arguments")
        reply = self.run(self.bridge.search(query, "openai"))
        call_id = str(payload.get("id") or payload.get("tool_call_id") or "")
        return 200, {"role": "tool", "tool_call_id": call_id, "name": SEARCH_TOOL, "content": reply.message,
                     "searches_left": reply.searches_left, "refused": reply.refused}  # fmt: skip

    def retrieve(self, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        queries = payload.get("queries")
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            return 400, {"detail": "queries: a list of strings is required"}
        topk = payload.get("topk")
        scores = bool(payload.get("return_scores"))
        results = []
        for query in queries:
            reply = self.run(self.bridge.search(query, "retriever", int(topk) if topk else None))
            if reply.refused or reply.error:
                text = refusal_message() if reply.refused else f"Search failed: {reply.error}"
                docs = [({"id": REFUSED_DOCUMENT_ID, "contents": f"Search budget\n{text}"}, 0.0)]
            else:
                docs = [
                    ({"id": h.chunk_id, "contents": f"{h.title}\n{h.text}"}, float(h.score)) for h in reply.passages
                ]
            results.append([{"document": d, "score": s} for d, s in docs] if scores else [d for d, _ in docs])
        return 200, {"result": results, "searches_left": self.bridge.searches_left}


def _handler(owner: BridgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_BridgeHandler):
        server_owner = owner

    return Handler


class _BridgeHandler(BaseHTTPRequestHandler):
    server_owner: BridgeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        return None

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._write(data)

    def _write(self, data: bytes) -> None:
        """Write a reply; an agent that hung up before it came (its client timed out) is no error of the bridge's:
        the call it asked for was made and is on the ledger."""
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _stream(self, body: dict[str, Any]) -> None:
        data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in stream_events(body)) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        owner = self.server_owner
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            model = str(getattr(owner.bridge.model, "model_id", "model"))
            self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "bcas"}]})
        elif path == "/v1/tools":
            left = owner.bridge.searches_left
            self._send(200, {"tools": [search_tool_schema(left)], "searches_left": left})
        elif path == "/v1/budget":
            self._send(200, owner.bridge.status())
        else:
            self._send(404, openai_error(f"no route GET {path}", "not_found"))

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        owner = self.server_owner
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        try:
            payload = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._send(400, openai_error(f"request body: not JSON ({exc.msg})", "invalid_json"))
            return
        if not isinstance(payload, dict):
            self._send(400, openai_error("request body: a JSON object is required", "invalid_json"))
            return
        try:
            if path in ("/v1/chat/completions", "/chat/completions"):
                status, body = owner.chat(payload)
                if status == 200 and payload.get("stream"):
                    self._stream(body)
                    return
            elif path == "/v1/tools/call":
                status, body = owner.tool_call(payload)
            elif path == "/retrieve":
                status, body = owner.retrieve(payload)
            else:
                status, body = 404, openai_error(f"no route POST {path}", "not_found")
        except Exception as exc:  # noqa: BLE001 - the agent sees the failure; the case goes on
            status, body = 500, openai_error(f"bcas bridge: {type(exc).__name__}: {exc}", "bridge_error", "api_error")
        self._send(status, body)


__all__ = ["LOOPBACK", "REFUSED_DOCUMENT_ID", "BridgeServer", "chat_messages", "completion_body", "search_tool_schema"]
