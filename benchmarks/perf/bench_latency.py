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

``--known`` measures the harness instead of a model: a
:class:`~bcas.testing.slotted.SlottedServer` that holds every call exactly ``--service``
seconds (0.2) with a free slot for every request (slots = the highest level), run in a
child process so the client's CPU never stalls it, and at concurrency 1, 4 and 16 the
same path (``run_items``, the ``openai`` backend, and a record store in a temporary
folder, so the record writes count too).  Per level it prints the p50/p95 of each call's
wall time and of each item's service time (slot taken to record made) against the
service time, items per second against the ideal ``concurrency / service``, what the
server saw (most requests at once) and the load average beside.  Whatever exceeds the
service time is the client's own (``docs/measured.md``, "Harness tax against a known
service time").

    python benchmarks/perf/bench_latency.py --known [--items N] [--levels 1,4,16] [--service 0.2]
        [--profile PATH] [--write-docs]

(``--profile PATH``: cProfile's statistics of each level's client side in CPU time, written
to ``PATH.c<level>``, the top functions printed.)

``--write-docs`` replaces the section between ``<!-- latency-curve:begin -->`` and
``<!-- latency-curve:end -->`` of docs/measured.md with the table (on a quiet machine);
a ``llama-server --parallel`` run writes its own section, ``latency-curve-parallel``, so
the one-slot and the many-slot curves stand side by side; ``--known`` writes
``harness-tax``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bcas.llm.base import ChatRequest
from bcas.llm.embedded import default_gguf_path
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.metrics.latency import latency_columns, percentile
from bcas.processes import free_port, stop_process
from bcas.records.build import Answer, AnswerIdentity, Grades, build_record
from bcas.records.executor import run_items
from bcas.records.schema import Record
from bcas.records.store import ResultStore
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


# -- --known: the harness against a server whose service time is known ---------------------

TAX = ("<!-- harness-tax:begin -->", "<!-- harness-tax:end -->")
# The child process that serves: a SlottedServer on a free port; prints its base URL, then
# answers each "stats" line on stdin with what it saw since the last one (JSON); EOF stops it.
SERVER_CHILD = """
import json, sys
from bcas.testing.slotted import SlottedServer
with SlottedServer(int(sys.argv[1]), float(sys.argv[2])) as server:
    print(server.base_url, flush=True)
    for line in sys.stdin:
        waits = list(server.waits)
        print(json.dumps({"requests": server.requests, "max_in_flight": server.max_in_flight,
                          "queued_s": max(waits, default=0.0)}), flush=True)
        server.reset()
        server.waits.clear()
"""


class ChildSlottedServer:
    """A :class:`~bcas.testing.slotted.SlottedServer` in a child process (its own interpreter and GIL)."""

    def __init__(self, slots: int, service_s: float) -> None:
        self.command = [sys.executable, "-c", SERVER_CHILD, str(slots), str(service_s)]
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> ChildSlottedServer:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            stop_process(self.process)
            raise RuntimeError(f"the SlottedServer child did not start: {' '.join(self.command[:2])}")
        return self

    def stats(self) -> dict[str, Any]:
        """What the server saw since the last call: requests, the most at once, the longest queueing."""
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("stats\n")
        self.process.stdin.flush()
        return dict(json.loads(self.process.stdout.readline()))

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                stop_process(self.process)


async def _known_level(
    base_url: str, items: int, level: int, folder: Path, profile: Path | None = None
) -> tuple[list[Record], float, float]:
    """One level: ``items`` one-call items through ``run_items`` into a store; the records, the wall time
    and the client's CPU time (``profile``: cProfile's statistics of the level written there)."""
    model = OpenAICompatModel(ALIAS, base_url=base_url, concurrency=64, timeout=60.0)
    store = ResultStore(folder)

    async def produce(i: int, epoch: int) -> Record:
        request = ChatRequest([{"role": "user", "content": f"{QUESTIONS[i % len(QUESTIONS)]} (question {i})"}],
                              max_tokens=16, seed=i)  # fmt: skip
        result = await model.chat(request)
        answer = Answer(prediction=result.text, method="one-call", tokens_in=result.prompt_tokens,
                        tokens_out=result.completion_tokens, llm_calls=1, latency_s=result.latency_s)  # fmt: skip
        return build_record(answer, _identity(i), Grades(correct_em=False, f1=0.0))

    try:
        # the client's start-up (its connections included) is no part of a level
        await asyncio.gather(*(model.chat(ChatRequest([{"role": "user", "content": "hi"}], max_tokens=2))
                               for _ in range(level)))  # fmt: skip
        # CPU time, not wall time: the profile says what the client computes, whatever the machine's load
        profiler = cProfile.Profile(time.process_time) if profile is not None else None
        cpu, started = time.process_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        records = await run_items([(i, 0) for i in range(items)], produce, store, concurrency=level)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(profile))
        return records, time.perf_counter() - started, time.process_time() - cpu
    finally:
        await model.aclose()


def known_rows(args: argparse.Namespace, levels: list[int]) -> list[dict[str, Any]]:
    """Run every level against one child SlottedServer; one row of figures per level."""
    service = args.service
    rows = []
    with ChildSlottedServer(max(levels), service) as server, tempfile.TemporaryDirectory(prefix="bcas-tax-") as tmp:
        for level in levels:
            items = args.items or max(16, 8 * level)
            server.stats()
            profile = Path(f"{args.profile}.c{level}") if args.profile else None
            folder = Path(tmp) / f"c{level}"
            records, wall, cpu = asyncio.run(_known_level(server.base_url, items, level, folder, profile))
            if profile is not None:
                pstats.Stats(str(profile)).sort_stats("tottime").print_stats(12)
            seen = server.stats()
            calls = [float(c["wall_s"]) for r in records for c in r.timing["calls"]]
            served = [float(r.timing["service_s"]) for r in records]
            ideal = level / service
            row = {
                "concurrency": level, "items": len(records),
                "call_p50": percentile(calls, 50), "call_p95": percentile(calls, 95),
                "item_p50": percentile(served, 50), "item_p95": percentile(served, 95),
                "per_s": len(records) / wall, "ideal_per_s": ideal, "cpu_ms": 1000.0 * cpu / max(1, len(records)),
                "seen": seen["max_in_flight"], "queued_s": seen["queued_s"], "load": _load(),
            }  # fmt: skip
            rows.append(row)
            print(
                f"concurrency {level}: {len(records)} items; per call p50 {row['call_p50']:.4f} s "
                f"({row['call_p50'] / service - 1:+.1%} of {service} s), p95 {row['call_p95']:.4f} s; per item p50 "
                f"{row['item_p50']:.4f} s ({row['item_p50'] / service - 1:+.1%}), p95 {row['item_p95']:.4f} s; "
                f"{row['per_s']:.2f} items/s against {ideal:.2f} ideal ({row['per_s'] / ideal:.1%}); "
                f"client CPU {row['cpu_ms']:.2f} ms an item; server saw at most {seen['max_in_flight']} at once, "
                f"queued {seen['queued_s']:.4f} s at most; load average {row['load']}"
            )
            value = round(row["call_p50"] / service - 1, 4)
            print("FIGURE " + json.dumps({"name": f"p50 per call over the service time at concurrency {level}",
                                          "value": value, "unit": "fraction", "target": "<= 0.05",
                                          "met": value <= 0.05}))  # fmt: skip
    return rows


def known_main(args: argparse.Namespace) -> int:
    """``--known``: the harness tax against a SlottedServer of known service time (module docstring)."""
    levels = [int(x) for x in (args.levels or "1,4,16").split(",") if x.strip()]
    load_before = _load()
    print(f"server: SlottedServer in a child process, {max(levels)} slots of {args.service} s each (free slots)")
    print(f"machine: {len(os.sched_getaffinity(0))} usable CPUs, load average before {load_before}")
    rows = known_rows(args, levels)
    s = args.service
    table = [
        f"| concurrency | items | p50 s / call | p95 s / call | p50 s / item | p95 s / item | p50 over {s} s "
        "| items/s | of ideal | client CPU ms / item | load average |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        table.append(
            f"| {r['concurrency']} | {r['items']} | {r['call_p50']:.4f} | {r['call_p95']:.4f} | {r['item_p50']:.4f} | "
            f"{r['item_p95']:.4f} | {r['call_p50'] / s - 1:+.1%} | {r['per_s']:.2f} | {r['per_s'] / r['ideal_per_s']:.1%} "
            f"| {r['cpu_ms']:.2f} | {r['load']} |"
        )
    print("\n".join(table))
    if args.write_docs:
        items = f" --items {args.items}" if args.items else ""
        head = (
            f"`python benchmarks/perf/bench_latency.py --known --levels {','.join(map(str, levels))} --service {s}"
            f"{items}` at {short_commit()}, {datetime.date.today().isoformat()}; SlottedServer in a child process, "
            f"{max(levels)} slots; {len(os.sched_getaffinity(0))} cores, load average before {load_before}:"
        )
        write_section(*TAX, f"{head}\n\n" + "\n".join(table), "Harness tax against a known service time")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=None, help="items a level (16; --known: 8 a slot, 16 at least)")
    parser.add_argument("--levels", default=None, help="concurrency levels (1,2,4; --known: 1,4,16)")
    parser.add_argument("--known", action="store_true", help="against a SlottedServer of known service time")
    parser.add_argument("--profile", help="--known: write each level's cProfile statistics to PROFILE.c<level>")
    parser.add_argument("--service", type=float, default=0.2, help="--known: the server's service time (s)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--stream", action="store_true", help="stream the replies (time to first token)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--server-binary", default=shutil.which("llama-server"))
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    if args.known:
        return known_main(args)
    args.items = args.items or 16
    args.levels = args.levels or "1,2,4"
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
