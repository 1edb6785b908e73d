"""A llama.cpp engine in a child process: a native crash fails a request, not the session.

llama.cpp is a native library; a segmentation fault or an abort inside it ends the
process that loaded it.  Loaded in the pytest process, such a crash would take pytest,
every record not yet written and the report with it.  So the embedded backend keeps
its engine here, in a child process started with ``python -m bcas.llm.engine_process``,
and talks to it over one socket (pickled dicts, :mod:`multiprocessing.connection`).

Protocol (parent → child, one message each, answered in order):

``{"op": "load", "path": ..., "options": {...}}``
    Load the GGUF; answered ``{"ok": True, "n_ctx": int, "pid": int, "chat_template": str, "n_threads": int}`` or
    ``{"ok": False, "error": str}``.
``{"op": "chat", "request": {...}}``
    One chat completion (messages, max_tokens, temperature, seed, stop, json_schema,
    top_logprobs, repeat_penalty, tools); answered with the completion's fields (with
    ``tool_calls``, chat-API dicts, when the model called functions) or
    ``{"ok": False, "error": str, "kind": "context" | "llama"}``.
``{"op": "close"}``
    Free the model and exit.

Grammar-constrained requests sample check-first (:mod:`bcas.llm.grammar_sampling`):
the grammar sees the chain's chosen token and masks the whole vocabulary only when it
rejects that token.

A request's answer depends on its prompt alone, whatever request came before it: the KV
cache keeps, of the previous prompt, only the positions evaluated in full prompt batches
aligned to multiples of ``n_batch`` (:func:`aligned_llama_class`), and a request reuses
the part of that it shares, whole batches only.  Every batch is then computed from the
same tokens and the same cached keys and values as on an empty cache, so the logits are
bit-identical to a cold evaluation; ``prefix_reuse=False`` evaluates every request from
an empty cache.

Nothing the model writes is executed: the child returns text and numbers only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from bcas.llm.grammar_sampling import GrammarRejectedError, install_check_first
from bcas.llm.tool_calls import has_tool_messages, tool_results_as_user


class _TopLogprobs:
    """Logits processor that records the top-k log-probabilities at each position.

    It sees the raw logits (before repetition penalty and grammar masking), so a
    reranker can read log P("Yes") against log P("No") without ``logits_all``.
    """

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


def aligned_llama_class() -> type:
    """``llama_cpp.Llama`` whose prompt reuse never changes a logit.

    llama-cpp-python reuses the longest prefix the previous request left in the KV cache.
    Two kinds of cached positions would make an answer depend on that request: the
    previous reply's tokens, decoded one at a time (their keys and values differ in the
    last bits from the same tokens evaluated in a batch), and a prompt evaluated from a
    reuse point that is not a batch boundary (its batches cover other positions than a
    cold evaluation's, and a matrix product over another batch rounds differently).  So:

    * after each prompt, only the positions in its full batches, ``[0, ⌊L/n_batch⌋·n_batch)``,
      stay trusted; generated tokens never are;
    * a request's reuse point is its shared prefix with the trusted positions, rounded down
      to a multiple of ``n_batch``; the tokens between it and llama-cpp-python's own reuse
      point are evaluated again.

    A cold evaluation runs the batches ``[0, B), [B, 2B), ..., [kB, L)``; with reuse, the
    same batches from the reuse point on, over keys and values that were themselves computed
    in those batches: every number is the same.  ``reused_tokens`` is the last prompt's
    reused prefix, for the reply.
    """
    import llama_cpp

    class AlignedReuseLlama(llama_cpp.Llama):
        def __init__(self, *args: Any, prefix_reuse: bool = True, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.prefix_reuse = prefix_reuse
            self.trusted_tokens = 0
            self.reused_tokens = 0
            self._prompt_next = False

        def generate(self, tokens: Any, *args: Any, **kwargs: Any) -> Any:
            # Called right before its first step: cut the cache back to the trusted prefix
            # and make the next eval a prompt, even for a prompt that is cached whole.
            self.n_tokens = min(self.n_tokens, self.trusted_tokens if self.prefix_reuse else 0)
            self._requires_eval = True
            self._prompt_next = True
            return super().generate(tokens, *args, **kwargs)

        def eval(self, tokens: Any) -> None:
            if not self._prompt_next:
                super().eval(tokens)  # a generated token
                return
            self._prompt_next = False
            start = self.n_tokens - self.n_tokens % self.n_batch
            if start < self.n_tokens:
                tokens = [*self.input_ids[start : self.n_tokens].tolist(), *tokens]
                self.n_tokens = start
            self.reused_tokens = start
            super().eval(tokens)
            self.trusted_tokens = self.n_tokens - self.n_tokens % self.n_batch

    return AlignedReuseLlama


def load_llama(path: str, options: dict[str, Any], *, plain: bool = False) -> Any:
    """Create the ``llama_cpp.Llama`` (in the child): the engine's :func:`aligned_llama_class`,
    or with ``plain`` llama-cpp-python's own (the benchmarks' raw llama.cpp figures).

    ``extra_buffer_types=False`` (the default) turns off llama.cpp's extra CPU weight
    buffers (AMX / repacked layouts): on AMX-capable Xeons the AMX path of the
    llama.cpp bundled with llama-cpp-python 0.3.x crashes on any multi-token batch,
    and for the Q4_1 default model those buffers bring nothing else.
    """
    import llama_cpp.llama_cpp as llama_c

    opts = dict(options)
    extra_buffer_types = bool(opts.pop("extra_buffer_types", False))
    n_threads = opts.pop("n_threads", None)
    if n_threads is not None:
        opts["n_threads"] = n_threads
        opts["n_threads_batch"] = n_threads
    original = llama_c.llama_model_default_params

    def default_params() -> Any:
        params = original()
        params.use_extra_bufts = extra_buffer_types
        return params

    llama_c.llama_model_default_params = default_params
    try:
        if plain:
            import llama_cpp

            opts.pop("prefix_reuse", None)
            return llama_cpp.Llama(model_path=path, **opts)
        return aligned_llama_class()(model_path=path, **opts)
    finally:
        llama_c.llama_model_default_params = original


class _Engine:
    """The child's side: one ``Llama`` and a small cache of compiled grammars."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.grammars: OrderedDict[str, Any] = OrderedDict()

    def grammar(self, schema_json: str) -> Any:
        from llama_cpp import LlamaGrammar  # type: ignore[attr-defined]  # exported, not in __all__

        grammar = self.grammars.get(schema_json)
        if grammar is None:
            grammar = LlamaGrammar.from_json_schema(schema_json, verbose=False)
            self.grammars[schema_json] = grammar
            while len(self.grammars) > 64:
                self.grammars.popitem(last=False)
        else:
            self.grammars.move_to_end(schema_json)
        return grammar

    def chat(self, req: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        kwargs: dict[str, Any] = {
            "messages": req["messages"],
            "max_tokens": req["max_tokens"],
            "temperature": req["temperature"],
            "seed": req["seed"],
            "stop": req["stop"],
        }
        if req.get("repeat_penalty") is not None:
            kwargs["repeat_penalty"] = req["repeat_penalty"]
        if req.get("json_schema") is not None:
            try:
                kwargs["grammar"] = self.grammar(json.dumps(req["json_schema"]))
            except Exception as exc:  # the converter raises plain Exceptions/ValueErrors
                return {"ok": False, "kind": "schema", "error": f"cannot turn this json_schema into a grammar: {exc}"}
        recorder: _TopLogprobs | None = None
        if req.get("top_logprobs"):
            from llama_cpp import LogitsProcessorList

            recorder = _TopLogprobs(self.llm, int(req["top_logprobs"]))
            kwargs["logits_processor"] = LogitsProcessorList([recorder])
        # The prompt reuses only whole, aligned batches of the previous prompt (aligned_llama_class):
        # its logits, and so a greedy answer, are those of an empty cache, whatever request came
        # before (a resumed run, a call replayed from the generation cache, interleaved items).
        try:
            completion = self.complete(kwargs, req.get("tools"))
        except GrammarRejectedError as exc:
            return {"ok": False, "kind": "schema", "error": str(exc)}
        except ValueError as exc:
            # llama-cpp-python: ValueError("Requested tokens (N) exceed context window of M")
            return {"ok": False, "kind": "context", "error": str(exc)}
        except RuntimeError as exc:
            return {"ok": False, "kind": "llama", "error": str(exc)}
        choice = completion["choices"][0]
        usage = completion.get("usage") or {}
        completion_tokens = int(usage.get("completion_tokens", 0))
        return {
            "ok": True,
            "tool_calls": list(choice["message"].get("tool_calls") or []),
            "text": choice["message"].get("content") or "",
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": completion_tokens,
            "finish_reason": "length" if choice.get("finish_reason") == "length" else "stop",
            "generation_s": time.perf_counter() - started,
            "reused_tokens": int(getattr(self.llm, "reused_tokens", 0)),
            "logprobs": recorder.rows[:completion_tokens] if recorder is not None else None,
        }

    def complete(self, kwargs: dict[str, Any], tools: list[dict[str, Any]] | None) -> Any:
        """``create_chat_completion``; with tools, or tool calls in the conversation, the function-calling handler."""
        if not tools and not has_tool_messages(kwargs["messages"]):
            return self.llm.create_chat_completion(**kwargs)
        from llama_cpp.llama_chat_format import get_chat_completion_handler

        handler: Any = get_chat_completion_handler("chatml-function-calling")  # its message types are TypedDicts
        messages = tool_results_as_user(kwargs.pop("messages"))
        llama = _CappedCompletions(self.llm, kwargs.get("max_tokens"))
        return handler(llama=llama, messages=messages, tools=tools, tool_choice="auto" if tools else None, **kwargs)


class _CappedCompletions:
    """The ``Llama`` the function-calling handler sees: every completion it runs is capped so that
    one chat call generates at most its ``max_tokens`` in all, and never past the context window.

    llama-cpp-python's ``chatml-function-calling`` handler (0.3.x), with ``tool_choice="auto"``,
    runs several completions per call (choose a function or a message, the arguments, whether
    another function follows) with ``max_tokens=None``: each may fill the context window, and
    the prompt of the next one then exceeds it ("Requested tokens (n) exceed context window").
    Here each is given what is left of the call's ``max_tokens`` and of the window; once nothing
    is left the model is not run and the completion is empty, so the handler ends its reply.
    """

    def __init__(self, llm: Any, max_tokens: int | None) -> None:
        self._llm = llm
        self._left = int(max_tokens) if max_tokens and max_tokens > 0 else None
        self._first = True  # a prompt that alone overfills the window is the caller's error (context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def create_completion(self, prompt: str, **kwargs: Any) -> Any:
        llm = self._llm
        room = int(llm.n_ctx()) - len(llm.tokenize(prompt.encode("utf-8"), special=True)) - 1
        cap = room if self._left is None else min(room, self._left)
        first, self._first = self._first, False
        if cap < 1 and not first:  # nothing left: an empty completion ends the handler's reply
            return {"id": "cmpl-capped", "object": "text_completion", "created": int(time.time()), "model": "",
                    "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}  # fmt: skip
        given = kwargs.get("max_tokens")
        cap = max(cap, 1)  # the first completion's prompt may not fit: llama.cpp then says so
        kwargs["max_tokens"] = cap if given is None or given <= 0 else min(int(given), cap)
        completion = llm.create_completion(prompt=prompt, **kwargs)
        if self._left is not None:
            self._left -= int((completion.get("usage") or {}).get("completion_tokens", 0))
        return completion


def serve(conn: Connection) -> None:
    """Answer the parent's messages until it closes the socket or says ``close``."""
    engine: _Engine | None = None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        op = message.get("op")
        if op == "close":
            conn.send({"ok": True})
            return
        if op == "load":
            try:
                llm = load_llama(message["path"], message["options"])
            except Exception as exc:  # reported to the parent, which raises ModelError
                conn.send({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
                continue
            install_check_first(llm)
            engine = _Engine(llm)
            template = (llm.metadata or {}).get("tokenizer.chat_template")
            conn.send({"ok": True, "n_ctx": int(llm.n_ctx()), "pid": os.getpid(), "chat_template": template,
                       "n_threads": int(llm.context_params.n_threads)})  # fmt: skip
        elif op == "chat" and engine is not None:
            conn.send(engine.chat(message["request"]))
        else:
            conn.send({"ok": False, "kind": "protocol", "error": f"unexpected message {op!r}"})


def exit_with_parent(parent: int, every_s: float = 0.25) -> threading.Thread:
    """End this process as soon as its parent is gone, even in the middle of a generation.

    The closed socket only ends :func:`serve` at its next message; a parent killed by
    ``kill -9`` or an out-of-memory kill during a long generation would otherwise leave
    this engine spinning on the cores until the generation ends (minutes for a thousand
    tokens on a busy CPU), slowing whatever runs next.  A daemon thread watches the parent
    id (the process is re-parented when its parent dies) and exits at once.
    """

    def watch() -> None:
        while True:
            time.sleep(every_s)
            if os.getppid() != parent:
                os._exit(0)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m bcas.llm.engine_process FD (started by the embedded backend)", file=sys.stderr)
        return 2
    # OpenMP threads sleep rather than spin between batches: spinning threads starve the
    # parent's event loop and retriever on a small machine (measured: 2x slower prompt
    # processing under contention).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # The parent owns this process's life: Ctrl-C or a scheduler's SIGTERM reach the
    # whole process group, and the parent answers them (finishing its records, then
    # closing this engine).  Should the parent die, this process ends with it (exit_with_parent).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    exit_with_parent(os.getppid())
    sock = socket.socket(fileno=int(argv[0]))
    conn = Connection(sock.detach())
    try:
        serve(conn)
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
