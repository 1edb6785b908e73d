"""What the sequential gate saves, simulated: type-I error under monitoring, power, expected items.

Paired outcomes are drawn per item: only the baseline right with ``p_w``, only the
current run right with ``p_b``, concordant otherwise, for a drop ``d = p_w - p_b`` and a
discordance ``r = p_w + p_b`` (the baseline's accuracy only decides which ``(d, r)`` are
possible: ``p_w <= acc`` and ``p_b <= 1 - acc``; the paired law is the same for every
accuracy that allows it, so each ``(d, r, N)`` is simulated once and the column lists the
accuracies of 0.3, 0.6, 0.9 it stands for).  Each setting runs the whole sequential gate
of :mod:`bcas.gating.sequential` (the e-process checked after every item, the fixed-n
exact McNemar test at N for the undecided runs), vectorised with numpy:

* **type-I** (drop 0): the share of runs that fail, with its 95% Monte Carlo interval
  (must stay <= alpha: the gate is watched after every item);
* **power at N**: the share that fail with a drop, beside the fixed-n gate's exact power on
  N items;
* **E[items]**: the mean paired items the sequential gate used (K when it stopped, N else),
  against **n fixed**: the fewest items with which the fixed-n gate reaches the same power
  (the sequential gate's, at its 95% Wilson lower bound, capped at the fixed-n power on N
  and at 0.99), and the saving ``1 - E/n``;
* **at the design point** (a second table, the comparison of the group-sequential
  literature): for each drop the fixed-n gate's n for 80% power, against the sequential
  gate whose N is the smallest with 80% power (simulated), its expected items under that
  drop; beside it the same gate's type-I error and expected items with no drop at that N;
* **the fallback share** (``--sweep-runs``, fewer runs): per share of alpha kept by the
  fixed-n test at N, the settings with a 40% saving per N, the mean design-point saving and
  the largest type-I error.

One simulation of the longest horizon per (drop, discordance) serves every horizon N (on a grid
growing 4% a step at the design point; :func:`bcas.gating.sequential.horizon_curves`).

Real runs (``--real``, one at a time, each in its own process): ``mock:gold`` as the baseline
against ``wrong_share:P`` (:mod:`bcas.testing.wrong_share`: wrong on a known P% of the items)
on 200 one-hop items, and the embedded model (SmolLM2-135M, retrieve-then-read on TriviaQA)
against itself with a degraded answer prompt (the passages left out of the template, the
change applied in the current run's process, compared with ``--bcas-allow-mismatch``); both
gated sequentially, their items used and verdicts written into docs/measured.md.

    python benchmarks/perf/bench_sequential_gate.py [--runs 10000] [--alpha 0.05] [--share 0.2] [--sweep-runs 2000] [--write-docs]
    python benchmarks/perf/bench_sequential_gate.py --real [--real-items 40] [--write-docs]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bcas.gating.sequential import (  # noqa: E402
    DEFAULT_FALLBACK_SHARE,
    fixed_power,
    horizon_curves,
    mcnemar_critical,
    thresholds,
)

DROPS = (0, 5, 10, 15)  # points
DISCORDANCE = (5, 10, 20, 40)  # percent of items
SIZES = (100, 300, 1000)
ACCURACIES = (0.3, 0.6, 0.9)
TARGET_SAVING = 0.40
POWER_CAP = 0.99  # "same power" is capped here: a power of 1.0000 would ask the fixed-n gate for unbounded items
DESIGN_POWER = 0.80  # the design point: the fixed-n gate's n for this power, the sequential gate's N for it
DESIGN_REACH = 2.5  # the sequential gate's N is searched up to this many times the fixed-n gate's n
DESIGN_STEP = 1.04  # on a grid of N growing 4% a step (each N has its own exact boundary to compute)
SWEEP_SHARES = (0.1, 0.2, 0.3, 0.5)
GATING = REPO / "docs" / "gating.md"

Row = dict[str, float | str]


def accuracies(p_worse: float, p_better: float) -> list[float]:
    return [a for a in ACCURACIES if p_worse <= a + 1e-9 and p_better <= 1 - a + 1e-9]


def wilson_lower(rate: float, runs: int, z: float = 1.96) -> float:
    """The 95% Wilson lower bound of a Monte Carlo share (never the share itself at 1.0)."""
    centre = rate + z * z / (2 * runs)
    spread = z * ((rate * (1 - rate) + z * z / (4 * runs)) / runs) ** 0.5
    return (centre - spread) / (1 + z * z / runs)


def settings() -> list[tuple[int, int]]:
    """(drop, discordance) pairs the accuracies allow."""
    return [(d, r) for d in DROPS for r in DISCORDANCE if r >= d and accuracies((r + d) / 200, (r - d) / 200)]


def fixed_n_for(p_w: float, p_b: float, alpha: float, target: float, critical: np.ndarray) -> int:
    """The fewest paired items with which the fixed-n gate's exact power reaches ``target``
    (bisection: the exact power only grows with n once it is near any target used here)."""
    lo, hi = 1, critical.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fixed_power(mid, p_w, p_b, alpha, critical) >= target - 1e-12 else (mid + 1, hi)
    return lo


def _interval(rate: float, runs: int) -> tuple[float, float]:
    half = 1.96 * (rate * (1 - rate) / runs) ** 0.5
    return max(0.0, rate - half), rate + half


def horizon_grid(lo: int, hi: int) -> list[int]:
    """N from ``lo`` to ``hi`` growing :data:`DESIGN_STEP` a step (both ends in)."""
    out, n = [lo], float(lo)
    while out[-1] < hi:
        n *= DESIGN_STEP
        out.append(min(hi, max(out[-1] + 1, int(round(n)))))
    return out


def measure(
    runs: int, alpha: float, seed: int = 0, share: float = DEFAULT_FALLBACK_SHARE
) -> tuple[list[Row], list[Row]]:
    """The per-N rows and the design-point rows: one simulation per (drop, discordance) serves
    every horizon (:func:`bcas.gating.sequential.horizon_curves`)."""
    rng = np.random.default_rng(seed)
    critical = mcnemar_critical(4000, alpha)
    design_n = {(d, r): fixed_n_for((r + d) / 200, (r - d) / 200, alpha, DESIGN_POWER, critical)
                for d, r in settings() if d > 0}  # fmt: skip
    grids = {(d, r): horizon_grid(n, max(max(SIZES), int(DESIGN_REACH * n))) for (d, r), n in design_n.items()}
    curves = {}
    for d, r in settings():
        hs = set(SIZES) | (set(grids[(d, r)]) if d else {n for (d2, r2), g in grids.items() if r2 == r for n in g})
        horizons = sorted(hs)
        fails, items = horizon_curves((r + d) / 200, (r - d) / 200, horizons, runs, alpha, share=share, rng=rng)
        curves[(d, r)] = (horizons, fails, items)
    rows: list[Row] = []
    for d, r in settings():
        p_w, p_b = (r + d) / 200, (r - d) / 200
        horizons, fails, items = curves[(d, r)]
        for n in SIZES:
            i = horizons.index(n)
            rate = float(fails[i])
            lo, hi = _interval(rate, runs)
            row: Row = {"drop": d, "disc": r, "n": n, "acc": "/".join(f"{a:g}" for a in accuracies(p_w, p_b)),
                        "rate": rate, "lo": lo, "hi": hi, "items": float(items[i])}  # fmt: skip
            if d > 0:
                at_n = fixed_power(n, p_w, p_b, alpha, critical)
                target = min(wilson_lower(rate, runs), at_n, POWER_CAP)
                n_fixed = fixed_n_for(p_w, p_b, alpha, target, critical[: n + 1])
                row.update(fixed=at_n, n_fixed=n_fixed, saving=1 - float(items[i]) / n_fixed)
            rows.append(row)
    design: list[Row] = []
    for (d, r), n_fixed in design_n.items():
        horizons, fails, items = curves[(d, r)]
        null_h, null_fails, null_items = curves[(0, r)]
        grid = grids[(d, r)]
        power = {n: float(fails[horizons.index(n)]) for n in grid}
        reached = [n for n in grid if power[n] >= DESIGN_POWER]
        row = {"drop": d, "disc": r, "n_fixed": n_fixed, "reach": grid[-1]}
        if reached:
            n = reached[0]
            i, j = horizons.index(n), null_h.index(n)
            row.update(n=n, power=power[n], items=float(items[i]), saving=1 - float(items[i]) / n_fixed,
                       null_rate=float(null_fails[j]), null_items=float(null_items[j]),
                       null_max=float(null_fails[: j + 1].max()))  # fmt: skip
        design.append(row)
    return rows, design


def table(rows: list[Row], alpha: float) -> list[str]:
    out = [
        "| drop (pts) | discordance | N | accuracies | fails (95% MC interval) | fixed-n power at N | "
        "E[items] sequential | n fixed, same power | saving |",
        "|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        cell = f"{row['rate']:.4f} ({row['lo']:.4f}-{row['hi']:.4f})"
        if row["drop"] == 0:
            cell += " <= alpha" if float(row["rate"]) <= alpha else " **> alpha**"
            rest = "| - | {:.0f} | - | - |".format(row["items"])
        else:
            saving = float(row["saving"])
            mark = "" if saving >= TARGET_SAVING or float(row["drop"]) < 10 else " (below 40%)"
            rest = f"| {row['fixed']:.3f} | {row['items']:.0f} | {row['n_fixed']} | {saving * 100:.0f}%{mark} |"
        out.append(f"| {row['drop']} | {row['disc']}% | {row['n']} | {row['acc']} | {cell} {rest}")
    return out


def design_table(design: list[Row], alpha: float) -> list[str]:
    out = [
        f"| drop (pts) | discordance | n fixed, {DESIGN_POWER:.0%} power | sequential N for {DESIGN_POWER:.0%} power | "
        "its power at N | E[items] with the drop | saving | no drop: fails at N (largest at any N' <= N) | "
        "no drop: E[items] |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for row in design:
        head = f"| {row['drop']} | {row['disc']}% | {row['n_fixed']} |"
        if "n" not in row:
            out.append(head + f" not reached by N = {row['reach']} | - | - | - | - | - |")
            continue
        saving = float(row["saving"])
        mark = "" if saving >= TARGET_SAVING or float(row["drop"]) < 10 else " (below 40%)"
        null = f"{row['null_rate']:.4f} ({row['null_max']:.4f})" + (
            " **> alpha**" if float(row["null_max"]) > alpha else ""
        )
        out.append(
            head + f" {row['n']} | {row['power']:.3f} | {row['items']:.0f} | {saving * 100:.0f}%{mark} | "
            f"{null} | {row['null_items']:.0f} |"
        )
    return out


def verdicts(rows: list[Row], design: list[Row], alpha: float) -> list[str]:
    nulls = [r for r in rows if r["drop"] == 0]
    big = [r for r in rows if float(r["drop"]) >= 10]
    worst = max(float(r["rate"]) for r in nulls)
    met = [r for r in big if float(r["saving"]) >= TARGET_SAVING]
    big_design = [r for r in design if float(r["drop"]) >= 10 and "n" in r]
    met_design = [r for r in big_design if float(r["saving"]) >= TARGET_SAVING]
    savings = [float(r["saving"]) for r in big_design]
    return [
        f"type-I error <= alpha {alpha:g} in {sum(float(r['rate']) <= alpha for r in nulls)} of {len(nulls)} "
        f"no-drop settings (largest {worst:.4f}; at the design points' N, largest at any horizon "
        f"{max(float(r['null_max']) for r in design if 'n' in r):.4f})",
        f"per N: saving >= {TARGET_SAVING:.0%} at equal alpha and power in {len(met)} of {len(big)} settings with a "
        "drop >= 10 points" + ("" if len(met) == len(big) else " (target NOT met in every setting)"),
        f"at the design point ({DESIGN_POWER:.0%} power): saving >= {TARGET_SAVING:.0%} in {len(met_design)} of "
        f"{len(big_design)} drop >= 10 settings (savings {min(savings) * 100:.0f}% to {max(savings) * 100:.0f}%)"
        + ("" if len(met_design) == len(big_design) else " (target NOT met in every setting)"),
    ]


def sweep(runs: int, alpha: float, seed: int) -> list[str]:
    """The fallback share against what it buys: one line per share of :data:`SWEEP_SHARES`."""
    out = [
        "| fallback share | e-process fails at | fixed-n test at N at | per N: saving >= 40% (of 15) | "
        "design point: mean saving, drop >= 10 | largest type-I |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for share in SWEEP_SHARES:
        rows, design = measure(runs, alpha, seed, share)
        big = [float(r["saving"]) for r in rows if float(r["drop"]) >= 10]
        at = [float(r["saving"]) for r in design if float(r["drop"]) >= 10 and "n" in r]
        worst = max(float(r["rate"]) for r in rows if r["drop"] == 0)
        out.append(
            f"| {share:g}{' (default)' if share == DEFAULT_FALLBACK_SHARE else ''} | e >= "
            f"{thresholds(alpha, 1, share, 100)[0]:.4g} (100 items), {thresholds(alpha, 1, share, 1000)[0]:.4g} "
            f"(1,000; Ville's {1 / (alpha * (1 - share)):.4g}) | "
            f"p <= {alpha * share:.4g} | {sum(v >= TARGET_SAVING for v in big)} | "
            f"{np.mean(at) * 100:.1f}% | {worst:.4f} |"
        )
        print(out[-1], flush=True)
    return out


REAL_SCRIPT = r"""
import json, sys
from pathlib import Path
from bcas.config import RetrievalConfig, RunConfig, Budget
from bcas.grids import Grid, GridEntry, register_grid
from bcas.llm import register_backend
from bcas.testing.project import codename_items
register_backend("wrong_share", "bcas.testing.wrong_share:create")
kind, model, out, baseline, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
options = {}
if kind == "mock":
    items = Path(out).parent / "items.jsonl"
    if not items.exists():
        items.write_text("".join(json.dumps(r) + "\n" for r in codename_items(n)))
    dataset = str(items)
    entry = GridEntry("retrieve_read", RunConfig(budget=Budget(max_searches=1), retrieval=RetrievalConfig(mode="bm25")))
else:
    dataset = "triviaqa"
    entry = GridEntry("retrieve_read", RunConfig(budget=Budget(max_searches=1), retrieval=RetrievalConfig(mode="bm25")))
    if baseline != "-":  # the degraded prompt: the passages are left out of the answer template
        import bcas.prompts as prompts
        original = prompts.prompt_text
        def degraded(package, name):
            text = original(package, name)
            return text.replace("Passages:\n$passages\n\n", "").replace(", using the passages", "") \
                if name.startswith("retrieve_read/answer") else text
        prompts.prompt_text = degraded
        options["allow_mismatch"] = True
register_grid(Grid("seq_" + kind, (entry,), datasets=(dataset,), limit=n))
import bcas
if baseline != "-":
    options.update(baseline=baseline, gate_sequential=True, gate_new_model=True)
r = bcas.evaluate("seq_" + kind, model, limit=n, out=out, **options)
rows = [{"how": row.how, "verdict": row.verdict, "used": row.items_used, "n": row.n_paired,
         "base": row.baseline_acc, "cur": row.current_acc} for row in (r.gate.rows if r.gate else [])]
print(json.dumps({"records": len(r.records), "rows": rows}))
"""


def real_runs(items: int, folder: Path) -> list[str]:
    """The two gated runs of the module docstring, each in its own process; markdown lines."""
    import json
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "run_real.py"
    script.write_text(REAL_SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [
        ("mock", "mock:gold", "wrong_share:20", 200, "mock:gold vs wrong_share:20 (wrong on 20% of items)"),
        ("embedded", "embedded", "embedded", items, "embedded SmolLM2-135M vs itself, degraded prompt"),
    ]
    out = [
        "| run | paired items N | items run | sequential verdict | gate |",
        "|---|---:|---:|---|---|",
    ]
    for kind, base_model, model, n, title in runs:
        started = time.perf_counter()
        base = folder / f"{kind}-base"
        for spec, target, baseline in ((base_model, base, "-"), (model, folder / f"{kind}-current", str(base))):
            argv = [sys.executable, str(script), kind, spec, str(target), baseline, str(n)]
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{title}: the run failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        (row,) = result["rows"]
        took = time.perf_counter() - started
        print(f"{title}: {result['records']} records, {row['how']} ({took:.0f} s)")
        out.append(f"| {title} | {row['n']} | {result['records']} | {row['how']} | {row['verdict']} |")
    return out


def write_marked(path: Path, begin: str, end: str, body: str) -> None:
    text = path.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{path}: markers {begin} ... {end} not found")
    path.write_text(text[: text.index(begin)] + f"{begin}\n{body}\n{end}" + text[text.index(end) + len(end) :])
    print(f"written: {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="Monte Carlo runs per setting")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--share",
        type=float,
        default=DEFAULT_FALLBACK_SHARE,
        help="fallback share of alpha (--bcas-gate-fallback-share)",
    )
    parser.add_argument(
        "--sweep-runs", type=int, default=2000, help="runs per setting of the fallback-share comparison (0: none)"
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write the table into docs/measured.md and docs/gating.md"
    )
    parser.add_argument("--real", action="store_true", help="run the two real gated runs instead of the simulation")
    parser.add_argument("--real-items", type=int, default=40, help="items of the embedded model's run")
    parser.add_argument("--keep", type=Path, default=None, help="folder for the real runs (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.real:
        import tempfile

        from bench_latency import short_commit, write_section

        with tempfile.TemporaryDirectory() as tmp:
            lines = real_runs(args.real_items, args.keep or Path(tmp))
        print("\n".join(lines))
        if args.write_docs:
            head = (
                f"`bench_sequential_gate.py --real --real-items {args.real_items}` at {short_commit()}, "
                f"{datetime.date.today().isoformat()}, alpha 0.05, one case each (items run: the records the "
                "current run wrote; the rest were never run):"
            )
            write_section(
                "<!-- sequential-gate-runs:begin -->",
                "<!-- sequential-gate-runs:end -->",
                head + "\n\n" + "\n".join(lines),
                "Sequential gate on real runs",
            )
        return 0
    started = time.perf_counter()
    rows, design = measure(args.runs, args.alpha, args.seed, args.share)
    lines = table(rows, args.alpha) + [""] + design_table(design, args.alpha) + [""]
    lines += verdicts(rows, design, args.alpha)
    print("\n".join(lines), flush=True)
    shares = sweep(args.sweep_runs, args.alpha, args.seed) if args.sweep_runs else []
    took = time.perf_counter() - started
    print(f"{len(rows)} + {len(design)} rows x {args.runs} runs in {took:.0f} s; load average {os.getloadavg()[0]:.2f}")
    if args.write_docs:
        from bench_latency import short_commit, write_section

        head = (
            f"`bench_sequential_gate.py --runs {args.runs} --alpha {args.alpha:g} --share {args.share:g} "
            f"--sweep-runs {args.sweep_runs}` at {short_commit()}, {datetime.date.today().isoformat()} "
            "(simulation: the figures do not depend on the machine).  Per N: the fixed-n gate matched to the "
            "power the sequential gate reaches at N (capped at 0.99):"
        )
        body = head + "\n\n" + "\n".join(table(rows, args.alpha)) + "\n\n"
        body += (
            f"At the design point: the fixed-n gate's n for {DESIGN_POWER:.0%} power at that drop, against the "
            f"sequential gate whose N is the smallest with {DESIGN_POWER:.0%} power (N searched up to "
            f"{DESIGN_REACH:g} x n), its expected items under that drop; the last two columns are the same gate, "
            "same N, with no drop at the same discordance:\n\n" + "\n".join(design_table(design, args.alpha))
        )
        if shares:
            body += (
                f"\n\nThe fallback share (`--bcas-gate-fallback-share`), {args.sweep_runs} runs per setting:"
                "\n\n" + "\n".join(shares)
            )
        body += "\n\n" + "\n".join(f"- {v}" for v in verdicts(rows, design, args.alpha))
        write_section("<!-- sequential-gate:begin -->", "<!-- sequential-gate:end -->", body, "Sequential gate")
        write_marked(GATING, "<!-- sequential-gate:begin -->", "<!-- sequential-gate:end -->", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
