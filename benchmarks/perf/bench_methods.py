"""What each method of the ``baselines`` grid spends on a real model (prints figures, asserts nothing).

Runs ``pytest benchmarks --bcas-grid baselines --bcas-model embedded --bcas-datasets hotpotqa
--bcas-limit 3 --bcas-no-cache`` (the embedded SmolLM2-135M, ``BCAS_THREADS`` as set, default 1;
every answer generated, none replayed from the generation cache) into a run
folder, or reads an existing one (``--run DIR``), and prints per method × retrieval mode: items,
errors, mean searches, mean prompt and completion tokens, model calls, accuracy (SQuAD EM) and
stop reasons, with the machine's load average before and after beside them (figures taken under
load are not measurements).  The figures for docs/measured.md:

    BCAS_THREADS=1 python benchmarks/perf/bench_methods.py [--items 3] [--model embedded] [--run DIR]
        [--select 'hs+r'] [--rerank-candidates 10] [--server] [--server-binary PATH] [--write-docs]

``--server`` runs the same grid against a llama.cpp server serving the same GGUF on loopback
(``llama_cpp.server``, what ``bcas serve`` runs; llama.cpp's own ``llama-server`` with
``--server-binary``) through the ``openai`` backend, context 8,192 like the embedded engine.
``--write-docs`` writes the table, the command, the wall time and the load into docs/measured.md
(section ``methods-spend-embedded`` or ``methods-spend-server``); the run's own facts are kept in
``bench.json`` beside the run folder, so ``--run DIR --write-docs`` writes the same section later.
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
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_latency import ALIAS, NativeServer, short_commit, write_section  # noqa: E402

from bcas.testing.llama import LlamaCppServer  # noqa: E402

N_CTX = 8192  # the embedded engine's window (bcas.llm.embedded.DEFAULT_N_CTX)


def figure(name: str, value: float, unit: str) -> None:
    """One machine-readable line for benchmarks/perf/run_all.py's table."""
    print("FIGURE " + json.dumps({"name": name, "value": value, "unit": unit, "target": "", "met": None}))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def run(report: Path, items: int, model: str, more: list[str]) -> tuple[int, float]:
    """The grid into ``report``: its exit code and wall seconds."""
    env = {**os.environ, "BCAS_THREADS": os.environ.get("BCAS_THREADS", "1"), "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-grid", "baselines",
        "--bcas-model", model, "--bcas-datasets", "hotpotqa", "--bcas-limit", str(items), "--bcas-report", str(report), "--bcas-no-cache", *more,
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    return done.returncode, time.perf_counter() - start


HEAD = ("| configuration | items | errors | searches | prompt tokens | completion tokens | model calls "
        "| EM % | stop reasons |")  # fmt: skip


def spend(records: list[dict[str, Any]]) -> list[str]:
    """Per configuration (method × mode) the mean spend per item; printed, and returned as table rows."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        rows[str(r.get("label"))].append(r)
    table = [HEAD, "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for label, recs in sorted(rows.items()):
        n = len(recs)

        def mean(key: str, recs: list[dict[str, Any]] = recs, n: int = n) -> float:
            return sum(float(r.get(key) or 0) for r in recs) / n

        stops = Counter(str(r.get("stop_reason")) for r in recs)
        table.append(
            f"| {label} | {n} | {stops.get('error', 0)} | {mean('searches_used'):.2f} | {mean('tokens_in'):.0f} | "
            f"{mean('tokens_out'):.0f} | {mean('llm_calls'):.2f} | {100 * mean('correct_em'):.1f} | "
            + ", ".join(f"{k} {v}" for k, v in sorted(stops.items()))
            + " |"
        )
        figure(f"baselines {label}: completion tokens per item", mean("tokens_out"), "tokens")
        figure(f"baselines {label}: searches per item", mean("searches_used"), "searches")
    print("\n".join(table))
    return table


def served(args: argparse.Namespace, threads: int) -> tuple[Any, str]:
    """The server ``--server`` asks for (a context manager with ``base_url``) and its description."""
    if args.server_binary:
        return NativeServer(args.server_binary, 1, threads, N_CTX), f"llama.cpp llama-server ({args.server_binary})"
    return LlamaCppServer(n_ctx=N_CTX, n_threads=threads, alias=ALIAS), "llama_cpp.server (llama-cpp-python)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--run", type=Path, default=None, help="read this run folder instead of running the grid")
    parser.add_argument("--select", default=None, help="pytest -k expression of the cases to run (e.g. 'hs+r')")
    parser.add_argument(
        "--rerank-candidates", type=int, default=None, help="--bcas-rerank-candidates (the llm reranker's pool)"
    )
    parser.add_argument("--server", action="store_true", help="run against a llama.cpp server on loopback")
    parser.add_argument("--server-binary", default=None, help="llama.cpp's llama-server binary (with --server)")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/measured.md")
    args = parser.parse_args()
    more = ["-k", args.select] if args.select else []
    if args.rerank_candidates:
        more += ["--bcas-rerank-candidates", str(args.rerank_candidates)]
    threads = int(os.environ.get("BCAS_THREADS", "1"))
    folder = args.run
    if folder is None:
        facts: dict[str, Any] = {"before": load(), "items": args.items, "threads": threads, "commit": short_commit()}
        folder = Path(tempfile.mkdtemp(prefix="bench-methods-")) / "run"
        print(f"before: {facts['before']}")
        if args.server:
            server, what = served(args, threads)
            with server:
                server_more = ["--bcas-backend", "openai", "--bcas-base-url", server.base_url]
                code, wall = run(folder, args.items, ALIAS, [*server_more, *more])
            facts["model"] = f"{ALIAS} on {what}, context {N_CTX}, {threads} threads"
        else:
            code, wall = run(folder, args.items, args.model, more)
            facts["model"] = f"{args.model}, BCAS_THREADS={threads}"
        facts.update({"exit": code, "wall_s": round(wall, 1), "after": load(), "options": " ".join(more)})
        facts["date"] = datetime.date.today().isoformat()
        (folder.parent / "bench.json").write_text(json.dumps(facts, indent=1), encoding="utf-8")
        print(
            f"grid baselines, {facts['model']}, hotpotqa, {args.items} items {facts['options']}: exit {code}, {wall:.0f} s wall"
        )
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines() if line.strip()]
    table = spend(records)
    print(f"after: {load()}; run folder {folder}")
    if args.write_docs:
        kept = folder.parent / "bench.json"
        if not kept.is_file():
            print(f"{kept}: not found; only a run this script made can be written into the docs", file=sys.stderr)
            return 2
        facts = json.loads(kept.read_text(encoding="utf-8"))
        name = "methods-spend-server" if "server" in facts["model"] else "methods-spend-embedded"
        head = (
            f"`bench_methods.py` at {facts['commit']}, {facts['date']}: the `baselines` grid, hotpotqa, "
            f"{facts['items']} items, {facts['model']} {facts['options']}; exit {facts['exit']}, "
            f"{facts['wall_s']:.0f} s wall; before: {facts['before']}; after: {facts['after']}. "
            "Means per item; tokens and calls include the `llm` reranker's calls in the hs+r rows:"
        )
        write_section(f"<!-- {name}:begin -->", f"<!-- {name}:end -->", head + "\n\n" + "\n".join(table),
                      "What each method spends on a real model")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
