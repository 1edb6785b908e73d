"""Run every benchmark script in benchmarks/perf/ and print one table of figures.

Each ``bench_*.py`` runs in its own interpreter, one after another (so they do not
compete for the CPU); its output is shown as it comes.  The table at the end holds
every figure the scripts printed: lines ``FIGURE {json}`` (name, value, unit,
target, met), plus the headline numbers of scripts that print prose, read from
their output (harness turns/s, BM25 queries/s and ratios, openai-backend overhead,
embedded tokens/s).  Nothing is asserted: a missed target is shown as ``NOT met``.
A script that exits non-zero (a failed child run, a crash, the per-script timeout)
has every figure it printed shown as ``NOT measured``, and run_all exits 1.

    python benchmarks/perf/run_all.py [--quick] [--only bench_grid,bench_agent] [--skip bench_madara]
    tox -e perf

``--quick`` gives the long scripts smaller workloads (for a first look, not for the
figures of docs/measured.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# Smaller workloads under --quick, by script stem.
QUICK_ARGS: dict[str, list[str]] = {
    "bench_agent": ["--trajectories", "100", "--rounds", "2"],
    "bench_dense_build": ["--chunks", "32", "--repeats", "1"],
    "bench_grid": ["--items", "64"],
    "bench_latency": ["--items", "4"],
    "bench_harness_efficiency": ["--limit", "1"],
    "bench_llm": ["--rounds", "2"],
    "bench_madara": ["--items", "1", "--methods", "nf,sda,pde"],
    "bench_methods": ["--items", "1", "--select", "bm25 or closed_book"],
    "bench_prefix_reuse": ["--limit", "1"],
    "bench_rerun": ["--limit", "2"],
    "bench_retrieval": ["--queries", "200", "--skip-dense", "--skip-rerank"],
}


@dataclass
class Figure:
    name: str
    value: float | str
    unit: str = ""
    target: str = ""
    met: bool | None = None
    script: str = ""
    measured: bool = True  # False when the script that printed it exited non-zero


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def figures_from_prose(script: str, output: str) -> list[Figure]:
    """Headline numbers of scripts that print prose rather than FIGURE lines."""
    found: list[Figure] = []
    if script == "bench_agent":
        for name, rate in re.findall(r"^\s+(.+?)\s+(\d+) turns/s", output, re.M):
            found.append(Figure(f"P1 harness turns/s/core ({name})", _number(rate), "turns/s", ">= 2000",
                                _number(rate) >= 2000))  # fmt: skip
    elif script == "bench_retrieval":
        rates = {name: _number(q) for name, q in re.findall(r"^\s+(.+?)\s+([\d,]+) q/s", output, re.M)}
        ours = next((v for k, v in rates.items() if k.startswith("phrase-boosted")), None)
        plain = rates.get("plain bm25s retrieve, per query")
        okapi = rates.get("rank_bm25 BM25Okapi")
        if ours is not None:
            found.append(Figure("P3 phrase-boosted BM25 queries/s", ours, "q/s"))
        if ours is not None and plain:
            found.append(Figure("P3 phrase-boosted / plain bm25s", round(ours / plain, 2), "x", ">= 0.5",
                                ours / plain >= 0.5))  # fmt: skip
        if ours is not None and okapi:
            found.append(Figure("P3 phrase-boosted / rank_bm25", round(ours / okapi, 1), "x", ">= 50",
                                ours / okapi >= 50))  # fmt: skip
        elif ours is not None:
            found.append(Figure("P3 phrase-boosted / rank_bm25", "rank_bm25 not run", "", ">= 50"))
    elif script == "bench_llm":
        median = re.search(r"median ([\d.]+) s = ([\d.]+)x ideal", output)
        if median:
            ratio = _number(median.group(2))
            found.append(Figure("openai backend alone, 64 req @200 ms / ideal", ratio, "x", "<= 1.25", ratio <= 1.25))
        for label, rate in re.findall(r"^\s+(free text|JSON schema): .*= ([\d.]+) generated tokens/s", output, re.M):
            found.append(Figure(f"embedded SmolLM2 tokens/s ({label})", _number(rate), "tok/s"))
    return found


def figures_from_lines(script: str, output: str) -> list[Figure]:
    found = []
    for line in output.splitlines():
        if line.startswith("FIGURE "):
            try:
                data = json.loads(line[len("FIGURE ") :])
            except json.JSONDecodeError:
                continue
            found.append(Figure(data["name"], data["value"], data.get("unit", ""), data.get("target", ""),
                                data.get("met"), script))  # fmt: skip
    return found


def run_script(path: Path, extra: list[str], timeout: float) -> tuple[str, int, float]:
    """Run one script, echoing its output; return (output, exit code, wall seconds)."""
    print(f"\n=== {path.name} {' '.join(extra)}", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    started = time.perf_counter()
    lines: list[str] = []
    proc = subprocess.Popen(
        [sys.executable, str(path), *extra], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, bufsize=1,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = started + timeout
    for line in proc.stdout:
        if not line.startswith("FIGURE "):
            print("  " + line, end="", flush=True)
        lines.append(line)
        if time.perf_counter() > deadline:
            proc.kill()
            lines.append(f"(killed after {timeout:.0f} s)\n")
            break
    rc = proc.wait()
    return "".join(lines), rc, time.perf_counter() - started


def _fmt(value: float | str) -> str:
    if isinstance(value, float) and value >= 1000:
        return f"{value:,.0f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller workloads for the long scripts")
    parser.add_argument("--only", default="", help="comma-separated script stems to run (default: all)")
    parser.add_argument("--skip", default="", help="comma-separated script stems to leave out")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per script")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    scripts = [p for p in sorted(HERE.glob("bench_*.py")) if (not only or p.stem in only) and p.stem not in skip]
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; scripts: {[p.stem for p in scripts]}"
    )
    figures: list[Figure] = []
    runs: list[tuple[str, int, float, int]] = []
    for path in scripts:
        extra = QUICK_ARGS.get(path.stem, []) if args.quick else []
        output, rc, wall = run_script(path, extra, args.timeout)
        found = figures_from_lines(path.stem, output) + figures_from_prose(path.stem, output)
        for fig in found:
            fig.script = path.stem
            if rc != 0:
                fig.measured = False
        if rc != 0 and not found:
            found.append(Figure(f"{path.stem} (every figure)", "-", script=path.stem, measured=False))
        figures.extend(found)
        runs.append((path.stem, rc, wall, len(found)))

    width = max([len(f.name) for f in figures] + [30])
    print("\n" + "=" * (width + 56))
    print(f"{'figure':<{width}}  {'value':>12} {'unit':<8} {'target':<9} {'status':<12} script")
    print("-" * (width + 56))
    for fig in figures:
        verdict = "" if fig.met is None else ("met" if fig.met else "NOT met")
        if not fig.measured:
            verdict = "NOT measured"
        print(f"{fig.name:<{width}}  {_fmt(fig.value):>12} {fig.unit:<8} {fig.target:<9} {verdict:<12} {fig.script}")
    print("-" * (width + 56))
    for stem, rc, wall, n in runs:
        note = "" if n else "  (no figures parsed: see its output above)"
        if rc != 0:
            note += "  FAILED: its figures are NOT measured"
        print(f"{stem:<{width}}  ran {wall:7.1f} s, exit code {rc}{note}")
    return 0 if all(rc == 0 for _, rc, _, _ in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
