"""``FaultServer``: an OpenAI-compatible server on loopback for tests and benchmarks.

Standalone, it is a small chat-completions server (threaded ``http.server``) whose
answers can be scripted request by request: HTTP errors (500, 429 with
``Retry-After``), slow answers, truncated or malformed JSON bodies, dropped
connections, a fixed latency for every answer.  It counts and records requests.

With ``upstream=URL`` (:meth:`FaultServer.proxy`) it forwards to a real server instead
and injects faults on a seeded schedule (:class:`bcas.testing.proxy.FaultSchedule`):
exactly ``rate`` of the chat requests in every block are answered by the proxy itself
with a 500, a 429 with ``Retry-After``, a held connection (client timeout) or a
malformed body, the kinds cycling; the others reach the upstream byte for byte.

Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bcas.testing.proxy import FAULT_KINDS, FaultSchedule, Upstream

# -- fault-injecting OpenAI-shaped server ---------------------------------------------


@dataclass(frozen=True)
class Fault:
    """What the server does with one request.

    ``kind``:
      * ``"ok"``: a normal completion (``text`` or the default reply);
      * ``"status"``: HTTP ``status`` with ``body`` (default: an OpenAI error object
        carrying ``message``) and ``headers`` (e.g. ``{"Retry-After": "1"}``);
      * ``"slow"``: wait ``delay`` seconds, then answer normally (use a delay longer
        than the client's timeout to force a timeout);
      * ``"truncated"``: HTTP 200 with a completion body cut in half;
      * ``"malformed"``: HTTP 200 with a JSON body that is not a completion;
      * ``"drop"``: close the connection without answering.
    """

    kind: str = "ok"
    status: int = 500
    message: str = "injected failure"
    headers: tuple[tuple[str, str], ...] = ()
    body: str | None = None
    delay: float = 0.0
    text: str | None = None

    @staticmethod
    def ok(text: str | None = None) -> Fault:
        return Fault("ok", text=text)

    @staticmethod
    def error(status: int = 500, message: str = "injected failure", retry_after: float | None = None) -> Fault:
        headers = (("Retry-After", f"{retry_after:g}"),) if retry_after is not None else ()
        return Fault("status", status=status, message=message, headers=headers)

    @staticmethod
    def slow(delay: float) -> Fault:
        return Fault("slow", delay=delay)

    @staticmethod
    def truncated() -> Fault:
        return Fault("truncated")

    @staticmethod
    def malformed() -> Fault:
        return Fault("malformed")

    @staticmethod
    def drop() -> Fault:
        return Fault("drop")


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]
    fault: str
    received_at: float


def default_reply(body: dict[str, Any]) -> str:
    """Echo of the last user message, so tests can tell answers apart."""
    messages = body.get("messages") or []
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    return f"echo: {last}"


@dataclass
class _Script:
    queue: collections.deque[Fault] = field(default_factory=collections.deque)
    default: Fault = field(default_factory=Fault)


class FaultServer:
    """A scriptable OpenAI-compatible chat server on 127.0.0.1.

    >>> with FaultServer(latency=0.2) as server:
    ...     server.script(Fault.error(500), Fault.error(429, retry_after=0.1))
    ...     # point the openai backend at server.base_url; the third request succeeds

    ``latency`` delays every answer (the benchmark's fixed-latency server);
    ``reply(body) -> str`` makes the completion text; ``requests`` counts chat
    requests; ``log`` keeps them (body, headers, which fault was applied);
    ``max_in_flight`` is the most requests it was answering at once.
    """

    def __init__(
        self,
        latency: float = 0.0,
        reply: Callable[[dict[str, Any]], str] = default_reply,
        model: str = "fault-server",
        *,
        strict_models: bool = False,
        api_key: str | None = None,
        upstream: str | None = None,
        schedule: FaultSchedule | None = None,
        hold_s: float = 3.0,
        retry_after: float = 0.1,
        port: int = 0,
    ) -> None:
        # port: 0 takes a free one; a fixed one stands in for a server a script starts (vllm serve --port).
        self.fixed_port = port
        # Proxy mode (upstream): forward to a real server, faults from ``schedule``
        # (bcas.testing.proxy); ``hold_s`` and ``retry_after`` shape its timeout and 429.
        self.upstream = Upstream(upstream) if upstream else None
        self.schedule = schedule if schedule is not None else (FaultSchedule(rate=0.0) if upstream else None)
        self.hold_s = hold_s
        self.retry_after = retry_after
        self.latency = latency
        self.reply = reply
        self.model = model
        # strict_models: answer a chat request for another model name with vLLM's 404.
        self.strict_models = strict_models
        # api_key: answer any request without "Authorization: Bearer <api_key>" with a 401
        # that echoes the key it was sent (as some servers do), to test redaction.
        self.api_key = api_key
        self._lock = threading.Lock()
        self._script = _Script()
        self.log: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def proxy(
        cls,
        upstream: str,
        *,
        rate: float = 0.2,
        seed: int = 0,
        block: int = 10,
        kinds: tuple[str, ...] = FAULT_KINDS,
        hold_s: float = 3.0,
        retry_after: float = 0.1,
    ) -> FaultServer:
        """A fault-injecting proxy in front of ``upstream`` (see :mod:`bcas.testing.proxy`)."""
        return cls(
            upstream=upstream, schedule=FaultSchedule(rate, seed, block, kinds), hold_s=hold_s, retry_after=retry_after
        )

    @property
    def faults(self) -> dict[str, int]:
        """Proxy mode: faults injected so far, by kind."""
        return dict(self.schedule.faults) if self.schedule is not None else {}

    @property
    def repeats(self) -> int:
        """Proxy mode: chat requests already forwarded and asked again (a client retry after real slowness)."""
        return self.upstream.repeats if self.upstream is not None else 0

    def repeat_bound(self, client_timeout: float) -> int:
        """Proxy mode: the most repeats the upstream's measured times can explain."""
        return self.upstream.repeat_bound(client_timeout) if self.upstream is not None else 0

    # -- scripting -------------------------------------------------------------------

    def script(self, *faults: Fault, default: Fault | None = None) -> None:
        """Answer the next requests with ``faults`` in order, then with ``default``."""
        with self._lock:
            self._script.queue.extend(faults)
            if default is not None:
                self._script.default = default

    def reset(self) -> None:
        """Forget the script, the request log and the in-flight peak."""
        with self._lock:
            self._script = _Script()
            self.log.clear()
            self.max_in_flight = self.in_flight

    @property
    def requests(self) -> int:
        with self._lock:
            return sum(1 for r in self.log if r.path.endswith("/chat/completions"))

    def _next_fault(self) -> Fault:
        with self._lock:
            return self._script.queue.popleft() if self._script.queue else self._script.default

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.log.append(request)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    # -- life cycle ------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FaultServer is not running; call start() or use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FaultServer:
        handler = _make_handler(self)
        server = ThreadingHTTPServer(("127.0.0.1", self.fixed_port), handler)
        server.daemon_threads = True
        server.block_on_close = False
        server.request_queue_size = 128
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fault-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.upstream is not None:
            self.upstream.close()
        self._server = None
        self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers -----------------------------------------------------------------------

    def begin_service(self, body: dict[str, Any] | None) -> Callable[[], None]:
        """Start serving a chat request: waits ``latency``; returns what ends the service (nothing here;
        :class:`bcas.testing.slotted.SlottedServer` holds a slot until it is called)."""
        if self.latency > 0:
            time.sleep(self.latency)
        return lambda: None

    def completion(self, body: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        reply = text if text is not None else self.reply(body)
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
        finish = "stop"
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(limit, int) and limit > 0 and len(reply.split()) > limit:
            reply, finish = " ".join(reply.split()[:limit]), "length"  # a word is a token here, as real servers cap
        completion_words = max(1, len(reply.split()))
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": reply},
            "finish_reason": finish,
        }
        if body.get("logprobs") and body.get("top_logprobs"):
            k = int(body["top_logprobs"])
            choice["logprobs"] = {
                "content": [
                    {
                        "token": word,
                        "logprob": -0.1,
                        "top_logprobs": [{"token": word, "logprob": -0.1}]
                        + [{"token": f"alt{j}", "logprob": -2.0 - j} for j in range(k - 1)],
                    }
                    for word in reply.split()[:8]
                ]
            }
        return {
            "id": f"chatcmpl-{len(self.log)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": completion_words,
                "total_tokens": prompt_words + completion_words,
            },
        }


def _make_handler(owner: FaultServer) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``owner`` (http.server makes one handler per request)."""
    return type("Handler", (_FaultHandler,), {"owner": owner})


def _error_body(message: str, **fields: Any) -> bytes:
    """An OpenAI-shaped error object: ``{"error": {"message": ..., **fields}}``."""
    return json.dumps({"error": {"message": message, **fields}}).encode()


class _FaultHandler(BaseHTTPRequestHandler):
    """Answers one connection's requests as its ``owner`` (a :class:`FaultServer`) says."""

    owner: FaultServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK (~40 ms a response), which would blur every timed test.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature fixed by http.server
        return

    def _send(self, status: int, payload: bytes, headers: Iterable[tuple[str, str]] = ()) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _drop(self) -> None:
        """Close the connection without an answer."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _record(self, body: Any, fault: str) -> None:
        self.owner._record(RecordedRequest(self.path, body, dict(self.headers.items()), fault, time.time()))

    def _is_chat(self) -> bool:
        return self.path.rstrip("/").endswith("/chat/completions")

    def _unauthorised(self) -> bool:
        if self.owner.api_key is None:
            return False
        sent = self.headers.get("Authorization") or ""
        if sent == f"Bearer {self.owner.api_key}":
            return False
        message = f"Incorrect API key provided: {sent.removeprefix('Bearer ')}"
        self._send(401, _error_body(message, type="invalid_request_error"))
        return True

    # -- proxy mode ------------------------------------------------------------------

    def _relay(self, method: str, body: bytes) -> None:
        assert self.owner.upstream is not None
        self._send(*self.owner.upstream.forward(method, self.path, body, dict(self.headers.items())))

    def _proxy_chat(self, raw: bytes, body: Any) -> None:
        owner = self.owner
        assert owner.upstream is not None and owner.schedule is not None
        kind = owner.schedule.decide()
        self._record(body, kind)
        if kind == "forward":
            self._send(*owner.upstream.forward_once(self.path, raw, dict(self.headers.items())))
        elif kind == "500":
            self._send(500, _error_body("injected server error", type="injected", code=500))
        elif kind == "429":
            error = _error_body("injected rate limit", type="injected", code=429)
            self._send(429, error, (("Retry-After", f"{owner.retry_after:g}"),))
        elif kind == "timeout":
            time.sleep(owner.hold_s)
            self._drop()
        else:  # malformed: valid JSON, not a chat completion
            self._send(200, json.dumps({"object": "chat.completion", "choices": [], "oops": True}).encode())

    # -- requests --------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.owner.upstream is not None:
            self._relay("GET", b"")
            return
        if self._unauthorised():
            return
        if self.path.rstrip("/").endswith("/models"):
            payload = {"object": "list", "data": [{"id": self.owner.model, "object": "model", "owned_by": "bcas"}]}
            self._send(200, json.dumps(payload).encode())
        else:
            self._send(404, _error_body(f"no route {self.path}"))

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        if self.owner.upstream is not None:
            if self._is_chat():
                self._proxy_chat(raw, body)
            else:
                self._relay("POST", raw)
            return
        if not self._is_chat():
            self._send(404, _error_body(f"no route {self.path}"))
            return
        self._chat(body)

    def _chat(self, body: Any) -> None:
        """A chat request to the scripted server: refused (key, model name) or answered with the next fault."""
        owner = self.owner
        if self._unauthorised():
            self._record(body, "unauthorised")
            return
        if owner.strict_models and isinstance(body, dict) and body.get("model") != owner.model:
            self._record(body, "unknown-model")
            message = f"The model `{body.get('model')}` does not exist."
            self._send(404, _error_body(message, type="NotFoundError", code=404))
            return
        fault = owner._next_fault()
        self._record(body, fault.kind)
        owner._enter()
        try:
            self._answer(body, fault)
        finally:
            owner._leave()

    def _answer(self, body: dict[str, Any] | None, fault: Fault) -> None:
        if body is None:
            self._send(400, _error_body("request body is not JSON"))
            return
        finish = self.owner.begin_service(body)
        try:
            self._serve(body, fault, finish)
        finally:
            finish()  # once only: frees the slot of a stream whose client left before its first word

    def _serve(self, body: dict[str, Any], fault: Fault, finish: Callable[[], None]) -> None:
        streamed = bool(body.get("stream")) and fault.kind == "ok"
        if not streamed:
            finish()
        if fault.kind == "drop":
            self._drop()
            return
        if fault.kind == "status":
            payload = (
                fault.body.encode()
                if fault.body is not None
                else _error_body(fault.message, type="injected", code=fault.status)
            )
            self._send(fault.status, payload, fault.headers)
            return
        if fault.kind == "slow":
            time.sleep(fault.delay)
        completion = json.dumps(self.owner.completion(body, fault.text)).encode()
        if fault.kind == "truncated":
            self._send(200, completion[: len(completion) // 2])
        elif fault.kind == "malformed":
            self._send(200, json.dumps({"unexpected": "shape", "choices": []}).encode())
        elif streamed:
            self._send_stream(json.loads(completion), finish)
        else:
            self._send(200, completion)

    def _send_stream(self, completion: dict[str, Any], finish: Callable[[], None]) -> None:
        """A completion as server-sent events (``stream: true``): the first word, then ``finish()``
        (the rest of the service time), the other words, the finish reason, usage and timings, ``[DONE]``."""
        choice = completion["choices"][0]
        words = str(choice["message"]["content"]).split(" ")
        base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], reason: Any = None) -> bytes:
            event = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
            return b"data: " + json.dumps(event).encode() + b"\n\n"

        def send(data: bytes) -> None:  # one HTTP/1.1 chunk, so the connection stays open after the stream
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            send(chunk({"role": "assistant", "content": words[0]}))
            self.wfile.flush()
            finish()
            for word in words[1:]:
                send(chunk({"content": " " + word}))
            send(chunk({}, choice["finish_reason"]))
            tail = {**base, "choices": [], "usage": completion["usage"]}
            if "timings" in completion:
                tail["timings"] = completion["timings"]
            send(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
