"""``--bcas-estimate`` checked against the run it estimates (prints figures, asserts nothing).

For each grid (``smoke``, ``baselines``, ``madara``) and model (``mock:gold``, ``embedded``):
the estimate (:func:`bcas.estimate`, the rows ``--bcas-estimate`` prints) of a few items
into a fresh run folder, then the run itself (``pytest benchmarks --bcas-grid G ...
--bcas-no-cache``, every answer generated), then per case the ratio estimate / actual of
model calls, searches and tokens (prompt, completion), and whether the wall-time range
holds the case's actual wall time (from its records, as the latency line's items/min counts
it: the items' submission, ``timing.batch_start``, to the last answer, ``timing.finished_at``;
a case's set-up before its items, an index opened, is in neither).  The calibration probe (the routed MADARA pipeline's, on ``--calibration-n``
items: 4 by default, to keep the probe small; the grids' own is 100) is a row of its own,
compared with the probe's calls in ``rsc/*.calls.jsonl``.

A real model's wall time needs a measured speed: before the estimate, the grid runs on
two items into the same folder (``--warmup 2``, the default; their records are the
estimate's basis of speed and of where a stepwise method, which the model ends, stops),
and the estimate and the run then cover the other items.  ``--warmup 0`` shows the
estimate from the call structure alone (the budgets' bound for a stepwise method).

    python benchmarks/perf/bench_estimate.py [--grids smoke,baselines,madara] [--models mock:gold,embedded]
        [--items 2] [--datasets hotpotqa,conflictqa] [--select EXPR] [--write-docs] [--section NAME]

Each grid runs on one dataset of each kind (:data:`DATASETS`) unless ``--datasets`` says.
``--write-docs`` writes the table, the commands, the wall time and the load before and after
into docs/measured.md (section ``--section``, one per model: ``estimate-vs-run-mock``,
``estimate-vs-run-embedded``).
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
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from bench_latency import short_commit, write_section  # noqa: E402

import bcas  # noqa: E402

TARGET = 0.15  # estimated calls within 15% of the actual
DATASETS = {"smoke": "hotpotqa,conflictqa", "baselines": "hotpotqa", "madara": "conflictqa"}
"""Each grid's datasets unless ``--datasets`` names others: one of each kind, to keep the runs short."""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def options(grid: str, model: str, items: int, datasets: str | None, calibration_n: int) -> list[str]:
    more = ["--bcas-grid", grid, "--bcas-model", model, "--bcas-limit", str(items), "--bcas-no-cache"]
    if datasets:
        more += ["--bcas-datasets", datasets]
    if grid in ("madara", "smoke"):
        more += ["--bcas-calibration-n", str(calibration_n)]
    return more


def run(folder: Path, more: list[str], select: str | None) -> tuple[int, float, str]:
    env = {**os.environ, "BCAS_THREADS": os.environ.get("BCAS_THREADS", "1"), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "--bcas-report", str(folder),
           *more, *(["-k", select] if select else [])]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
    return done.returncode, time.perf_counter() - start, " ".join(cmd[3:])


def keywords(more: list[str]) -> dict[str, Any]:
    """:func:`bcas.estimate`'s keywords for the command-line options ``more``."""
    pairs = {
        flag: more[i + 1]
        for i, flag in enumerate(more[:-1])
        if flag.startswith("--") and not more[i + 1].startswith("--")
    }
    out: dict[str, Any] = {"no_cache": True}
    if "--bcas-datasets" in pairs:
        out["datasets"] = pairs["--bcas-datasets"].split(",")
    if "--bcas-calibration-n" in pairs:
        out["calibration_n"] = pairs["--bcas-calibration-n"]
    return out


def actual(folder: Path, since: float) -> dict[str, dict[str, float]]:
    """Per case id (model-dataset-label): the run's calls, searches, tokens and wall seconds."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    path = folder / "records.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        r = json.loads(line)
        if r.get("created_at", 0) >= since:
            rows[f"{r['model']}-{r['dataset']}-{r['label']}"].append(r)
    out = {}
    for case, recs in rows.items():
        # the items' span, as the latency line's items/min counts it: their submission to the last answer
        timing = [r.get("timing") or {} for r in recs]
        ends = [float(t.get("finished_at") or r["created_at"]) for t, r in zip(timing, recs, strict=True)]
        starts = [float(t.get("batch_start") or r["created_at"]) for t, r in zip(timing, recs, strict=True)]
        out[case] = {
            "items": len(recs),
            "calls": sum(r["llm_calls"] for r in recs),
            "searches": sum(r["searches_used"] for r in recs),
            "tokens_in": sum(r["tokens_in"] for r in recs),
            "tokens_out": sum(r["tokens_out"] for r in recs),
            "wall": max(ends) - min(starts),
        }
    for calls in sorted((folder / "rsc").glob("*.calls.jsonl")) if (folder / "rsc").is_dir() else []:
        meta = json.loads(calls.with_name(calls.name.replace(".calls.jsonl", ".json")).read_text(encoding="utf-8"))
        entries = [json.loads(x) for x in calls.read_text(encoding="utf-8").splitlines() if x.strip()]
        dataset = meta.get("dataset_evaluated") or meta.get("dataset")
        out[f"calibration: RSC probe {meta.get('model_label')}-{dataset}"] = {
            "items": len(meta.get("profile", {}).get("item_ids") or meta.get("item_ids") or []),
            "calls": len(entries),
            "searches": float("nan"),
            "tokens_in": sum(e["prompt_tokens"] for e in entries),
            "tokens_out": sum(e["completion_tokens"] for e in entries),
            "wall": float("nan"),
        }
    return out


def ratio(estimated: float, measured: float) -> str:
    if measured != measured:  # nan: not measured
        return "–"
    if measured == 0:
        return "1.00" if estimated == 0 else "∞"
    return f"{estimated / measured:.2f}"


def compare(grid: str, model: str, rows: list[Any], measured: dict[str, dict[str, float]]) -> list[str]:
    table = []
    for e in rows:
        got = measured.get(e.case_id)
        if got is None or not e.items:
            continue
        wall = "–" if got["wall"] != got["wall"] else (
            "unknown" if e.wall is None else
            f"{'yes' if e.wall[0] <= got['wall'] <= e.wall[1] else 'NO'} ({e.wall[0]:.2f}-{e.wall[1]:.2f} s vs {got['wall']:.2f} s)"
        )  # fmt: skip
        r_calls = e.calls / got["calls"] if got["calls"] else float("inf")
        within = "yes" if abs(r_calls - 1) <= TARGET else "NO"
        table.append(
            f"| {grid} | {model} | {e.case_id}{' (calibration)' if e.calibration else ''} | {e.items} "
            f"| {e.calls:.0f} / {got['calls']:.0f} = {ratio(e.calls, got['calls'])} ({within}) "
            f"| {ratio(e.searches, got['searches'])} | {ratio(e.tokens_in, got['tokens_in'])} "
            f"| {ratio(e.tokens_out, got['tokens_out'])} | {wall} | {e.basis} |"
        )
    return table


HEAD = [
    "| grid | model | case | items | calls est / actual (within 15%) | searches est/actual | prompt tokens est/actual "
    "| completion tokens est/actual | wall range holds the actual | expected calls from |",
    "|---|---|---|---|---|---|---|---|---|---|",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", default="smoke,baselines,madara")
    parser.add_argument("--models", default="mock:gold,embedded")
    parser.add_argument("--items", type=int, default=2, help="items the estimate and the run cover per dataset")
    parser.add_argument("--datasets", default=None, help="--bcas-datasets for every grid (default: DATASETS)")
    parser.add_argument("--calibration-n", type=int, default=4, help="the routed pipeline's calibration items")
    parser.add_argument("--warmup", type=int, default=2, help="items run first, the estimate's basis (0: none)")
    parser.add_argument("--select", default=None, help="pytest -k expression of the cases (e.g. 'not hs')")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/measured.md")
    parser.add_argument("--section", default="estimate-vs-run", help="docs/measured.md section (one per model)")
    args = parser.parse_args()
    facts: dict[str, Any] = {"before": load(), "commit": short_commit(), "date": datetime.date.today().isoformat()}
    table = list(HEAD)
    commands = []
    started = time.perf_counter()
    for model in args.models.split(","):
        for grid in args.grids.split(","):
            folder = Path(tempfile.mkdtemp(prefix=f"bench-estimate-{grid}-")) / "run"
            warm = args.warmup
            total = warm + args.items
            datasets = args.datasets or DATASETS.get(grid)
            more = options(grid, model, total, datasets, args.calibration_n)
            if warm:
                run(folder, options(grid, model, warm, datasets, args.calibration_n), args.select)
            t0 = time.perf_counter()
            rows = bcas.estimate(grid, model, limit=total, out=str(folder), root=str(REPO), **keywords(more))
            est_s = time.perf_counter() - t0
            if args.select:  # the estimate covers every case of the grid; keep those the run selects
                rows = [r for r in rows if _selected(r.case_id, args.select)]
            since = time.time()
            code, wall, cmd = run(folder, more, args.select)
            commands.append(f"`{cmd}` (exit {code}, {wall:.0f} s; estimate {est_s:.1f} s)")
            part = compare(grid, model, rows, actual(folder, since))
            print("\n".join(part), flush=True)
            table.extend(part)
    facts["after"] = load()
    facts["wall_s"] = round(time.perf_counter() - started)
    print(f"before: {facts['before']}; after: {facts['after']}")
    if args.write_docs:
        head = (
            f"`bench_estimate.py` at {facts['commit']}, {facts['date']}: the estimate, then the run, of "
            f"--bcas-limit {args.warmup + args.items} (the items a {args.warmup}-item warm-up run did not record; "
            "its records are the estimate's basis of speed and of where a stepwise method stops), "
            f"calibration {args.calibration_n} items; {facts['wall_s']} s in all; before: {facts['before']}; "
            f"after: {facts['after']}. Runs: " + "; ".join(commands)
        )
        write_section(f"<!-- {args.section}:begin -->", f"<!-- {args.section}:end -->",
                      head + "\n\n" + "\n".join(table), f"The estimate against the run ({args.models})")  # fmt: skip
    return 0


def _selected(case_id: str, expr: str) -> bool:
    """Whether ``-k expr`` selects the case ``case_id``, read by pytest's own ``-k`` grammar (``and``,
    ``or``, ``not``, parentheses), each word matching as a part of the id, as ``-k`` matches test ids."""
    from _pytest.mark.expression import Expression

    return Expression.compile(expr).evaluate(lambda word, **_: word in case_id)


if __name__ == "__main__":
    raise SystemExit(main())
