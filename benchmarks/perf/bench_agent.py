"""Harness overhead of the BCAS loop (prints numbers, asserts nothing).

An instant in-process model (replies prepared in advance, fixed usage) and an
in-memory retriever stand in for the real ones, so what is timed is the loop itself:
prompt rendering, action parsing, ledger updates, observation formatting.  The figure
is agent turns (model calls) per second on one core; the target is >= 2,000, i.e.
overhead negligible next to any real model.

    python benchmarks/perf/bench_agent.py [--trajectories N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from bcas.agent import run_bcas
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.llm.base import ChatModel, ChatRequest, ChatResult
from bcas.testing.scripted import FakeRetriever

TARGET_TURNS_PER_S = 2000

PASSAGES = [
    (f"d{i}", f"Title {i}", f"Passage {i} about topic {i % 7} with words alpha beta gamma delta {i}. " * 3)
    for i in range(50)
]
ITEM = Item(
    "q", "Which topic links passage 3 and passage 10?", ("topic 3",), tuple(Document(d, t, x) for d, t, x in PASSAGES)
)


class InstantModel(ChatModel):
    """Answers at once with prepared replies chosen by the kind of request."""

    model_id = "instant"
    supports_json_schema = True

    def __init__(self, action_format: str) -> None:
        self.action_format = action_format
        self.turn = 0
        if action_format == "json":
            self.searches = [
                json.dumps({"thought": "need more", "action": "search_database", "query": f"topic {i} alpha"})
                for i in range(64)
            ]
            self.ready = json.dumps({"thought": "enough", "action": "ready_to_answer", "query": ""})
        else:
            self.searches = [f"Thought: need more\nAction: search_database\nQuery: topic {i} alpha" for i in range(64)]
            self.ready = "Thought: enough\nAction: ready_to_answer\nQuery:"
        self.answer = json.dumps({"answer": "topic 3"})

    async def chat(self, request: ChatRequest) -> ChatResult:
        last = request.messages[-1]["content"]
        if "Answer the question now" in last or "answer the question now" in last:
            text = self.answer
        elif "Actions you can take now" in last:
            self.turn += 1
            text = self.ready if self.turn % 4 == 0 else self.searches[self.turn % 64]
        else:  # plan or reflection
            text = "1. Search. 2. Answer."
        return ChatResult(text=text, prompt_tokens=500, completion_tokens=20, finish_reason="stop", latency_s=0.0)


async def measure(config: RunConfig, trajectories: int) -> tuple[float, int]:
    retriever = FakeRetriever(PASSAGES, k=config.retrieval.k)
    model = InstantModel(config.agent.action_format)
    calls = 0
    start = time.perf_counter()
    for _ in range(trajectories):
        traj = await run_bcas(ITEM, model, retriever, config)
        calls += traj.llm_calls
    return time.perf_counter() - start, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    budget = Budget(max_searches=None, max_total_tokens=100_000)
    variants = {
        "json, 3 searches + ready": AgentConfig(action_format="json"),
        "text, 3 searches + ready": AgentConfig(action_format="text"),
        "json + planning + reflection": AgentConfig(
            action_format="json", planning=True, reflection=True, reflect_every=2
        ),
    }
    print(f"BCAS harness overhead, instant model, one core ({args.trajectories} trajectories x {args.rounds} rounds)")
    for name, agent in variants.items():
        config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=5), agent=agent)
        rates = []
        calls = 0
        for _ in range(args.rounds):
            elapsed, calls = asyncio.run(measure(config, args.trajectories))
            rates.append(calls / elapsed)
        best = max(rates)
        per_traj = calls / args.trajectories
        print(
            f"  {name:<30} {best:8.0f} turns/s (median {statistics.median(rates):.0f}), "
            f"{1e6 / best:6.1f} us/turn, {per_traj:.0f} turns/trajectory  "
            f"[target >= {TARGET_TURNS_PER_S}: {'met' if best >= TARGET_TURNS_PER_S else 'NOT met'}]"
        )


if __name__ == "__main__":
    main()
