"""Harness efficiency on the embedded model: raw llama.cpp time over harness wall time (prints, asserts nothing).

Runs a grid on the embedded CPU default as a user would (``python -m pytest benchmarks
--bcas-grid smoke -m hotpotqa --bcas-limit 3`` by default) in a child process, with a
fresh, empty ``BCAS_CACHE_DIR`` so that every answer is generated.  The indexes the
grid needs are built first by the same grid on ``mock:gold`` (same cache folder, not
timed; the generation cache keys answers by model, so the embedded run reuses none).

Per case, the **harness wall time** is the case's duration as pytest reports it in its
JUnit XML (setup, call and teardown: the first case's setup includes loading the
engine).  The **tokens** are summed from the records the run wrote: every step's
``tokens_in`` (prompt) and ``tokens_out`` (completion), one step per model call, plus
the judge's tokens where a judge ran; steps answered from the generation cache are
counted apart and cost nothing.

Then, in the same run and after the child has exited (one engine at a time), raw
llama.cpp speeds on the same GGUF with the same ``n_ctx`` and thread count as the
engine (``BCAS_THREADS`` is set for the child to the count measured here):

- prompt processing tokens/s: prompts of the run's mean prompt length, each evaluated
  from an empty KV cache (no prefix reuse);
- generation tokens/s: free greedy generation after such a prompt (its prefix
  evaluated beforehand, so only generation is timed).

**raw** = prompt tokens / prompt speed + completion tokens / generation speed, and
**efficiency** = raw / harness wall time (target >= 0.7).  Raw evaluates every prompt from
an empty KV cache; the engine reuses the whole ``n_batch``-aligned prompt batches a request
shares with the one before it (bcas.llm.engine_process.aligned_llama_class: no logit changes),
so an efficiency above 1 is that reuse (``BCAS_PREFIX_REUSE=0`` turns it off).

A child run that fails, or a case without records, prints "NOT measured" and exits 1.

    python benchmarks/perf/bench_harness_efficiency.py [--grid smoke] [--markers hotpotqa] [--limit 3] [--write-docs]
        [--threads N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TARGET = 0.7


def figure(name: str, value: float | str, unit: str, target: str = "", met: bool | None = None) -> None:
    """One machine-readable line for benchmarks/perf/run_all.py's table."""
    print("FIGURE " + json.dumps({"name": name, "value": value, "unit": unit, "target": target, "met": met}))


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


@dataclass
class CaseTokens:
    """Tokens of one case's model calls, from its records."""

    case_id: str
    wall_s: float
    records: int = 0
    calls: int = 0
    prompt: int = 0
    completion: int = 0
    cached_calls: int = 0
    cached_prompt: int = 0
    cached_completion: int = 0
    notes: list[str] = field(default_factory=list)


def record_tokens(record: dict[str, Any]) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """(calls, prompt, completion) triples of a record's generated and cached model calls.

    Each step is one model call (``calls`` counts retries merged into it); a record
    without steps (a method that keeps no per-call ledger) counts as its totals.
    """
    fresh: list[tuple[int, int, int]] = []
    cached: list[tuple[int, int, int]] = []
    steps = record.get("steps") or []
    for step in steps:
        entry = (int(step.get("calls", 1)), int(step.get("tokens_in", 0)), int(step.get("tokens_out", 0)))
        (cached if step.get("cached") else fresh).append(entry)
    if not steps:
        fresh.append((int(record.get("llm_calls", 0)), int(record["tokens_in"]), int(record["tokens_out"])))
    judge = record.get("judge") or {}
    if judge.get("tokens_in") or judge.get("tokens_out"):
        fresh.append((int(judge.get("llm_calls", 0)), int(judge.get("tokens_in", 0)), int(judge.get("tokens_out", 0))))
    return fresh, cached


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every record of a run folder (``records.jsonl`` and per-worker files)."""
    out = []
    for path in sorted(run_dir.glob("records*.jsonl")):
        out.extend(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return out


def junit_cases(path: Path) -> list[tuple[str, float, str]]:
    """(case id, seconds, outcome) of each grid case in a JUnit XML report."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[" not in name:
            continue
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = tag
        cases.append((name[name.index("[") + 1 : name.rindex("]")], float(case.get("time", 0.0)), outcome))
    return cases


def tokens_per_case(
    grid: str, cases: Iterable[tuple[str, float, str]], records: list[dict[str, Any]]
) -> list[CaseTokens]:
    """Each case's tokens: its records are those of its dataset and configuration (case id ``MODEL-DATASET-LABEL``)."""
    from bcas.data import dataset_label
    from bcas.grids import GRIDS

    entries = GRIDS[grid].entries
    out = []
    for case_id, wall, _ in cases:
        found = CaseTokens(case_id, wall)
        labels = [e for e in entries if case_id.endswith("-" + e.label)]
        entry = max(labels, key=lambda e: len(e.label), default=None)
        if entry is not None:
            mine = [
                r
                for r in records
                if r["config_id"] == entry.config.config_id
                and case_id.endswith(f"-{dataset_label(r['dataset'])}-{entry.label}")
            ]
            for record in mine:
                fresh, cached = record_tokens(record)
                found.records += 1
                found.calls += sum(c for c, _, _ in fresh)
                found.prompt += sum(p for _, p, _ in fresh)
                found.completion += sum(t for _, _, t in fresh)
                found.cached_calls += sum(c for c, _, _ in cached)
                found.cached_prompt += sum(p for _, p, _ in cached)
                found.cached_completion += sum(t for _, _, t in cached)
        out.append(found)
    return out


def run_child(label: str, args: list[str], env: dict[str, str], folder: Path) -> tuple[float, int]:
    """Wall seconds and exit code of one ``python -m pytest`` child (output in FOLDER/LABEL.log)."""
    log = folder / f"{label}.log"
    with open(log, "w") as out:
        started = time.perf_counter()
        rc = subprocess.run(
            [sys.executable, "-m", "pytest", *args], cwd=REPO, env=env, stdout=out, stderr=out
        ).returncode
    wall = time.perf_counter() - started
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    print(f"  {label:<8} {wall:8.1f} s   rc {rc}   {tail[0][:100]}")
    return wall, rc


def sample_texts(records: list[dict[str, Any]], n: int) -> list[str]:
    """N distinct English texts made of the run's questions and model outputs (for raw speeds)."""
    pieces = [str(r.get("question", "")) for r in records]
    pieces += [str(s.get("output", "")) for r in records for s in r.get("steps") or []]
    pieces = [p for p in pieces if p.strip()] or ["Which river flows through the city where Mozart was born?"]
    body = " ".join(pieces)
    body = " ".join([body] * (1 + 40_000 // len(body)))  # longer than any prompt of the run
    return [f"Passage {i + 1}. " + body[i * 37 :] for i in range(n)]


def raw_speeds(threads: int, prompt_len: int, prompts: list[str], gen_tokens: int) -> tuple[float, float, int, int]:
    """(prompt tokens/s, generated tokens/s, prompt tokens timed, generated tokens timed) of llama.cpp itself."""
    from bcas.llm.embedded import DEFAULT_N_CTX, default_gguf_path
    from bcas.llm.engine_process import load_llama

    opts = {"n_ctx": DEFAULT_N_CTX, "n_batch": 512, "n_threads": threads, "verbose": False, "seed": 0}
    llm = load_llama(str(default_gguf_path()), opts, plain=True)
    llm.reset()
    llm.eval(llm.tokenize(b"Warm up the engine.", add_bos=True))  # first eval allocates buffers: not timed
    pp_tokens, pp_s, tg_tokens, tg_s = 0, 0.0, 0, 0.0
    for text in prompts:
        tokens = llm.tokenize(text.encode(), add_bos=True)[: max(1, prompt_len)]
        llm.reset()  # an empty KV cache: the whole prompt is evaluated (eval drops the cache from n_tokens on)
        started = time.perf_counter()
        llm.eval(tokens)
        pp_s += time.perf_counter() - started
        pp_tokens += len(tokens)
        started = time.perf_counter()  # the prompt is in the cache: only generation is timed
        out = llm.create_completion(prompt=tokens, max_tokens=gen_tokens, temperature=0.0)
        tg_s += time.perf_counter() - started
        tg_tokens += int(out["usage"]["completion_tokens"])
    return pp_tokens / pp_s, tg_tokens / tg_s, pp_tokens, tg_tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", default="smoke")
    parser.add_argument("--markers", default="hotpotqa", help="pytest -m expression selecting cases ('' for all)")
    parser.add_argument("--limit", type=int, default=3, help="items per case")
    parser.add_argument("--model", default=None, help="--bcas-model of the timed run (default: the embedded default)")
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads (default: bcas's rule, one engine)"
    )
    parser.add_argument("--prompts", type=int, default=4, help="prompts for the raw speeds")
    parser.add_argument("--gen-tokens", type=int, default=64, help="greedy tokens per prompt for the raw speed")
    parser.add_argument("--keep", default=None, help="keep caches, reports and logs in this folder")
    parser.add_argument("--write-docs", action="store_true", help="write the figures into docs/measured.md")
    args = parser.parse_args(argv)
    from bcas.llm.threads import engine_threads

    threads = args.threads or engine_threads(engines=1)
    load_before = load_text()
    print(f"machine: {len(os.sched_getaffinity(0))} usable CPUs, load average {load_before} (before)")
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bcas-eff-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "BCAS_CACHE_DIR": str(folder / "cache"), "BCAS_THREADS": str(threads)}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    env.pop("BCAS_NO_CACHE", None)
    common = ["benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-grid", args.grid, "--bcas-limit", str(args.limit)]
    if args.markers:
        common += ["-m", args.markers]
    print(
        f"grid {args.grid!r} -m {args.markers!r}, {args.limit} items per case, n_threads={threads}; files in {folder}"
    )
    _, rc = run_child(
        "indexes", [*common, "--bcas-model", "mock:gold", "--bcas-report", str(folder / "warm")], env, folder
    )
    if rc != 0:
        print(f"  NOT measured: the index warm-up run exited {rc} (log in {folder})")
        figure(f"harness efficiency, {args.grid}", "NOT measured", "", f">= {TARGET}", False)
        return 1
    timed = [*common, "--bcas-report", str(folder / "run"), "--junitxml", str(folder / "junit.xml")]
    timed += ["-o", "junit_duration_report=total"] + (["--bcas-model", args.model] if args.model else [])
    wall, rc = run_child("timed", timed, env, folder)
    problem = f"the timed run exited {rc} (log in {folder})" if rc != 0 else ""
    cases: list[CaseTokens] = []
    if not problem:
        records = read_records(folder / "run")
        cases = tokens_per_case(args.grid, junit_cases(folder / "junit.xml"), records)
        empty = [c.case_id for c in cases if not c.records]
        problem = "no case ran" if not cases else (f"no records for {empty}" if empty else "")
    if problem:
        print(f"  NOT measured: {problem}")
        figure(f"harness efficiency, {args.grid}", "NOT measured", "", f">= {TARGET}", False)
        return 1

    shown: list[str] = []

    def say(line: str) -> None:
        print(line)
        shown.append(line)

    calls = sum(c.calls for c in cases)
    prompt_len = round(sum(c.prompt for c in cases) / max(1, calls))
    pp, tg, pp_n, tg_n = raw_speeds(threads, prompt_len, sample_texts(records, args.prompts), args.gen_tokens)
    say(
        f"raw llama.cpp, same GGUF, n_ctx and n_threads={threads}: prompt processing {pp:.2f} tokens/s "
        f"({pp_n} tokens in {args.prompts} prompts of {prompt_len}, no prefix reuse), "
        f"greedy generation {tg:.2f} tokens/s ({tg_n} tokens)"
    )
    say("harness wall time: each case's duration in pytest's JUnit XML (setup + call + teardown)")
    width = max(len(c.case_id) for c in cases)
    say(f"  {'case':<{width}}  items calls  prompt  compl.  cached   raw s  harness s  efficiency")
    for c in cases:
        raw = c.prompt / pp + c.completion / tg
        say(
            f"  {c.case_id:<{width}}  {c.records:5d} {c.calls:5d} {c.prompt:7d} {c.completion:7d} {c.cached_calls:7d}"
            f" {raw:7.1f} {c.wall_s:10.1f} {raw / c.wall_s:11.2f}"
        )
    total_prompt, total_completion = sum(c.prompt for c in cases), sum(c.completion for c in cases)
    total_wall = sum(c.wall_s for c in cases)
    raw_all = total_prompt / pp + total_completion / tg
    efficiency = raw_all / total_wall
    say(
        f"  {'in all':<{width}}  {sum(c.records for c in cases):5d} {calls:5d} {total_prompt:7d} {total_completion:7d}"
        f" {sum(c.cached_calls for c in cases):7d} {raw_all:7.1f} {total_wall:10.1f} {efficiency:11.2f}"
    )
    say(
        f"efficiency = raw / harness = {efficiency:.2f} (target >= {TARGET}: {'met' if efficiency >= TARGET else 'NOT met'});"
        f" the timed run took {wall:.1f} s from start to exit"
    )
    say(f"load average {load_before} before, {load_text()} after")
    figure(f"raw llama.cpp prompt processing, n_threads={threads}", round(pp, 1), "tok/s")
    figure(f"raw llama.cpp greedy generation, n_threads={threads}", round(tg, 1), "tok/s")
    figure(f"harness efficiency, {args.grid} -m {args.markers or 'all'} x{args.limit}: raw / wall", round(efficiency, 2),
           "x", f">= {TARGET}", efficiency >= TARGET)  # fmt: skip
    if args.write_docs:
        from bench_latency import short_commit, write_section

        head = (
            f"`bench_harness_efficiency.py --grid {args.grid} --markers {args.markers!r} --limit {args.limit}` at "
            f"{short_commit()}, {datetime.date.today().isoformat()}, {len(os.sched_getaffinity(0))} usable "
            f"CPUs, n_threads={threads}:"
        )
        body = head + "\n\n```text\n" + "\n".join(shown) + "\n```"
        write_section(
            "<!-- harness-efficiency:begin -->", "<!-- harness-efficiency:end -->", body, "Harness efficiency"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
