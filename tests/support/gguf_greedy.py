"""Greedy tokens of a GGUF model under llama.cpp: the reference half of the conversion round trip.

Run with an interpreter that has ``llama_cpp`` (the main environment); reads one JSON
object on stdin and writes one on stdout::

    {"gguf": PATH, "max_tokens": N, "top": K, "prompts": [{"text": STR, "ids": [INT, ...]}, ...]}
    -> {"results": [{"tokenized": [INT, ...], "pieces": [STR, ...], "top": [{PIECE: LOGPROB}, ...],
                     "stopped": BOOL}, ...]}

For each prompt: ``tokenized`` is llama.cpp's own tokenisation of ``text`` (special
tokens parsed, no BOS added: the text is a rendered chat template), so the caller can
compare it with the Hugging Face tokenizer's ``ids``.  Generation starts from ``ids``
and takes the argmax of the logits at every step (greedy, no sampler), for at most
``max_tokens`` tokens or until an end-of-generation token (not included; ``stopped``).
``top`` holds the ``K`` best log-probabilities (log-softmax of the logits) at each
generated position, keyed by token text.  Used by tests/llm/test_vllm.py.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np


def _piece(llm: Any, token: int) -> str:
    return llm.detokenize([token]).decode("utf-8", errors="replace")


def greedy(llm: Any, ids: list[int], max_tokens: int, top: int, stop: set[int]) -> dict[str, Any]:
    llm.reset()
    llm.eval(ids)
    pieces: list[str] = []
    tops: list[dict[str, float]] = []
    stopped = False
    for _ in range(max_tokens):
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        logprobs = logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
        token = int(np.argmax(logits))
        if token in stop:
            stopped = True
            break
        best: dict[str, float] = {}
        for candidate in np.argsort(-logprobs)[:top]:
            best.setdefault(_piece(llm, int(candidate)), float(logprobs[candidate]))
        pieces.append(_piece(llm, token))
        tops.append(best)
        llm.eval([token])
    return {"pieces": pieces, "top": tops, "stopped": stopped}


def main() -> int:
    from llama_cpp import Llama

    job = json.load(sys.stdin)
    longest = max(len(p["ids"]) for p in job["prompts"]) + int(job["max_tokens"]) + 8
    llm = Llama(model_path=job["gguf"], n_ctx=max(512, longest), n_threads=1, logits_all=True, verbose=False)
    stop = {llm.token_eos()}
    stop.update(llm.tokenize(b"<|im_end|>", add_bos=False, special=True)[:1])
    results = []
    for prompt in job["prompts"]:
        tokenized = llm.tokenize(prompt["text"].encode("utf-8"), add_bos=False, special=True)
        result = greedy(llm, list(prompt["ids"]), int(job["max_tokens"]), int(job["top"]), stop)
        results.append({"tokenized": list(tokenized), **result})
    json.dump({"results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
