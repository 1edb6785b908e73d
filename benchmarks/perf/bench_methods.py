"""What each method of the ``baselines`` grid spends on a real model (prints figures, asserts nothing).

Runs ``pytest benchmarks --bcas-grid baselines --bcas-model embedded --bcas-datasets hotpotqa
--bcas-limit 3`` (the embedded SmolLM2-135M, ``BCAS_THREADS`` as set, default 1) into a run
folder, or reads an existing one (``--run DIR``), and prints per method × retrieval mode: items,
errors, mean searches, mean prompt and completion tokens, model calls, accuracy (SQuAD EM) and
stop reasons, with the machine's load average before and after beside them (figures taken under
load are not measurements).  The figures for docs/measured.md:

    BCAS_THREADS=1 python benchmarks/perf/bench_methods.py [--items 3] [--model embedded] [--run DIR]
        [--select 'hs+r'] [--rerank-candidates 10]
"""

from __future__ import annotations

import argparse
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


def figure(name: str, value: float, unit: str) -> None:
    """One machine-readable line for benchmarks/perf/run_all.py's table."""
    print("FIGURE " + json.dumps({"name": name, "value": value, "unit": unit, "target": "", "met": None}))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def run(report: Path, items: int, model: str, more: list[str]) -> tuple[int, float]:
    env = {**os.environ, "BCAS_THREADS": os.environ.get("BCAS_THREADS", "1"), "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-grid", "baselines",
        "--bcas-model", model, "--bcas-datasets", "hotpotqa", "--bcas-limit", str(items), "--bcas-report", str(report), *more,
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    return done.returncode, time.perf_counter() - start


def spend(records: list[dict[str, Any]]) -> None:
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        rows[str(r.get("label"))].append(r)
    head = (f"{'configuration':<22}{'n':>3}{'err':>4}{'searches':>9}{'prompt tok':>11}{'compl tok':>10}"
            f"{'calls':>7}{'EM %':>6}  stop reasons")  # fmt: skip
    print(head)
    for label, recs in sorted(rows.items()):
        n = len(recs)

        def mean(key: str, recs: list[dict[str, Any]] = recs, n: int = n) -> float:
            return sum(float(r.get(key) or 0) for r in recs) / n

        stops = Counter(str(r.get("stop_reason")) for r in recs)
        errors = stops.get("error", 0)
        print(
            f"{label:<22}{n:>3}{errors:>4}{mean('searches_used'):>9.2f}{mean('tokens_in'):>11.0f}"
            f"{mean('tokens_out'):>10.0f}{mean('llm_calls'):>7.2f}{100 * mean('correct_em'):>6.1f}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(stops.items()))
        )
        figure(f"baselines {label}: completion tokens per item", mean("tokens_out"), "tokens")
        figure(f"baselines {label}: searches per item", mean("searches_used"), "searches")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--run", type=Path, default=None, help="read this run folder instead of running the grid")
    parser.add_argument("--select", default=None, help="pytest -k expression of the cases to run (e.g. 'hs+r')")
    parser.add_argument(
        "--rerank-candidates", type=int, default=None, help="--bcas-rerank-candidates (the llm reranker's pool)"
    )
    args = parser.parse_args()
    more = ["-k", args.select] if args.select else []
    if args.rerank_candidates:
        more += ["--bcas-rerank-candidates", str(args.rerank_candidates)]
    print(f"before: {load()}")
    folder = args.run
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="bench-methods-")) / "run"
        code, wall = run(folder, args.items, args.model, more)
        print(
            f"grid baselines, {args.model}, hotpotqa, {args.items} items {' '.join(more)}: exit {code}, {wall:.0f} s wall"
        )
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines() if line.strip()]
    spend(records)
    print(f"after: {load()}; BCAS_THREADS={os.environ.get('BCAS_THREADS', '1')}; run folder {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
