"""Throughput with several servers of one model (prints numbers, asserts nothing).

Loopback servers answer every request after 200 ms (``FaultServer(latency=0.2)``), each
in its own process.  The client sends ``--requests`` requests at once with the same
concurrency per endpoint (``--concurrency``):

1. one endpoint (``OpenAICompatModel``);
2. two endpoints (``MultiEndpointModel``, least-in-flight routing): target >= 1.8x the
   throughput of one;
3. two endpoints of which one refuses connections (a dead server): every request is
   still answered, by fail-over, at about the throughput of one.

    python benchmarks/perf/bench_endpoints.py [--requests 256] [--concurrency 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time

from bcas.llm.base import ChatModel, ChatRequest
from bcas.llm.multi_endpoint import MultiEndpointModel
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.testing.servers import FaultServer, free_port

LATENCY_S = 0.2
TARGET = 1.8


def _serve(ports: multiprocessing.Queue, stop: multiprocessing.Event) -> None:  # type: ignore[type-arg]
    with FaultServer(latency=LATENCY_S) as server:
        ports.put(server.port)
        stop.wait()
        ports.put((server.requests, server.max_in_flight))


class Servers:
    """``n`` FaultServers, one process each (so no server shares the client's GIL)."""

    def __init__(self, n: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        self.queues = [context.Queue() for _ in range(n)]
        self.children = [context.Process(target=_serve, args=(q, self.stop), daemon=True) for q in self.queues]
        for child in self.children:
            child.start()
        self.urls = [f"http://127.0.0.1:{q.get(timeout=60)}/v1" for q in self.queues]

    def close(self) -> list[tuple[int, int]]:
        self.stop.set()
        seen = [q.get(timeout=60) for q in self.queues]
        for child in self.children:
            child.join(timeout=30)
        return seen


async def _round(model: ChatModel, n: int, tag: str) -> float:
    requests = [ChatRequest([{"role": "user", "content": f"{tag} question {i}"}], max_tokens=8) for i in range(n)]
    started = time.perf_counter()
    results = await asyncio.gather(*(model.chat(r) for r in requests))
    elapsed = time.perf_counter() - started
    if len(results) != n:
        print(f"  only {len(results)} of {n} answered")
    return elapsed


def measure(make: callable, n: int, rounds: int, label: str) -> float:  # type: ignore[valid-type]
    async def run() -> list[float]:
        model = make()
        try:
            return [await _round(model, n, f"{label} r{r}") for r in range(rounds)]
        finally:
            await model.aclose()

    times = asyncio.run(run())
    warm = times[1:] or times
    rate = n / statistics.median(warm)
    shown = ", ".join(f"{t:.3f}" for t in times)
    print(
        f"  {label}: rounds {shown} s (first opens connections); median warm {statistics.median(warm):.3f} s "
        f"= {rate:.1f} requests/s"
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight per endpoint")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n, c = args.requests, args.concurrency
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"{n} requests sent at once; servers answer after {LATENCY_S * 1000:.0f} ms; concurrency {c} per endpoint")
    print(f"  ideal: one endpoint {c / LATENCY_S:.0f} requests/s, two {2 * c / LATENCY_S:.0f} requests/s")
    servers = Servers(2)
    try:
        one = measure(
            lambda: OpenAICompatModel("bench", base_url=servers.urls[0], concurrency=c), n, args.rounds, "one endpoint"
        )
        two = measure(lambda: MultiEndpointModel("bench", servers.urls, concurrency=c), n, args.rounds, "two endpoints")
        dead = f"http://127.0.0.1:{free_port()}/v1"
        holder: list[MultiEndpointModel] = []

        def with_dead() -> MultiEndpointModel:
            holder.append(MultiEndpointModel("bench", [dead, servers.urls[0]], concurrency=c))
            return holder[-1]

        failed = measure(with_dead, n, args.rounds, "two endpoints, one refusing connections")
    finally:
        seen = servers.close()
    print(f"two endpoints vs one: {two / one:.2f}x the throughput (target >= {TARGET}x)")
    print(
        f"one of two dead: {failed / one:.2f}x the throughput of one healthy endpoint; "
        f"routing: {holder[-1].stats() if holder else 'n/a'}"
    )
    for url, (requests, peak) in zip(servers.urls, seen, strict=True):
        print(f"  server {url}: {requests} requests, at most {peak} at once")


if __name__ == "__main__":
    main()
