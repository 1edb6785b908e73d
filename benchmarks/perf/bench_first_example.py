"""The README's first example ("Evaluate a model") on the embedded default, timed (prints
figures, asserts nothing).

Reads the command under ``# the embedded CPU default`` from README.md and runs it as written
(plus ``--bcas-report`` into a scratch folder and an empty ``BCAS_CACHE_DIR``, so every
answer is generated), then prints the wall time, each recorded item's searches, stop reason
and answer, the tokens read and written, and the load average before and after (a figure
taken beside other heavy jobs is not the quiet figure).  Issue 47 item 8: the first example
shows searches and an answer within a few minutes on a CPU.

    python benchmarks/perf/bench_first_example.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARK = "# the embedded CPU default"


def first_example() -> list[str]:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARK))
    return shlex.split(lines[start + 1])


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="the run folder and cache go here (default: a temporary folder)")
    args = parser.parse_args()
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="bcas-first-example-"))
    run, cache = scratch / "run", scratch / "cache"
    command = [sys.executable, *first_example()[1:], "-p", "no:cacheprovider", "--bcas-report", str(run)]
    env = {**os.environ, "BCAS_CACHE_DIR": str(cache)}
    env.pop("PYTEST_ADDOPTS", None)
    print(f"command: {shlex.join(first_example())}")
    print(f"machine: {len(os.sched_getaffinity(0))} usable CPUs, load average before {load()}")
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    print(f"exit status {done.returncode}, wall time {wall:.1f} s; load average after {load()}")
    path = run / "records.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    for r in records:
        print(
            f"  {r['item_id']}: {r['searches_used']} search(es), stop {r.get('stop_reason') or '-'}, "
            f"{r['tokens_in']:,} tokens in, {r['tokens_out']:,} out, answer {str(r['prediction'])[:60]!r}"
        )
    searched = sum(1 for r in records if int(r["searches_used"]) >= 1 and str(r["prediction"]).strip())
    print(f"{searched} of {len(records)} items searched and answered")
    if done.returncode != 0:
        print(done.stdout[-2000:] + done.stderr[-2000:])


if __name__ == "__main__":
    main()
