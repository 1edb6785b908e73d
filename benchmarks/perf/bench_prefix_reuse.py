"""The embedded engine with and without aligned prefix reuse: wall time, and the same records
(prints numbers, asserts nothing).

Runs a grid on the embedded CPU default (``python -m pytest benchmarks --bcas-grid smoke -m
hotpotqa`` by default) in child processes, uncached (``--bcas-no-cache``), each on a fresh
report folder: once with ``BCAS_PREFIX_REUSE=0`` (every request from an empty KV cache)
and once with the default (a prompt reuses the whole ``n_batch``-aligned batches it shares
with the previous prompt: :func:`bcas.llm.engine_process.aligned_llama_class`).  The
indexes are built first by the same grid on ``mock:gold`` (not timed).

The speed-up is reported only when it measures the same work: both children exit 0 and
their records are the same (config, item) keys, each once, equal in everything but timing
(tests/support/proofs.py).  Reuse that changed a logit would change an answer somewhere in
a grid; otherwise "NOT measured" and exit 1.  The load average is printed before and after.

    python benchmarks/perf/bench_prefix_reuse.py [--grid smoke] [--markers hotpotqa] [--limit N] [--keep DIR]
        [--write-docs]

``--write-docs`` puts the measured lines (with the date, the commit and the load) between
``<!-- prefix-reuse:begin -->`` and ``<!-- prefix-reuse:end -->`` of docs/measured.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from bench_harness_efficiency import run_child as child  # noqa: E402  (this script's folder is on sys.path)
from bench_latency import short_commit, write_section  # noqa: E402
from support.proofs import by_key, first_difference, raw_records  # noqa: E402


def figure(name: str, value: float, unit: str, target: str = "", met: bool | None = None) -> None:
    """One machine-readable line for benchmarks/perf/run_all.py's table."""
    print("FIGURE " + json.dumps({"name": name, "value": value, "unit": unit, "target": target, "met": met}))


def prompt_load(records: list[dict]) -> tuple[int, int]:
    """(calls, prompt tokens) of the run's model calls, from the records' steps."""
    steps = [s for r in records for s in r.get("steps") or [] if int(s.get("calls", 0))]
    return sum(int(s["calls"]) for s in steps), sum(int(s.get("tokens_in", 0)) for s in steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", default="smoke")
    parser.add_argument("--markers", default="hotpotqa", help="pytest -m expression choosing the cases ('' for all)")
    parser.add_argument("--limit", type=int, default=None, help="items per dataset (default: the grid's)")
    parser.add_argument("--keep", default=None, help="keep caches, reports and logs in this folder")
    parser.add_argument("--write-docs", action="store_true", help="write the figures into docs/measured.md")
    args = parser.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bcas-reuse-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "BCAS_CACHE_DIR": str(folder / "cache"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for name in ("BCAS_INDEX_DIR", "BCAS_NO_CACHE", "BCAS_PREFIX_REUSE", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    common = ["benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-grid", args.grid]
    if args.markers:
        common += ["-m", args.markers]
    if args.limit is not None:
        common += ["--bcas-limit", str(args.limit)]
    print(f"grid {args.grid!r} ({args.markers or 'all cases'}) on the embedded default; files in {folder}")
    _, code = child(
        "indexes", [*common, "--bcas-model", "mock:gold", "--bcas-report", str(folder / "mock")], env, folder
    )
    if code != 0:
        print(f"NOT measured: building the indexes on mock:gold failed (exit {code}; {folder / 'indexes.log'})")
        return 1
    one, five, _ = os.getloadavg()
    before = f"{one:.2f}"
    print(f"load average before: {one:.2f} (1 min), {five:.2f} (5 min); {len(os.sched_getaffinity(0))} usable CPUs")
    walls: dict[str, float] = {}
    records: dict[str, list[dict]] = {}
    for label, value in (("no reuse", "0"), ("reuse", "1")):
        run_dir = folder / label.replace(" ", "-")
        wall, code = child(
            label,
            [*common, "--bcas-no-cache", "--bcas-report", str(run_dir)],
            {**env, "BCAS_PREFIX_REUSE": value},
            folder,
        )
        if code != 0:
            print(f"NOT measured: the {label!r} run failed (exit {code}; {folder / (label + '.log')})")
            return 1
        walls[label], records[label] = wall, raw_records(run_dir)
    one, five, _ = os.getloadavg()
    after = f"{one:.2f}"
    print(f"load average after: {one:.2f} (1 min), {five:.2f} (5 min)")
    cold, warm = by_key(records["no reuse"]), by_key(records["reuse"])
    if (
        not cold
        or set(cold) != set(warm)
        or len(cold) != len(records["no reuse"])
        or len(warm) != len(records["reuse"])
    ):
        print(f"NOT measured: the runs hold other records ({len(cold)} and {len(warm)} keys)")
        return 1
    for key in sorted(cold):
        difference = first_difference(cold[key], warm[key])
        if difference != "equal":
            print(f"NOT measured: record {key} differs with reuse: {difference}")
            return 1
    calls, prompt = prompt_load(records["reuse"])
    print(
        f"{len(cold)} records, {calls} model calls, {prompt:,} prompt tokens: the same answers with and without reuse"
    )
    ratio = walls["no reuse"] / walls["reuse"]
    print(f"wall time: no reuse {walls['no reuse']:.1f} s, reuse {walls['reuse']:.1f} s: speed-up {ratio:.2f}x")
    figure("prefix reuse speed-up", round(ratio, 2), "x")
    if args.write_docs:
        text = (
            f"`bench_prefix_reuse.py --grid {args.grid} --markers {args.markers!r}"
            f"{f' --limit {args.limit}' if args.limit is not None else ''}` at {short_commit()}, "
            f"{datetime.date.today().isoformat()}, {len(os.sched_getaffinity(0))} usable CPUs, load average "
            f"{before} before and {after} after (the runs' own engine threads): the same {len(cold)} records in "
            f"everything but timing ({calls} model calls, {prompt:,} prompt tokens), **{walls['no reuse']:.1f} s "
            f"without reuse, {walls['reuse']:.1f} s with it: {ratio:.2f}× faster**."
        )
        write_section("<!-- prefix-reuse:begin -->", "<!-- prefix-reuse:end -->", text, "Prompt reuse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
