"""Action validity of the JSON action designs on the embedded model (prints figures, asserts nothing).

Runs the BCAS loop on HotpotQA items with the embedded default (SmolLM2-135M-Instruct,
llama.cpp in its engine process) under three designs of the constrained action, and
prints per design and configuration: valid action turns / action turns, stop
reasons, engine crashes, completion tokens and seconds per item.

* ``budget_sized``: the earlier design, kept here only to be measured: the thought's
  ``maxLength`` grew with the turn's token allowance (room at two characters per
  token, less the query's share), so paper budgets gave grammars of thousands of
  rules.
* ``fixed``: the shipped design (:func:`bcas.agent.protocol.field_caps`): thought
  and query capped by constants, drawn from a few levels.
* ``unbounded_thought``: the thought first with no ``maxLength`` (a constant grammar);
  a reply cut by the allowance before its action is an invalid turn.
* ``action_first``: the action and query first, then an unbounded thought (no
  ``maxLength``, so a constant grammar; a reply cut by the allowance still holds
  its action).

    python benchmarks/perf/bench_action_validity.py [--items 20] [--designs fixed,budget_sized]
        [--configs small,t500,t16k,repro] [--loops paper,guarded] [--out FILE.json]

``small`` is the smoke grid's BM25 s3 configuration (2K tokens, 160 per call),
``t500`` and ``t16k`` the context-scaling grid's 500- and 16,000-token configurations
(BCAS §3.10, unlimited searches; BM25 with two passages a search here, so no embedder
loads and prompts stay short on a 2-core CPU), ``repro`` ``Budget(max_searches=1,
max_total_tokens=1500)`` with no per-call cap.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bcas.agent import protocol, run_bcas
from bcas.config import GUARDED_LOOP, Budget, RetrievalConfig, RunConfig
from bcas.data import load_dataset
from bcas.grids import CONTEXT_SCALING, SMOKE
from bcas.llm.embedded import create
from bcas.retrieval import build_retriever

SHIPPED_ACTION_SCHEMA = protocol.action_schema


def budget_sized_schema(tools: Sequence[str], max_tokens: int | None = None, *_: Any) -> dict[str, Any]:
    """The earlier design: caps sized from the turn's allowance (the thought uncapped without one)."""
    schema = SHIPPED_ACTION_SCHEMA(tools, max_tokens)
    props = schema["properties"]
    if max_tokens is None:
        props["thought"] = {"type": "string"}
        props["query"]["maxLength"] = 500
        return schema
    room = max(0, max_tokens - protocol.JSON_OVERHEAD_TOKENS) * protocol.CHARS_PER_TOKEN
    query = min(500, max(8, int(room * protocol.QUERY_SHARE)))
    props["thought"]["maxLength"] = max(8, room - query)
    props["query"]["maxLength"] = query
    return schema


def unbounded_thought_schema(tools: Sequence[str], max_tokens: int | None = None, *_: Any) -> dict[str, Any]:
    schema = SHIPPED_ACTION_SCHEMA(tools, max_tokens)
    schema["properties"]["thought"] = {"type": "string"}
    return schema


def action_first_schema(tools: Sequence[str], max_tokens: int | None = None, *_: Any) -> dict[str, Any]:
    schema = SHIPPED_ACTION_SCHEMA(tools, max_tokens)
    props = schema["properties"]
    schema["properties"] = {"action": props["action"], "query": props["query"], "thought": {"type": "string"}}
    schema["required"] = ["action", "query", "thought"]
    return schema


DESIGNS = {
    "fixed": SHIPPED_ACTION_SCHEMA,
    "budget_sized": budget_sized_schema,
    "unbounded_thought": unbounded_thought_schema,
    "action_first": action_first_schema,
}


def configs() -> dict[str, RunConfig]:
    smoke = next(e.config for e in SMOKE.entries if e.kind == "bcas" and e.config.label == "bm25/s3/t2k")
    t500 = next(e.config for e in CONTEXT_SCALING.entries if e.config.label.startswith("hs/sinf/t500"))
    t16k = next(e.config for e in CONTEXT_SCALING.entries if e.config.label == "hs/sinf/t16k")
    bm25 = RetrievalConfig(mode="bm25", k=2)  # two passages a search: short prompts on a 2-core CPU
    return {
        "small": smoke,
        "t500": replace(t500, retrieval=bm25),
        "t16k": replace(t16k, retrieval=bm25),
        "repro": RunConfig(budget=Budget(max_searches=1, max_total_tokens=1500), retrieval=bm25),
    }


LOOPS = ("paper", "guarded")


def with_loop(config: RunConfig, loop_rules: str) -> RunConfig:
    """``paper``: the config as the grid has it (the paper's loop); ``guarded``: the former rules."""
    if loop_rules == "paper":
        return config
    return replace(config, agent=replace(config.agent, **GUARDED_LOOP))


async def run_item(
    design: str, config: RunConfig, item: Any, retriever: Any, model: Any, loop_rules: str = "paper"
) -> dict[str, Any]:
    """One item under one design and loop: its action turns, invalid turns, stop reason, tokens, seconds."""
    import bcas.agent.loop as loop

    config = with_loop(config, loop_rules)

    loop.action_schema = DESIGNS[design]  # the loop's reference to the action schema
    crashes = model.crashes
    started = time.perf_counter()
    try:
        traj = await run_bcas(item, model, retriever, config)
    finally:
        loop.action_schema = SHIPPED_ACTION_SCHEMA
    return {
        "design": design,
        "loop": loop_rules,
        "item": item.id,
        "action_turns": traj.action_turns,
        "invalid_turns": traj.invalid_turns,
        "stop_reason": traj.stop_reason,
        "engine_crashes": model.crashes - crashes,
        "tokens_out": traj.tokens_out,
        "seconds": round(time.perf_counter() - started, 1),
        "error": (traj.error or "")[:160] or None,
    }


def summarise(name: str, label: str, design: str, loop_rules: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    turns = sum(r["action_turns"] for r in rows)
    invalid = sum(r["invalid_turns"] for r in rows)
    return {
        "name": name,
        "config": label,
        "design": design,
        "loop": loop_rules,
        "items": len(rows),
        "action_turns": turns,
        "valid_turns": turns - invalid,
        "valid_share": None if not turns else round((turns - invalid) / turns, 3),
        "stop_reasons": dict(Counter(r["stop_reason"] for r in rows)),
        "engine_crashes": sum(r["engine_crashes"] for r in rows),
        "mean_tokens_out": round(statistics.mean(r["tokens_out"] for r in rows), 1),
        "mean_seconds": round(statistics.mean(r["seconds"] for r in rows), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--designs", default="fixed,budget_sized")
    parser.add_argument("--configs", default="small,t500,repro")
    parser.add_argument(
        "--loops", default="paper", help="paper (the grids' default loop), guarded (bcas.config.GUARDED_LOOP), or both"
    )
    parser.add_argument("--n-threads", type=int, default=None)
    parser.add_argument("--start", type=int, default=0, help="skip the first N items (to continue a run cut short)")
    parser.add_argument("--end", type=int, default=None, help="stop before item N (the sample is still of --items)")
    parser.add_argument("--out", default=None, help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    dataset = load_dataset("hotpotqa", limit=args.items, seed=0)
    documents = [d for item in dataset.items for d in item.documents]
    chosen = configs()
    model = create(n_threads=args.n_threads)
    rows: list[dict[str, Any]] = []
    designs = args.designs.split(",")
    loops = args.loops.split(",")
    if unknown := [name for name in loops if name not in LOOPS]:
        parser.error(f"--loops: unknown {unknown}; known: {', '.join(LOOPS)}")
    variants = [(d, lr) for d in designs for lr in loops]
    try:
        for name in args.configs.split(","):
            config = chosen[name]
            retriever = build_retriever(documents, config.retrieval)
            per_variant: dict[tuple[str, str], list[dict[str, Any]]] = {v: [] for v in variants}
            # variants interleaved item by item, so a run cut short still compares them on the same items
            for item in dataset.items[args.start : args.end]:
                for design, loop_rules in variants:
                    row = asyncio.run(run_item(design, config, item, retriever, model, loop_rules))
                    per_variant[(design, loop_rules)].append(row)
                    print(json.dumps({"config": name, **row}), flush=True)
            rows.extend(summarise(name, config.label, d, lr, per_variant[(d, lr)]) for d, lr in variants)
    finally:
        model.close()
    print(
        f"\n{'config':<8} {'design':<13} {'loop':<8} {'valid turns':>12} {'crashes':>8} {'tok/item':>9} {'s/item':>7}  stops"
    )
    for r in rows:
        valid = f"{r['valid_turns']}/{r['action_turns']}"
        print(
            f"{r['name']:<8} {r['design']:<13} {r['loop']:<8} {valid:>12} {r['engine_crashes']:>8} {r['mean_tokens_out']:>9} "
            f"{r['mean_seconds']:>7}  {r['stop_reasons']}"
        )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
