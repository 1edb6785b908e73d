"""Grid wall time against a fixed-latency server (P2; prints numbers, asserts nothing).

A real ``python -m pytest`` run of a two-case BCAS grid through the bcas plugin and
runner with the ``openai`` backend, against a loopback server (``FaultServer``, in
this process, the run in a child process) that answers every request after 200 ms
with canned, valid JSON actions: search once, then answer.  Both cases share one
retrieval config (HotpotQA, BM25), so the second finds its retriever loaded.

Ideal wall time of a case = its requests × latency / concurrency (``--bcas-concurrency``
items in flight, each item's calls in sequence).  The target is measured / ideal
<= 1.10.  The index cache is warmed by a first, small run; the timed run has the
generation cache off, so every call reaches the server.

Any failure of a child pytest run (the warm-up or the timed run: a non-zero exit
code, no junit report, a case without records) prints "NOT measured" and exits 1.

    python benchmarks/perf/bench_grid.py [--items 128] [--concurrency 16] [--latency 0.2] [--profile PATH]

``--profile PATH`` runs the timed pytest under cProfile in CPU time (its statistics to
``PATH``; the wall-time figures of such a run are the profiler's, not the grid's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from bcas.testing.instant import canned_reply
from bcas.testing.servers import FaultServer

REPO = Path(__file__).resolve().parents[2]

TARGET = 1.10
CONFTEST = """
from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.grids import Grid, GridEntry, register_grid

_retrieval = RetrievalConfig(mode="bm25", k=2)
register_grid(Grid("perf_p2", tuple(
    GridEntry("bcas", RunConfig(budget=Budget(max_searches=2, max_total_tokens=t), retrieval=_retrieval),
              reference=(t == 1000))
    for t in (1000, 2000)), datasets=("hotpotqa",)))
"""


PROFILED = """
import cProfile, sys, time
import pytest
profiler = cProfile.Profile(time.process_time)
profiler.enable()
code = pytest.main(sys.argv[1:])
profiler.disable()
profiler.dump_stats({out!r})
sys.exit(int(code))
"""


def figure(name: str, value: float, unit: str, target: str = "", met: bool | None = None) -> None:
    """One machine-readable line for benchmarks/perf/run_all.py's table."""
    print("FIGURE " + json.dumps({"name": name, "value": value, "unit": unit, "target": target, "met": met}))


def run_grid(
    project: Path,
    base_url: str,
    report: Path,
    items: int,
    concurrency: int,
    env: dict[str, str],
    profile: str | None = None,
) -> tuple[float, dict[str, float], int]:
    junit = report.with_suffix(".xml")
    # --profile: pytest under cProfile in CPU time (what the client computes, whatever the machine's load)
    profiled = ["-c", PROFILED.format(out=str(Path(profile).resolve()))] if profile else ["-m", "pytest"]
    cmd = [
        sys.executable, *profiled, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
        "--bcas-backend", "openai", "--bcas-base-url", base_url, "--bcas-model", "canned",
        "--bcas-grid", "perf_p2", "--bcas-limit", str(items), "--bcas-concurrency", str(concurrency),
        "--bcas-no-cache", "--bcas-report", str(report),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:])
    cases = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            cases[case.get("name", "")] = float(case.get("time", "0"))
    return wall, cases, done.returncode


def calls_per_case(report: Path) -> dict[str, int]:
    calls: dict[str, int] = defaultdict(int)
    if not (report / "records.jsonl").exists():
        return calls
    for line in (report / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        calls[record["extra"]["case_id"]] += int(record["llm_calls"])
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--profile", help="run the timed pytest under cProfile, its statistics written to PROFILE")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(
        f"grid through the plugin, openai backend, {args.items} HotpotQA items x 2 configs, "
        f"concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms"
    )
    with (
        tempfile.TemporaryDirectory(prefix="bcas-p2-") as tmp,
        FaultServer(latency=args.latency, reply=canned_reply) as server,
    ):
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        (project / "conftest.py").write_text(CONFTEST)
        (project / "test_grids.py").write_text((REPO / "benchmarks" / "test_grids.py").read_text())
        (project / "pytest.ini").write_text("[pytest]\n")
        env = {**os.environ, "BCAS_CACHE_DIR": str(root / "cache"), "PYTHONPATH": str(REPO)}
        # the warm-up builds the index cache
        _, _, warm_rc = run_grid(project, server.base_url, root / "warmup", 2, args.concurrency, env)
        if warm_rc != 0:
            return not_measured(f"the warm-up pytest run exited {warm_rc}")
        server.reset()
        wall, cases, rc = run_grid(
            project, server.base_url, root / "timed", args.items, args.concurrency, env, args.profile
        )
        print(f"  server saw {server.requests} requests, at most {server.max_in_flight} at once; pytest rc {rc}")
        if rc != 0:
            return not_measured(f"the timed pytest run exited {rc}")
        calls = calls_per_case(root / "timed")
        missing = [name for name in cases if not calls.get(name[name.index("[") + 1 : -1])]
        if not cases or missing:
            return not_measured(f"cases without records: {missing or 'no case ran'}")
        ratios = []
        for i, (name, seconds) in enumerate(cases.items()):
            case_id = name[name.index("[") + 1 : -1]
            ideal = calls[case_id] * args.latency / args.concurrency
            ratio = seconds / ideal
            ratios.append(ratio)
            note = "retriever loaded from the index cache" if i == 0 else "retriever shared"
            print(
                f"  {case_id:<40} {calls[case_id]:>4} requests  {seconds:6.2f} s  ideal {ideal:5.2f} s  "
                f"= {ratio:.2f}x  [{note}]"
            )
        total_ideal = sum(calls.values()) * args.latency / args.concurrency
        print(f"  whole pytest process {wall:.2f} s (interpreter, collection, report) vs ideal {total_ideal:.2f} s")
        best = ratios[-1] if ratios else float("nan")
        print(f"  steady-state case: {best:.2f}x ideal (target <= {TARGET}x: {'met' if best <= TARGET else 'NOT met'})")
        figure("P2 grid wall / ideal (200 ms server)", round(best, 3), "x", f"<= {TARGET}", best <= TARGET)
        if ratios:
            figure(
                "P2 first case incl. index load / ideal", round(ratios[0], 3), "x", f"<= {TARGET}", ratios[0] <= TARGET
            )
    return 0


def not_measured(reason: str) -> int:
    print(f"  NOT measured: {reason}")
    figure("P2 grid wall / ideal (200 ms server)", "NOT measured", "", f"<= {TARGET}", False)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
