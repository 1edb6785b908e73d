"""Speed figures for the model backends (prints numbers, asserts nothing).

1. ``openai`` backend overhead: 64 requests at concurrency 16 against a loopback
   server that answers every request after 200 ms.  The ideal wall time is
   64 × 0.2 / 16 = 0.8 s; the target is at most 1.25 × that.
2. ``embedded`` SmolLM2-135M-Instruct Q4_1: generated tokens per second, free text
   and under a JSON schema.

    python benchmarks/perf/bench_llm.py [--threads N] [--rounds R] [--same-process] [--skip-embedded]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time

from bcas.llm.base import ChatRequest
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.testing.servers import FaultServer

LATENCY_S = 0.2
REQUESTS = 64
CONCURRENCY = 16
IDEAL_S = REQUESTS * LATENCY_S / CONCURRENCY

ACTION_SCHEMA = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["search", "answer"]},
        "text": {"type": "string", "maxLength": 40},
    },
    "required": ["action", "text"],
    "additionalProperties": False,
}


async def _openai_round(model: OpenAICompatModel, round_no: int) -> tuple[float, float]:
    requests = [ChatRequest([{"role": "user", "content": f"round {round_no} question {i}"}]) for i in range(REQUESTS)]
    started, cpu_started = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(model.chat(r) for r in requests))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    if len(results) != REQUESTS:
        print(f"  round {round_no}: only {len(results)} results")
    return elapsed, cpu


def _serve(port_queue: multiprocessing.Queue, stop: multiprocessing.Event) -> None:  # type: ignore[type-arg]
    with FaultServer(latency=LATENCY_S) as server:
        port_queue.put(server.port)
        stop.wait()
        port_queue.put((server.requests, server.max_in_flight))


def bench_openai(rounds: int, same_process: bool) -> None:
    where = "in this process" if same_process else "in a separate process"
    print(f"openai backend: {REQUESTS} requests, concurrency {CONCURRENCY}, server latency {LATENCY_S * 1000:.0f} ms")
    print(f"  loopback server {where}; ideal wall time {IDEAL_S:.2f} s, target <= {1.25 * IDEAL_S:.2f} s (1.25x)")

    async def run_all(base_url: str) -> list[tuple[float, float]]:
        model = OpenAICompatModel("bench", base_url=base_url, concurrency=CONCURRENCY)
        times = [await _openai_round(model, r) for r in range(rounds)]
        await model.aclose()
        return times

    if same_process:
        with FaultServer(latency=LATENCY_S) as server:
            measured = asyncio.run(run_all(server.base_url))
            seen, peak = server.requests, server.max_in_flight
    else:
        context = multiprocessing.get_context("spawn")
        ports: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
        stop = context.Event()
        child = context.Process(target=_serve, args=(ports, stop), daemon=True)
        child.start()
        port = ports.get(timeout=60)
        measured = asyncio.run(run_all(f"http://127.0.0.1:{port}/v1"))
        stop.set()
        seen, peak = ports.get(timeout=60)
        child.join(timeout=30)
    times = [elapsed for elapsed, _ in measured]
    for i, (elapsed, cpu) in enumerate(measured):
        label = "cold (connections opened)" if i == 0 else "warm"
        print(
            f"  round {i}: {elapsed:.3f} s = {elapsed / IDEAL_S:.2f}x ideal, "
            f"client CPU {cpu * 1000 / REQUESTS:.2f} ms/request  [{label}]"
        )
    print(f"  median {statistics.median(times):.3f} s = {statistics.median(times) / IDEAL_S:.2f}x ideal")
    print(f"  server saw {seen} requests, at most {peak} at once")


def bench_embedded(threads: int | None, rounds: int) -> None:
    from bcas.llm.embedded import create

    load_started = time.perf_counter()
    model = create(n_ctx=2048, n_threads=threads)
    print(
        f"embedded {model.model_id}: loaded in {time.perf_counter() - load_started:.2f} s, n_threads={threads or 'default'}"
    )
    prompts = [
        "Write a short paragraph about the history of Paris.",
        "Explain how a bicycle works.",
        "Describe the water cycle.",
    ]

    async def run(schema: dict | None, max_tokens: int) -> tuple[int, int, float]:
        generated = prompt_tokens = 0
        seconds = 0.0
        for _ in range(rounds):
            for text in prompts:
                request = ChatRequest([{"role": "user", "content": text}], max_tokens=max_tokens, json_schema=schema)
                result = await model.chat(request)
                generated += result.completion_tokens
                prompt_tokens += result.prompt_tokens
                seconds += result.extra["generation_s"]
        return generated, prompt_tokens, seconds

    for label, schema, max_tokens in (("free text", None, 128), ("JSON schema", ACTION_SCHEMA, 64)):
        generated, prompt_tokens, seconds = asyncio.run(run(schema, max_tokens))
        print(
            f"  {label}: {generated} tokens generated ({prompt_tokens} prompt tokens) in {seconds:.2f} s "
            f"= {generated / seconds:.1f} generated tokens/s (prompt evaluation included)"
        )
    model.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: its own choice)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-embedded", action="store_true")
    parser.add_argument(
        "--same-process", action="store_true", help="run the loopback server in this process (shares the GIL)"
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    bench_openai(args.rounds, args.same_process)
    if not args.skip_embedded:
        bench_embedded(args.threads, max(1, args.rounds // 3))


if __name__ == "__main__":
    main()
