"""Cold run vs warm-cache rerun of a grid, and the memory peak (P4; prints numbers, asserts nothing).

Runs ``python -m pytest benchmarks --bcas-grid smoke`` (the README's main job on the
embedded CPU default) three times in child processes, all with one private
``BCAS_CACHE_DIR``:

1. cold: empty generation and index caches, fresh report directory;
2. warm: the same grid on a *fresh* report directory (so no item is skipped as
   already recorded) with the generation and index caches the cold run left;
3. resume: the cold run's report directory again (every item already recorded).

Prints wall time of each, the cold / warm speed-up (target >= 50x), and each run's
peak resident memory (``ru_maxrss`` of the child).

A speed-up is reported only when it measures the same work: every child run must
exit 0, and the warm run's records must equal the cold run's (same (config, item)
keys, each once, equal in everything but timing: tests/support/proofs.py).  A warm
run that crashed early, or skipped or changed items, would otherwise look like a
large speed-up.  Otherwise the script prints "NOT measured" with the reason and
exits 1.

    python benchmarks/perf/bench_rerun.py [--grid smoke] [--limit N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.proofs import by_key, first_difference, raw_records  # noqa: E402

TARGET = 50.0


def figure(name: str, value: float, unit: str, target: str = "", met: bool | None = None) -> None:
    """One machine-readable line for benchmarks/perf/run_all.py's table."""
    print("FIGURE " + json.dumps({"name": name, "value": value, "unit": unit, "target": target, "met": met}))


def run(label: str, args: list[str], env: dict[str, str], logs: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MiB and exit code of one ``python -m pytest`` child."""
    log = logs / f"{label}.log"
    with open(log, "w") as out:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=REPO, env=env, stdout=out, stderr=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    print(
        f"  {label:<7} {wall:8.1f} s   peak RSS {usage.ru_maxrss / 1024:7.0f} MiB   rc {proc.returncode}   {tail[0][:90]}"
    )
    return wall, usage.ru_maxrss / 1024, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", default="smoke")
    parser.add_argument("--limit", type=int, default=None, help="items per dataset (default: the grid's)")
    parser.add_argument("--keep", default=None, help="keep caches, reports and logs in this folder")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bcas-p4-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "BCAS_CACHE_DIR": str(folder / "cache"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("BCAS_INDEX_DIR", None)  # the cold run builds its indexes in the private cache
    env.pop("BCAS_NO_CACHE", None)
    common = ["benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-grid", args.grid]
    if args.limit is not None:
        common += ["--bcas-limit", str(args.limit)]
    print(f"grid {args.grid!r} on the embedded default, caches and reports in {folder}")
    cold_s, cold_mb, cold_rc = run("cold", [*common, "--bcas-report", str(folder / "cold")], env, folder)
    warm_s, warm_mb, warm_rc = run("warm", [*common, "--bcas-report", str(folder / "warm")], env, folder)
    resume_s, resume_mb, resume_rc = run("resume", [*common, "--bcas-report", str(folder / "cold")], env, folder)
    failed = [name for name, rc in (("cold", cold_rc), ("warm", warm_rc), ("resume", resume_rc)) if rc != 0]
    problem = f"{', '.join(failed)} run(s) exited non-zero (logs in {folder})" if failed else compare_runs(folder)
    if problem:
        print(f"  NOT measured: {problem}")
        figure(f"P4 {args.grid} warm-cache rerun speed-up", "NOT measured", "", f">= {TARGET:.0f}", False)
        return 1
    speedup = cold_s / warm_s
    print(
        f"  warm-cache rerun: {speedup:.1f}x faster than cold (target >= {TARGET:.0f}x: "
        f"{'met' if speedup >= TARGET else 'NOT met'}); resume of the finished run: {cold_s / resume_s:.1f}x"
    )
    figure(f"P4 {args.grid} cold run", round(cold_s, 1), "s")
    figure(f"P4 {args.grid} warm-cache rerun speed-up", round(speedup, 1), "x", f">= {TARGET:.0f}", speedup >= TARGET)
    figure(f"P4 {args.grid} resume (all recorded) speed-up", round(cold_s / resume_s, 1), "x")
    figure(f"memory peak, {args.grid} cold run", round(cold_mb), "MiB")
    figure(f"memory peak, {args.grid} warm rerun", round(warm_mb), "MiB")
    return 0


def compare_runs(folder: Path) -> str:
    """Why the warm run's records do not match the cold run's ("" when they do)."""
    runs = {}
    for name in ("cold", "warm"):
        if not (folder / name / "records.jsonl").exists():
            return f"the {name} run wrote no records.jsonl"
        runs[name] = raw_records(folder / name)
    print(f"  records: cold {len(runs['cold'])}, warm {len(runs['warm'])}")
    for name, records in runs.items():
        keys = [(r["config_id"], r["item_id"]) for r in records]
        if not keys:
            return f"the {name} run recorded no item"
        if len(set(keys)) != len(keys):
            return f"the {name} run recorded an item twice"
    cold, warm = by_key(runs["cold"]), by_key(runs["warm"])
    if cold.keys() != warm.keys():
        return f"the warm run recorded {len(warm)} items, the cold run {len(cold)}; the sets differ"
    for key, record in cold.items():
        if warm[key] != record:
            return f"warm record {key} differs from the cold one: {first_difference(record, warm[key])}"
    return ""


if __name__ == "__main__":
    raise SystemExit(main())
