"""Cost of each MADARA treatment from our own ledger (prints numbers, asserts nothing).

For every method (NF, 3-Agent, CoT, SDA, RRF, ATF, PDE, PDE-Random) on the first
``--items`` items of a dataset with the embedded SmolLM2-135M: LLM calls
(assessment / generation), tokens in/out and wall time per item, plus EM.  The
call counts are the figures MADARA Appendix K compares ("about 19 calls for
3-Agent vs 1 for NF vs d for PDE-Random"); ours follow 3 agents x m documents.
Runs without the generation cache, so every call is a real model call.

    python benchmarks/perf/bench_madara.py --dataset conflictqa --items 1
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bcas.assess import run_madara
from bcas.config import AssessConfig, RunConfig
from bcas.data import load_dataset
from bcas.llm import load_model

METHODS = ("nf", "3-agent", "cot", "sda", "rrf", "atf", "pde", "pde-random")


async def main(dataset: str, n_items: int, methods: tuple[str, ...]) -> None:
    model = load_model("embedded", cache=False)
    ds = load_dataset(dataset, limit=n_items)
    print(f"{dataset}: {len(ds.items)} items, documents per item {[len(i.documents) for i in ds.items]}")
    print(f"{'method':<12}{'EM':>6}{'calls':>8}{'assess':>8}{'gen':>6}{'tok in':>9}{'tok out':>9}{'s/item':>9}")
    try:
        for method in methods:
            config = RunConfig(assess=AssessConfig(method=method, doc_source="item"))
            em = calls = assess = gen = t_in = t_out = 0
            start = time.perf_counter()
            for item in ds.items:
                rec = await run_madara(item, model, None, config, dataset=ds)
                em += rec.correct_em
                calls += rec.llm_calls
                assess += rec.extra["assessment_calls"]
                gen += rec.extra["generation_calls"]
                t_in += rec.tokens_in
                t_out += rec.tokens_out
            n = len(ds.items)
            wall = (time.perf_counter() - start) / n
            print(
                f"{method:<12}{em / n:>6.2f}{calls / n:>8.1f}{assess / n:>8.1f}{gen / n:>6.1f}"
                f"{t_in / n:>9.0f}{t_out / n:>9.0f}{wall:>9.1f}"
            )
    finally:
        await model.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="conflictqa")
    parser.add_argument("--items", type=int, default=1)
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args()
    asyncio.run(main(args.dataset, args.items, tuple(args.methods.split(","))))
