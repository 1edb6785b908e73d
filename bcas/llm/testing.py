"""Servers on loopback for tests and benchmarks of the model backends.

* ``FaultServer``: a small OpenAI-chat-completions server (threaded ``http.server``)
  whose answers can be scripted request by request: HTTP errors (500, 429 with
  ``Retry-After``), slow answers, truncated or malformed JSON bodies, dropped
  connections, a fixed latency for every answer.  It counts and records requests.
* ``LlamaCppServer``: a real ``llama_cpp.server`` subprocess serving a local
  GGUF on a free loopback port, ready-checked through ``GET /v1/models``.

Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    ) -> None:
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
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
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
        self._server = None
        self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers -----------------------------------------------------------------------

    def completion(self, body: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        reply = text if text is not None else self.reply(body)
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
        completion_words = max(1, len(reply.split()))
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": reply},
            "finish_reason": "stop",
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
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

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

        def _unauthorised(self) -> bool:
            if owner.api_key is None:
                return False
            sent = self.headers.get("Authorization") or ""
            if sent == f"Bearer {owner.api_key}":
                return False
            message = f"Incorrect API key provided: {sent.removeprefix('Bearer ')}"
            self._send(401, json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode())
            return True

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            if self._unauthorised():
                return
            if self.path.rstrip("/").endswith("/models"):
                payload = {"object": "list", "data": [{"id": owner.model, "object": "model", "owned_by": "bcas"}]}
                self._send(200, json.dumps(payload).encode())
            else:
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                body = None
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                return
            if self._unauthorised():
                owner._record(RecordedRequest(self.path, body, dict(self.headers.items()), "unauthorised", time.time()))
                return
            if owner.strict_models and isinstance(body, dict) and body.get("model") != owner.model:
                owner._record(RecordedRequest(self.path, body, dict(self.headers.items()), "unknown-model", time.time()))
                message = f"The model `{body.get('model')}` does not exist."
                self._send(404, json.dumps({"error": {"message": message, "type": "NotFoundError", "code": 404}}).encode())
                return
            fault = owner._next_fault()
            owner._record(RecordedRequest(self.path, body, dict(self.headers.items()), fault.kind, time.time()))
            owner._enter()
            try:
                self._answer(body, fault)
            finally:
                owner._leave()

        def _answer(self, body: dict[str, Any] | None, fault: Fault) -> None:
            if body is None:
                self._send(400, json.dumps({"error": {"message": "request body is not JSON"}}).encode())
                return
            if owner.latency > 0:
                time.sleep(owner.latency)
            if fault.kind == "drop":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if fault.kind == "status":
                payload = (
                    fault.body
                    if fault.body is not None
                    else json.dumps({"error": {"message": fault.message, "type": "injected", "code": fault.status}})
                )
                self._send(fault.status, payload.encode(), fault.headers)
                return
            if fault.kind == "slow":
                time.sleep(fault.delay)
            completion = json.dumps(owner.completion(body, fault.text)).encode()
            if fault.kind == "truncated":
                self._send(200, completion[: len(completion) // 2])
            elif fault.kind == "malformed":
                self._send(200, json.dumps({"unexpected": "shape", "choices": []}).encode())
            else:
                self._send(200, completion)

    return Handler


# -- real llama.cpp server ----------------------------------------------------------


def _child_env() -> dict[str, str]:
    """This environment, with bcas importable even when it is not installed."""
    env = dict(os.environ)
    source_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH", "")) if p)
    return env


class ServerStartError(RuntimeError):
    """The llama.cpp server did not come up; the message carries its log tail."""


class LlamaCppServer:
    """``llama_cpp.server`` on 127.0.0.1 serving one GGUF, in a subprocess.

    ``launcher`` is the module run with ``python -m``: by default
    ``bcas.llm.llama_server``, which is ``llama_cpp.server`` with llama.cpp's extra CPU
    weight buffers off (they crash on AMX CPUs); ``"llama_cpp.server"`` runs it as is.

    The model is served under ``alias`` (the name clients send as ``model``).  Output
    goes to a log file (``log_path``) whose tail is shown when start-up fails.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        alias: str = "smollm2",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        ready_timeout: float = 180.0,
        extra_args: Iterable[str] = (),
        launcher: str = "bcas.llm.llama_server",
    ) -> None:
        if model_path is None:
            from bcas.llm.embedded import default_gguf_path

            model_path = default_gguf_path()
        self.model_path = Path(model_path)
        self.alias = alias
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.ready_timeout = ready_timeout
        self.extra_args = list(extra_args)
        self.launcher = launcher
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("LlamaCppServer is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        cmd = [
            sys.executable, "-m", self.launcher,
            "--model", str(self.model_path),
            "--model_alias", self.alias,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--interrupt_requests", "false",
        ]  # fmt: skip
        if self.n_threads is not None:
            cmd += ["--n_threads", str(self.n_threads)]
        return cmd + self.extra_args

    def start(self) -> LlamaCppServer:
        if not self.model_path.is_file():
            raise ServerStartError(f"GGUF model not found: {self.model_path}")
        last_error = ""
        for _ in range(3):  # the free port may be taken between probing and binding
            self.port = free_port()
            handle, name = tempfile.mkstemp(prefix="bcas-llama-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
            self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
            self.process = subprocess.Popen(
                self.command(self.port),
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_child_env(),
            )
            try:
                self._wait_ready()
                return self
            except ServerStartError as exc:
                last_error = str(exc)
                self.stop()
                if "address already in use" not in last_error.lower():
                    break
        raise ServerStartError(last_error)

    def _log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"llama_cpp.server exited with code {self.process.returncode} before becoming ready "
                    f"(is the 'server' extra installed? pip install 'bcas[server]'); log tail:\n{self._log_tail()}"
                )
            try:
                response = httpx.get(url, timeout=2.0)
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise ServerStartError(
            f"llama_cpp.server did not answer GET {url} within {self.ready_timeout:.0f} s; log tail:\n{self._log_tail()}"
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> LlamaCppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
