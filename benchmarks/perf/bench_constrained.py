"""Constrained over free decoding speed on the embedded model (prints numbers, asserts nothing).

The same prompts are decoded greedily three ways, interleaved prompt by prompt in one
run: free text, under a JSON schema with llama-cpp-python's full-vocabulary grammar
mask on every token, and under the schema checking the chosen token first
(:mod:`bcas.llm.grammar_sampling`, the engine's default).  Each prompt is evaluated
once beforehand, so every decode reuses its prefix and the times are generation
times.  Target: check-first constrained tokens/s over free tokens/s >= 0.8.

    python benchmarks/perf/bench_constrained.py [--threads N] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bcas.llm.embedded import default_gguf_path
from bcas.llm.engine_process import load_llama
from bcas.llm.grammar_sampling import install_check_first

SCHEMA = {
    "type": "object",
    "properties": {
        "thought": {"type": "string", "maxLength": 120},
        "action": {"type": "string", "enum": ["search", "answer"]},
        "query": {"type": "string", "maxLength": 80},
    },
    "required": ["thought", "action", "query"],
    "additionalProperties": False,
}
SYSTEM = "Decide the next step. Reply with JSON: a thought, then search for a query, or answer."
QUESTIONS = [
    "Who directed the film that won Best Picture in 1998?",
    "What is the capital of the country where the Danube ends?",
    "Which element has the atomic number 26?",
    "When was the university attended by Alan Turing founded?",
    "Which river flows through the city where Mozart was born?",
    "How tall is the tallest mountain in Africa?",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("BCAS_THREADS", "1")))
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    from llama_cpp import LlamaGrammar  # type: ignore[attr-defined]  # exported, not in __all__

    print(
        f"machine: {len(os.sched_getaffinity(0))} usable CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    opts = {"n_ctx": 2048, "n_threads": args.threads, "verbose": False, "seed": 0}
    llm = load_llama(str(default_gguf_path()), opts, plain=True)
    install_check_first(llm)
    grammar = LlamaGrammar.from_json_schema(json.dumps(SCHEMA), verbose=False)
    totals = {"free": [0, 0.0], "full mask": [0, 0.0], "check-first": [0, 0.0]}
    masks = [0, 0]
    for question in QUESTIONS:
        messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        llm.create_chat_completion(messages=messages, max_tokens=1, temperature=0.0)  # evaluate the prompt once
        for mode in totals:
            kwargs: dict[str, Any] = {"messages": messages, "max_tokens": args.max_tokens, "temperature": 0.0}
            if mode != "free":
                kwargs["grammar"] = grammar
                llm.check_first = mode == "check-first"
            started = time.perf_counter()
            out = llm.create_chat_completion(**kwargs)
            totals[mode][1] += time.perf_counter() - started
            totals[mode][0] += int(out["usage"]["completion_tokens"])
            if mode == "check-first" and llm.last_sampler is not None:
                masks[0] += llm.last_sampler.full_masks
                masks[1] += llm.last_sampler.tokens
    speed = {mode: tokens / seconds for mode, (tokens, seconds) in totals.items()}
    print(f"{len(QUESTIONS)} prompts, greedy, max {args.max_tokens} tokens, n_threads={args.threads}")
    for mode, (tokens, seconds) in totals.items():
        print(f"  {mode:12s} {tokens:5d} tokens in {seconds:7.2f} s = {speed[mode]:6.1f} tokens/s")
    print(f"  check-first: {masks[0]} of {masks[1]} tokens needed the full mask")
    print(f"constrained/free, full mask:  {speed['full mask'] / speed['free']:.2f}")
    print(f"constrained/free, check-first: {speed['check-first'] / speed['free']:.2f}  (target >= 0.8)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    llm.close()


if __name__ == "__main__":
    main()
