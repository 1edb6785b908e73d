"""``openai`` backend: any server speaking the OpenAI chat-completions protocol.

vLLM's ``serve``, ``llama_cpp.server``, hosted APIs: one ``POST {base_url}/chat/completions``
per request, each request in flight on a connection of its own (a lane: an
``httpx.AsyncClient`` of one connection, reused; :class:`_LoopState`).  Concurrency comes
from many coroutines in flight, capped by a semaphore (``concurrency``).

Failure handling:

* connection errors, timeouts, HTTP 429 and 5xx are retried with exponential back-off
  and jitter (``backoff_base * 2**n``, capped at ``backoff_max``, the wait drawn
  uniformly from its upper half); a 429 with ``Retry-After`` waits that long instead
  (capped at ``max_retry_after``).  After ``max_retries`` retries the request fails
  with ``ModelError``;
* any other 4xx fails at once with the server's own message;
* a 200 whose body is not a chat completion (truncated or malformed JSON) is retried
  at most ``max_malformed_retries`` times, then fails with ``ModelError``.

Structured output (``ChatRequest.json_schema``) is sent per ``schema_mode``:

* ``"json_schema"`` (default): ``response_format={"type": "json_schema", "json_schema":
  {"name": "action", "schema": ..., "strict": true}}`` (OpenAI, vLLM);
* ``"json_object"``: ``response_format={"type": "json_object", "schema": ...}``
  (llama-cpp-python's server, which turns the schema into a grammar);
* ``"none"``: no constraint; the schema is only in the prompt the caller wrote.

Fallback: when ``schema_fallback`` is true (the default) and the server rejects the
``response_format`` (HTTP 400 or 422 whose message is about the schema or the
response format, or HTTP 500 reporting a validation error on ``response_format``,
as llama-cpp-python's server does), the request is sent again one mode down
(``json_schema`` → ``json_object`` → ``none``).  The mode that worked is remembered
for later requests, and the result records ``extra["schema_mode"]`` and
``extra["schema_fallback"] = True`` when it is not the one asked for: such output is
*not* guaranteed to be valid JSON, so callers parse it tolerantly.

Reasoning models: the message's ``reasoning_content`` (vLLM's reasoning parsers,
DeepSeek) or ``reasoning`` field, and any ``<think>…</think>`` left inline in
``content``, go to ``ChatResult.reasoning``, never to ``text``;
``usage.completion_tokens_details.reasoning_tokens``, when the server reports it,
goes to ``ChatResult.reasoning_tokens``.  ``completion_tokens`` is kept as reported
(reasoning included, per the OpenAI usage convention).

Context window: a "context exceeded" reply (HTTP 400 whose error says the request
exceeds the model's context: llama.cpp's "exceeds the available context size",
vLLM's and llama-cpp-python's "maximum context length", the code
``context_length_exceeded``) raises :class:`~bcas.llm.base.ContextWindowError` naming
the window.  ``context_window`` is the server's context length: given
(``context_window=``, or set by the harness from the preflight), else read once from
the server on first use (:mod:`bcas.llm.served`; ``None`` when it does not say).

Tool calling: ``ChatRequest.tools`` goes as ``tools`` with ``tool_choice: "auto"``, the
message's ``tool_calls`` come back in ``ChatResult.tool_calls``; the server needs a
tool-call parser (:data:`bcas.llm.tool_calls.TOOLS_HINT`, quoted when it refuses).

Timing (:mod:`bcas.timing`): every call records its wall time (``latency_s``) and, where
the server sends llama.cpp's ``timings``, its prompt and decode seconds
(``timing.prompt_s``, ``timing.decode_s``).  With ``stream=True`` (or ``BCAS_STREAM=1``)
a request without tools or logprobs is streamed (``stream_options.include_usage``) and
its time to the first generated token is kept (``timing.ttft_s``); the usage and
``timings`` come from the last chunks.  Stream only against servers that send usage in a
stream (llama.cpp's ``llama-server``, vLLM): llama-cpp-python's server sends none, and a
call without usage counts no tokens (``extra["usage_missing"]``).  A stream cut before
``[DONE]`` is a malformed body (retried).

The API key is read from the environment variable named by ``api_key_env``.  It is
sent only in the ``Authorization`` header; it is never logged, never part of ``repr``
and is removed from every error message.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bcas.keys import key_name_problem
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError, ModelError, split_reasoning
from bcas.llm.replies import _rejects_response_format, _retry_after, server_message, server_timings
from bcas.llm.served import context_exceeded, parse_logprobs, read_server_facts
from bcas.llm.tool_calls import TOOLS_HINT, calls_from_message
from bcas.timing import record_call

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
SCHEMA_MODES = ("json_schema", "json_object", "none")
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
STREAM_ENV = "BCAS_STREAM"


@dataclass
class _LoopState:
    """Objects bound to one event loop (httpx pools and semaphores cannot cross loops).

    ``lanes``: one ``httpx.AsyncClient`` of one connection per request in flight, made on
    first need (at most ``concurrency``); ``idle`` holds those not in use, the last freed
    on top.  A request takes a lane of its own instead of sharing one pool of
    ``concurrency`` connections: httpcore's pool checks every connection it holds (a
    liveness probe of each idle socket, a scan of all for each) on every request and
    every response, work that grows with the concurrency and that the event loop pays
    between a wave's answers; a lane's pool holds one.
    """

    loop: asyncio.AbstractEventLoop
    semaphore: asyncio.Semaphore
    lanes: list[httpx.AsyncClient] = field(default_factory=list)
    idle: list[httpx.AsyncClient] = field(default_factory=list)


class _Retryable(Exception):
    def __init__(self, reason: str, wait: float | None = None, malformed: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait
        self.malformed = malformed


class EndpointUnavailable(ModelError):
    """The server failed after its retries (connection errors, timeouts, 429/5xx, malformed bodies).

    The request itself was not refused: another server of the same model may answer it
    (:mod:`bcas.llm.multi_endpoint` fails over on this error, never on a 4xx).
    """


class _SchemaRejected(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OpenAICompatModel(ChatModel):
    """Chat model served over the OpenAI chat-completions HTTP protocol."""

    supports_json_schema = True
    supports_logprobs = True
    supports_tools = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str | None = None,
        concurrency: int = 16,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_retries: int = 5,
        max_malformed_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        schema_mode: str = "json_schema",
        schema_fallback: bool = True,
        model_id: str | None = None,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        context_window: int | None = None,
        stream: bool | None = None,
    ) -> None:
        if not model:
            raise ModelError(
                "the openai backend needs a model name, e.g. load_model('openai', 'Qwen/Qwen2.5-7B-Instruct')"
            )
        if schema_mode not in SCHEMA_MODES:
            raise ModelError(f"schema_mode must be one of {SCHEMA_MODES}, got {schema_mode!r}")
        if concurrency < 1:
            raise ModelError(f"concurrency must be >= 1, got {concurrency}")
        if max_retries < 0 or max_malformed_retries < 0:
            raise ModelError("max_retries and max_malformed_retries must be >= 0")
        self.model = model
        self.model_id = model_id or model
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self._url = httpx.URL(self.url)  # parsed once: httpx parses a string URL on every request
        self.concurrency = concurrency
        self.timeout = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
        self.max_retries = max_retries
        self.max_malformed_retries = max_malformed_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.requested_schema_mode = schema_mode
        self.schema_mode = schema_mode  # the mode in use: lowered by fallback, then remembered
        self.schema_fallback = schema_fallback
        self.extra_body = dict(extra_body or {})
        self._api_key_env = api_key_env
        self._api_key = _read_api_key(api_key_env)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        self._state: _LoopState | None = None
        self._rng = random.Random()
        self._window: int | None = context_window
        self._window_known = context_window is not None
        # None: the environment decides (BCAS_STREAM=1), so a harness run can stream without a new option.
        self.stream = os.environ.get(STREAM_ENV, "") == "1" if stream is None else bool(stream)

    def __repr__(self) -> str:
        key = f", api_key_env={self._api_key_env!r}" if self._api_key_env else ""
        return f"OpenAICompatModel({self.model!r}, base_url={self.base_url!r}{key})"

    @property
    def context_window(self) -> int | None:
        """The server's context length: given or set, else read once from the server (None: not reported)."""
        if not self._window_known:
            self._window_known = True
            try:
                with httpx.Client(timeout=httpx.Timeout(10.0, connect=5.0), headers=self._headers) as client:
                    self._window = read_server_facts(client, self.base_url, self.model).context_window
            except httpx.HTTPError:
                self._window = None
        return self._window

    @context_window.setter
    def context_window(self, value: int | None) -> None:
        self._window, self._window_known = value, True

    # -- plumbing -----------------------------------------------------------------

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._state
        if state is None or state.loop is not loop:
            # Clients from a finished loop cannot be closed from this one; drop them.
            state = _LoopState(loop, asyncio.Semaphore(self.concurrency))
            self._state = state
        return state

    def _lane(self, state: _LoopState) -> httpx.AsyncClient:
        """An idle lane of ``state`` (:class:`_LoopState`), or a new one; the caller holds the semaphore."""
        if state.idle:
            return state.idle.pop()
        lane = httpx.AsyncClient(
            timeout=self.timeout,
            headers=self._headers,
            verify=_tls_context(),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )
        state.lanes.append(lane)
        return lane

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text

    def _error(self, message: str) -> ModelError:
        return ModelError(self._redact(message))

    def _unavailable(self, message: str) -> EndpointUnavailable:
        return EndpointUnavailable(self._redact(message))

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_max, self.backoff_base * (2**attempt))
        return float(ceiling / 2 + self._rng.uniform(0, ceiling / 2))

    def _body(self, request: ChatRequest, mode: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.json_schema is not None and mode != "none":
            if mode == "json_schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "action", "schema": request.json_schema, "strict": True},
                }
            else:
                body["response_format"] = {"type": "json_object", "schema": request.json_schema}
        if request.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = request.top_logprobs
        if request.tools:
            body["tools"] = [dict(t) for t in request.tools]
            body["tool_choice"] = "auto"
        if self.stream and not request.top_logprobs and not request.tools:
            # Streamed for the time to first token; usage comes in the last chunk (include_usage).
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        return body

    # -- one HTTP exchange ----------------------------------------------------------

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        state = self._loop_state()
        streamed: dict[str, Any] | None = None
        async with state.semaphore:
            client = self._lane(state)
            try:
                if body.get("stream"):
                    response, streamed = await self._stream(client, body)
                else:
                    response = await client.post(self._url, json=body)
            except httpx.TimeoutException as exc:
                raise _Retryable(f"timed out ({type(exc).__name__})") from exc
            except httpx.TransportError as exc:
                raise _Retryable(f"connection error ({type(exc).__name__}: {exc})") from exc
            finally:
                state.idle.append(client)
        status = response.status_code
        if status == 429:
            raise _Retryable("HTTP 429 (rate limited)", wait=_retry_after(response))
        if status == 400:
            self._raise_if_context_exceeded(response)
        if status >= 400 and "response_format" in body:
            message = server_message(response)
            if _rejects_response_format(status, message):
                raise _SchemaRejected(f"HTTP {status}: {message}")
        if status >= 500 or status in RETRYABLE_STATUS:
            raise _Retryable(f"HTTP {status}: {server_message(response)}", wait=_retry_after(response))
        if status >= 400:
            message = server_message(response)
            hint = f"; {TOOLS_HINT}" if "tools" in body else ""
            raise self._error(
                f"{self.url} rejected the request for model {self.model!r}: HTTP {status}: {message}{hint}"
            )
        try:
            payload = streamed if streamed is not None else response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            snippet = response.text[:200]
            raise _Retryable(f"malformed response body (not JSON: {exc}): {snippet!r}", malformed=True) from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list) or not payload["choices"]:
            snippet = json.dumps(payload)[:200]
            raise _Retryable(f"malformed response body (no choices): {snippet}", malformed=True)
        reply = payload["choices"][0].get("message") if isinstance(payload["choices"][0], dict) else None
        if not isinstance(reply, dict):
            raise _Retryable("malformed response body (choices[0].message missing)", malformed=True)
        return payload

    async def _stream(self, client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[httpx.Response, Any]:
        """POST a streamed request: the response, and the completion its server-sent events add up to
        (``None`` when the status is not 200: the body is read for the error handling).

        The completion carries ``_first_token_at`` (``time.perf_counter()`` at the first chunk
        holding generated text), usage and llama.cpp's ``timings`` from the chunks that send them.
        A stream that ends without ``[DONE]`` or any choice is a malformed body (retried).
        """
        async with client.stream("POST", self._url, json=body) as response:
            if response.status_code != 200:
                await response.aread()
                return response, None
            text: list[str] = []
            reasoning: list[str] = []
            first: float | None = None
            finish: Any = None
            usage: Any = None
            timings: Any = None
            seen_choice = done = False
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError as exc:
                    raise _Retryable(f"malformed stream chunk ({exc}): {data[:200]!r}", malformed=True) from exc
                if not isinstance(chunk, dict):
                    continue
                usage = chunk.get("usage") or usage
                timings = chunk.get("timings") or timings
                for choice in chunk.get("choices") or ():
                    seen_choice = True
                    delta = choice.get("delta") or {}
                    piece = delta.get("content") or ""
                    thought = delta.get("reasoning_content") or delta.get("reasoning") or ""
                    if (piece or thought) and first is None:
                        first = time.perf_counter()
                    text.append(piece)
                    reasoning.append(thought if isinstance(thought, str) else "")
                    finish = choice.get("finish_reason") or finish
        if not done or not seen_choice:
            return response, {"choices": [], "stream_incomplete": True}
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if any(reasoning):
            message["reasoning_content"] = "".join(reasoning)
        payload: dict[str, Any] = {"choices": [{"message": message, "finish_reason": finish}], "_first_token_at": first}
        if usage is not None:
            payload["usage"] = usage
        if timings is not None:
            payload["timings"] = timings
        return response, payload

    def _raise_if_context_exceeded(self, response: httpx.Response) -> None:
        """A 400 that says the request does not fit the context: :class:`ContextWindowError` naming the window."""
        message = server_message(response)
        exceeded, window = context_exceeded(response, message)
        if not exceeded:
            return
        window = window or self._window
        shown = f"{window} tokens" if window else "of unknown size"
        raise ContextWindowError(
            self._redact(
                f"{self.url}: the request for model {self.model!r} does not fit its context window ({shown}): "
                f"{message}; shorten the conversation or start the server with a larger context "
                "(llama.cpp: -c/--ctx-size or --n_ctx; vLLM: --max-model-len)"
            ),
            window=window,
        )

    # -- the contract --------------------------------------------------------------

    async def chat(self, request: ChatRequest) -> ChatResult:
        requested_mode = self.requested_schema_mode
        mode = self.schema_mode
        retries = 0
        malformed = 0
        started = time.perf_counter()
        while True:
            body = self._body(request, mode)
            attempt = time.perf_counter()  # the time to first token counts from the attempt that answered
            try:
                payload = await self._post(body)
            except _SchemaRejected as rejected:
                next_mode = _next_mode(mode)
                if not self.schema_fallback or next_mode is None:
                    raise self._error(
                        f"{self.url} rejected response_format ({mode}) for model {self.model!r}: {rejected.message}; "
                        f"set schema_mode='json_object' or 'none', or schema_fallback=True"
                    ) from None
                mode = next_mode
                continue
            except _Retryable as failure:
                if failure.malformed:
                    malformed += 1
                    if malformed > self.max_malformed_retries:
                        raise self._unavailable(
                            f"{self.url} returned {malformed} malformed bodies for model {self.model!r}; "
                            f"last: {failure.reason}"
                        ) from None
                if retries >= self.max_retries:
                    raise self._unavailable(
                        f"{self.url}: gave up on model {self.model!r} after {retries + 1} attempts "
                        f"({retries} retries); last error: {failure.reason}"
                    ) from None
                wait = self._backoff(retries)
                if failure.wait is not None:
                    wait = min(max(failure.wait, 0.0), self.max_retry_after)
                retries += 1
                await asyncio.sleep(wait)
                continue
            if mode != self.schema_mode:
                self.schema_mode = mode  # remember what this server accepts
            result = self._result(payload, request, time.perf_counter() - started, retries, requested_mode, mode)
            first = payload.get("_first_token_at")
            if isinstance(first, float):
                result.timing["ttft_s"] = max(0.0, first - attempt)
            record_call(result)
            return result

    def _result(
        self,
        payload: dict[str, Any],
        request: ChatRequest,
        latency: float,
        retries: int,
        requested_mode: str,
        mode: str,
    ) -> ChatResult:
        choice = payload["choices"][0]
        message = choice["message"]
        inline, text = split_reasoning(message.get("content") or "")
        apart = message.get("reasoning_content") or message.get("reasoning")
        reasoning = "\n".join(p for p in (apart if isinstance(apart, str) else "", inline) if p)
        raw_finish = choice.get("finish_reason")
        finish = "length" if raw_finish == "length" else "stop"
        extra: dict[str, Any] = {}
        if raw_finish not in (None, "stop", "length"):
            extra["finish_reason_raw"] = raw_finish
        if request.json_schema is not None:
            extra["schema_mode"] = mode
            if mode != requested_mode:
                extra["schema_fallback"] = True
        usage = payload.get("usage")
        reasoning_tokens = 0
        if isinstance(usage, dict):
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
                reasoning_tokens = int(details["reasoning_tokens"])
        else:
            prompt_tokens = completion_tokens = 0
            extra["usage_missing"] = True
        logprobs = parse_logprobs(choice.get("logprobs")) if request.top_logprobs else None
        return ChatResult(
            timing=server_timings(payload.get("timings")),
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason=finish,
            latency_s=latency,
            logprobs=logprobs,
            retries=retries,
            extra=extra,
            reasoning=reasoning,
            reasoning_tokens=reasoning_tokens,
            tool_calls=calls_from_message(message) if request.tools else (),
        )

    async def aclose(self) -> None:
        state, self._state = self._state, None
        if state is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is state.loop:
            for lane in state.lanes:
                await lane.aclose()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every lane of every model of the process: making one reads the CA bundle (~30 ms)."""
    return httpx.create_ssl_context()


def _read_api_key(env_name: str | None) -> str | None:
    if env_name is None:
        return None
    problem = key_name_problem(env_name)
    if problem is not None:  # a key given in place of its variable's name: never repeated
        raise ModelError(f"api_key_env: the value {problem}")
    value = os.environ.get(env_name)
    if not value:
        raise ModelError(f"api_key_env names the environment variable {env_name!r}, which is not set or empty")
    return value


def _next_mode(mode: str) -> str | None:
    index = SCHEMA_MODES.index(mode)
    return SCHEMA_MODES[index + 1] if index + 1 < len(SCHEMA_MODES) else None


def create(model: str | None = None, **options: Any) -> OpenAICompatModel:
    """Factory registered as backend ``openai``; see ``OpenAICompatModel`` for options."""
    if model is None:
        raise ModelError("the openai backend needs a model name (the one the server serves)")
    return OpenAICompatModel(model, **options)
