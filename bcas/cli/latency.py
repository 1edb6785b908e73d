"""``bcas latency RUN_DIR...``: throughput against p95 latency of the same cases run at several
concurrency levels, one run folder per level (:mod:`bcas.report.latency_runs`, BCAS §6.1)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from bcas.cli.framework import fail


@click.command(
    "latency",
    help="Throughput against p95 latency of the same cases run at several concurrency levels, "  # pragma: no mutate
    "one run folder per level (--bcas-concurrency N --bcas-no-cache --bcas-report DIR).",  # pragma: no mutate
)
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option(
    "--out", default=None, metavar="FILE.html", help="also write the table and the knee figure as a page"
)  # pragma: no mutate
def latency(run_dirs: Sequence[str], out: str | None) -> int:
    from bcas.report.latency_runs import latency_runs

    for run in run_dirs:  # every folder is checked before anything is written
        if not (Path(run) / "records.jsonl").is_file():
            fail(f"{run}: no records.jsonl (not a run folder)")
    if out and not Path(out).parent.is_dir():
        fail(f"--out {out}: no such folder {Path(out).parent}")
    try:
        click.echo("\n".join(latency_runs(run_dirs, out)))
    except ValueError as exc:
        fail(exc)
    return 0


__all__ = ["latency"]
