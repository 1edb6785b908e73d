"""A fault-injecting proxy on loopback in front of a real OpenAI-compatible server.

``FaultProxy(upstream_base_url, rate=0.2, seed=0)`` listens on 127.0.0.1 and
forwards ``POST .../chat/completions`` (and ``GET .../models``) to the upstream
server byte for byte, except for the requests its schedule picks, which it answers
itself with one of the faults, cycling through them in order:

* ``"500"``: HTTP 500 with an OpenAI-shaped error object;
* ``"429"``: HTTP 429 with ``Retry-After: <retry_after>``;
* ``"timeout"``: hold the connection ``hold_s`` seconds (longer than the client's
  read timeout), then close it without answering;
* ``"malformed"``: HTTP 200 whose body is JSON but not a chat completion.

A faulted request never reaches the upstream, so the upstream sees exactly the
requests of a fault-free run, in the same order when the client sends one at a time.
A chat request whose body the proxy has already forwarded (a client retry after a
*real* timeout) is not sent again: it waits for, or reuses, the first answer and is
counted in ``repeats`` (``repeat_bound`` caps how many the measured upstream times can
explain).  Without that, a server that does not abandon requests when
the client hangs up (``llama_cpp.server``) would queue every retry behind the
request it replaces, and would compute the same prompt again from a different
cache state, which can change greedy output.

Schedule: requests are numbered in arrival order; in every block of ``block``
requests the proxy faults ``round(rate * block)`` positions drawn with ``random.Random(seed, block
number)``, so the fault fraction is exactly ``rate`` over whole blocks and the run is
reproducible.  With ``rate * block <= 2`` and the kinds cycling, one request meets at
most four faults in a row and never two malformed bodies in a row, within the
``openai`` backend's default retry limits.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import math
import random
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

FAULT_KINDS = ("500", "429", "timeout", "malformed")


class FaultProxy:
    """Forwarding proxy with a seeded, counter-based fault schedule (see the module doc)."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.2,
        seed: int = 0,
        block: int = 10,
        kinds: tuple[str, ...] = FAULT_KINDS,
        hold_s: float = 3.0,
        retry_after: float = 0.1,
        upstream_timeout: float = 600.0,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown or not kinds:
            raise ValueError(f"kinds must be a non-empty subset of {FAULT_KINDS}, got {kinds}")
        self.upstream = upstream.rstrip("/")
        self.rate = rate
        self.seed = seed
        self.block = block
        self.kinds = tuple(kinds)
        self.hold_s = hold_s
        self.retry_after = retry_after
        self._client = httpx.Client(timeout=httpx.Timeout(upstream_timeout, connect=10.0))
        self._lock = threading.Lock()
        self._arrivals = 0
        self._faults_made = 0
        self._blocks: dict[int, frozenset[int]] = {}
        self.forwarded = 0
        self.repeats = 0
        self.upstream_s: list[float] = []  # upstream seconds of each chat request forwarded
        self._answers: dict[str, concurrent.futures.Future[tuple[int, bytes]]] = {}
        self.faults: Counter[str] = Counter()
        self.log: list[tuple[int, str]] = []  # (arrival number, "forward" or the fault kind)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- schedule --------------------------------------------------------------------

    def _positions(self, block_no: int) -> frozenset[int]:
        positions = self._blocks.get(block_no)
        if positions is None:
            n_faults = round(self.rate * self.block)
            rng = random.Random(f"{self.seed}:{block_no}")
            positions = frozenset(rng.sample(range(self.block), n_faults))
            self._blocks[block_no] = positions
        return positions

    def decide(self) -> str:
        """``"forward"`` or the fault kind for the next arriving chat request."""
        with self._lock:
            number = self._arrivals
            self._arrivals += 1
            if number % self.block in self._positions(number // self.block):
                kind = self.kinds[self._faults_made % len(self.kinds)]
                self._faults_made += 1
                self.faults[kind] += 1
            else:
                kind = "forward"
                self.forwarded += 1
            self.log.append((number, kind))
            return kind

    @property
    def requests(self) -> int:
        with self._lock:
            return self._arrivals

    # -- life cycle ------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FaultProxy is not running; call start() or use it as a context manager")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FaultProxy:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._client.close()
        self._server = None
        self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- forwarding --------------------------------------------------------------------

    def forward(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """Status and body of the upstream's answer (``502`` when the upstream cannot be reached)."""
        suffix = path[path.index("/v1") + 3 :] if "/v1" in path else path
        keep = {k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        try:
            response = self._client.request(method, self.upstream + suffix, content=body, headers=keep)
        except httpx.HTTPError as exc:
            return 502, json.dumps({"error": {"message": f"upstream failed: {type(exc).__name__}"}}).encode()
        return response.status_code, response.content

    def forward_once(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """Forward a chat request, or share the answer to an identical one already forwarded."""
        key = hashlib.sha256(body).hexdigest()
        with self._lock:
            future = self._answers.get(key)
            first = future is None
            if first:
                future = concurrent.futures.Future()
                self._answers[key] = future
            else:
                self.repeats += 1
        assert future is not None
        if first:
            started = time.perf_counter()
            answer = self.forward("POST", path, body, headers)
            with self._lock:
                self.upstream_s.append(time.perf_counter() - started)
            future.set_result(answer)
        return future.result()

    def repeat_bound(self, client_timeout: float, slack: float = 0.25) -> int:
        """Most repeats real slowness can explain: ``sum(floor((d + slack) / client_timeout))``.

        A client retries a forwarded request only after waiting ``client_timeout`` on
        it, so an answer the upstream took ``d`` seconds to give can be asked for again
        at most ``floor(d / client_timeout)`` times before it arrives (attempt ``i``
        starts after ``i`` full timeouts).  ``slack`` covers the loopback time the
        client sees and the proxy does not.
        """
        with self._lock:
            return sum(math.floor((d + slack) / client_timeout) for d in self.upstream_s)


def _make_handler(owner: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature fixed by http.server
            return

        def _send(self, status: int, payload: bytes, headers: tuple[tuple[str, str], ...] = ()) -> None:
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

        def _relay(self, method: str, body: bytes) -> None:
            self._send(*owner.forward(method, self.path, body, dict(self.headers.items())))

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            self._relay("GET", b"")

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._relay("POST", body)
                return
            kind = owner.decide()
            if kind == "forward":
                self._send(*owner.forward_once(self.path, body, dict(self.headers.items())))
            elif kind == "500":
                error = {"error": {"message": "injected server error", "type": "injected", "code": 500}}
                self._send(500, json.dumps(error).encode())
            elif kind == "429":
                error = {"error": {"message": "injected rate limit", "type": "injected", "code": 429}}
                self._send(429, json.dumps(error).encode(), (("Retry-After", f"{owner.retry_after:g}"),))
            elif kind == "timeout":
                time.sleep(owner.hold_s)
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            else:  # malformed: valid JSON, not a chat completion
                self._send(200, json.dumps({"object": "chat.completion", "choices": [], "oops": True}).encode())

    return Handler


# Client options for the ``openai`` backend under proof tests: a read timeout the
# proxy's held connections can outlast in seconds rather than a minute.  A test sets
# them (monkeypatch) and points ``bcas.llm.BACKENDS["openai"]`` at the factory below.
CLIENT_OPTIONS: dict[str, Any] = {"timeout": 10.0, "backoff_base": 0.05, "backoff_max": 0.5}


def create_openai(model: str | None = None, **options: Any) -> Any:
    """The real ``openai`` backend (``OpenAICompatModel``) with ``CLIENT_OPTIONS`` applied."""
    from bcas.llm.openai_compat import create

    return create(model, **{**CLIENT_OPTIONS, **options})
