"""Latency and throughput of a real llama.cpp server at concurrency 1, 2 and 4 (prints numbers, asserts nothing).

BCAS §6.1 asks for "queueing and throughput behavior under production concurrency
constraints".  This script serves the shipped GGUF (SmolLM2-135M-Instruct) on loopback
and sends ``--items`` items at once through the real executor
(:func:`bcas.records.executor.run_items`) at each level of ``--levels``; each item is
one chat call through the real ``openai`` backend (streamed with ``--stream``, for the
time to first token).  Per level it prints items per minute, p50 and p95 time per item,
the mean wait for a concurrency slot, the mean model-call time and what the server
reported (llama.cpp's ``timings``: prompt and decode), with the load average beside.

The server: llama.cpp's own ``llama-server`` when it is on PATH (or ``--server-binary``),
started with ``--parallel 4``: four slots, batched together; otherwise
``llama_cpp.server`` (llama-cpp-python, what ``bcas serve`` runs), which has no
``--parallel``: it answers one request at a time, so its curve shows the queue in front
of one slot.  The line ``server:`` says which ran.

    python benchmarks/perf/bench_latency.py [--items 16] [--levels 1,2,4] [--max-tokens 32] [--stream]
        [--threads N] [--server-binary PATH] [--write-docs]

``--write-docs`` replaces the section between ``<!-- latency-curve:begin -->`` and
``<!-- latency-curve:end -->`` of docs/measured.md with the table (on a quiet machine);
a ``llama-server --parallel`` run writes its own section, ``latency-curve-parallel``, so
the one-slot and the many-slot curves stand side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from bcas.llm.base import ChatRequest
from bcas.llm.embedded import default_gguf_path
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.metrics.latency import latency_columns
from bcas.processes import free_port, stop_process
from bcas.records.build import Answer, AnswerIdentity, Grades, build_record
from bcas.records.executor import run_items
from bcas.records.schema import Record
from bcas.testing.llama import LlamaCppServer

REPO = Path(__file__).resolve().parents[2]
MEASURED = REPO / "docs" / "measured.md"


def markers(parallel: bool) -> tuple[str, str]:
    """The begin and end comments of the docs section a run writes (one per kind of server)."""
    name = "latency-curve-parallel" if parallel else "latency-curve"
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


ALIAS = "smollm2"
QUESTIONS = (
    "Which river flows through Paris?",
    "Who wrote the novel Emma?",
    "What is the capital of Australia?",
    "Which planet is known as the red planet?",
    "In which year did the Berlin Wall fall?",
    "What gas do plants take in from the air?",
    "Who painted the Mona Lisa?",
    "What is the largest ocean on Earth?",
)


def short_commit() -> str:
    """The checkout's commit, short, for a figure written into the docs ('unknown' outside git)."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def write_section(begin: str, end: str, body: str, heading: str) -> None:
    """Replace the text between the comments ``begin`` and ``end`` of docs/measured.md with ``body``
    (or append it under a new ``heading`` the first time)."""
    section = f"{begin}\n{body}\n{end}"
    text = MEASURED.read_text(encoding="utf-8")
    if begin in text and end in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + section + "\n"
    MEASURED.write_text(text, encoding="utf-8")
    print(f"written: {MEASURED}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class NativeServer:
    """llama.cpp's ``llama-server`` with ``--parallel`` slots on a free loopback port."""

    def __init__(self, binary: str, slots: int, threads: int, n_ctx: int) -> None:
        self.port = free_port()
        self.command = [
            binary, "-m", str(default_gguf_path()), "--host", "127.0.0.1", "--port", str(self.port),
            "--parallel", str(slots), "-c", str(n_ctx * slots), "-t", str(threads), "--alias", ALIAS,
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> NativeServer:
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited with code {self.process.returncode}: {' '.join(self.command)}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("llama-server did not become healthy within 180 s")

    def __exit__(self, *exc: object) -> None:
        stop_process(self.process)


def _identity(i: int) -> AnswerIdentity:
    return AnswerIdentity(
        run_id="bench", config_id="one-call", config={}, dataset="questions", dataset_hash="-", item_id=f"q{i}",
        question=QUESTIONS[i % len(QUESTIONS)], answers=[""], model_fingerprint=ALIAS, prompt_hash="-",
    )  # fmt: skip


async def _level(base_url: str, items: int, level: int, max_tokens: int, stream: bool) -> list[Record]:
    model = OpenAICompatModel(ALIAS, base_url=base_url, concurrency=64, timeout=600.0, stream=stream)

    async def produce(i: int, epoch: int) -> Record:
        question = f"{QUESTIONS[i % len(QUESTIONS)]} (question {i})"  # distinct prompts: no shared prefix cache
        request = ChatRequest([{"role": "user", "content": question}], max_tokens=max_tokens, seed=i)
        result = await model.chat(request)
        answer = Answer(prediction=result.text, method="one-call", tokens_in=result.prompt_tokens,
                        tokens_out=result.completion_tokens, llm_calls=1, latency_s=result.latency_s)  # fmt: skip
        return build_record(answer, _identity(i), Grades(correct_em=False, f1=0.0))

    try:
        warm = ChatRequest([{"role": "user", "content": "Say hello."}], max_tokens=4, seed=-1)
        await model.chat(warm)  # the client's start-up and the server's first request are no part of a level
        return await run_items([(i, 0) for i in range(items)], produce, concurrency=level)
    finally:
        await model.aclose()


def _fmt(v: float | None, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--levels", default="1,2,4")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--stream", action="store_true", help="stream the replies (time to first token)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--server-binary", default=shutil.which("llama-server"))
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    slots = max(levels)
    load_before = _load()
    if args.server_binary:
        server: Any = NativeServer(args.server_binary, slots, args.threads, 2048)
        what = f"llama.cpp llama-server --parallel {slots} ({args.server_binary}), {args.threads} threads"
    else:
        server = LlamaCppServer(n_ctx=2048, n_threads=args.threads, alias=ALIAS)
        what = f"llama_cpp.server (llama-cpp-python; no --parallel: 1 slot), {args.threads} threads"
    print(f"server: {what}; model {default_gguf_path().name}")
    print(f"machine: {len(os.sched_getaffinity(0))} usable CPUs, load average before {load_before}")
    rows = []
    with server:
        for level in levels:
            records = asyncio.run(_level(server.base_url, args.items, level, args.max_tokens, args.stream))
            cols = latency_columns([r.to_dict() for r in records])
            timings = [r.timing for r in records]
            decode = [t["decode_s"] for t in timings if "decode_s" in t]
            prompt = [t["prompt_s"] for t in timings if "prompt_s" in t]
            tokens = sum(r.tokens_out for r in records)
            row = {
                "concurrency": level, "items": len(records), "items_per_min": cols.items_per_min,
                "p50_s": cols.latency_p50, "p95_s": cols.latency_p95, "wait_s": cols.mean_wait_s,
                "call_s": cols.mean_model_call_s, "ttft_s": cols.mean_ttft_s,
                "prompt_s": sum(prompt) / len(prompt) if prompt else None,
                "decode_s": sum(decode) / len(decode) if decode else None,
                "tokens_out": tokens, "load": _load(),
            }  # fmt: skip
            rows.append(row)
            print(
                f"concurrency {level}: {len(records)} items, {_fmt(cols.items_per_min, 1)} items/min, "
                f"p50 {_fmt(cols.latency_p50)} s, p95 {_fmt(cols.latency_p95)} s, wait {_fmt(cols.mean_wait_s)} s, "
                f"call {_fmt(cols.mean_model_call_s)} s, TTFT {_fmt(cols.mean_ttft_s)} s, "
                f"server prompt {_fmt(row['prompt_s'])} s / decode {_fmt(row['decode_s'])} s, "
                f"{tokens} tokens out; load average {row['load']}"
            )
            figure = {"name": f"items/min at concurrency {level}", "value": cols.items_per_min, "unit": "items/min"}
            print("FIGURE " + json.dumps(figure))
    table = [
        "| concurrency | items | items/min | p50 s | p95 s | mean wait s | s / call | TTFT s | server prompt s | server decode s | load average |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]  # fmt: skip
    for r in rows:
        table.append(
            f"| {r['concurrency']} | {r['items']} | {_fmt(r['items_per_min'], 1)} | {_fmt(r['p50_s'])} | "
            f"{_fmt(r['p95_s'])} | {_fmt(r['wait_s'])} | {_fmt(r['call_s'])} | {_fmt(r['ttft_s'])} | "
            f"{_fmt(r['prompt_s'])} | {_fmt(r['decode_s'])} | {r['load']} |"
        )
    print("\n".join(table))
    if args.write_docs:
        today = datetime.date.today().isoformat()
        head = (
            f"`python benchmarks/perf/bench_latency.py --items {args.items} --levels {args.levels} "
            f"--max-tokens {args.max_tokens}{' --stream' if args.stream else ''}`, {today}; server: {what}; "
            f"{len(os.sched_getaffinity(0))} cores, load average before {load_before}:"
        )
        begin, end = markers(bool(args.server_binary))
        write_section(begin, end, f"{head}\n\n" + "\n".join(table), "Latency and throughput under load")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
