"""``bcas gate write|power`` and ``bcas data check``: the gate's baseline files and the datasets.

::

    bcas gate write RUN OUT.json     # a baseline file from a run folder (bcas.gating.baseline)
    bcas gate power                  # what the gate can detect by paired items (bcas.gating.power)
    bcas data check [NAME|PATH ...]  # item and document counts and content hash (bcas.data)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from bcas.cli.framework import Group, fail


@click.group("gate", cls=Group, help="The regression gate's baseline files.")  # pragma: no mutate
def gate() -> None:
    """The gate's subcommands."""


@gate.command("write", help="Write a baseline file from a run folder or records file.")  # pragma: no mutate
@click.argument("run", metavar="RUN")
@click.argument("out", metavar="OUT.json")
def gate_write(run: str, out: str) -> int:
    from bcas.gating.baseline import write_baseline_file
    from bcas.gating.errors import GateError

    if not Path(run).exists():
        fail(f"{run}: no such run folder or records file")
    try:
        click.echo(write_baseline_file(run, out))
    except GateError as exc:
        fail(exc)
    return 0


def _numbers(option: str, text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{option}: expected whole numbers separated by commas, e.g. 10,50,100")
    if not values or min(values) < 1:
        fail(f"{option}: expected whole numbers >= 1 separated by commas, e.g. 10,50,100")
    return values


@gate.command(
    "power",
    help="Print what the regression gate can detect, by paired items and family size.",  # pragma: no mutate
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="the gate's significance level",  # pragma: no mutate
)
@click.option(
    "--cases",
    default="1,7,30",
    show_default=True,
    help="gated cases per Holm family, comma-separated",  # pragma: no mutate
)
@click.option(
    "--n",
    "sizes",
    default="5,10,20,30,50,100,200,300,500,1000",
    show_default=True,
    help="paired items, comma-separated",  # pragma: no mutate
)
@click.option(
    "--p-better",
    type=click.FloatRange(0, 1),
    default=0.05,
    show_default=True,
    help="share of items flipping to correct in the power table",  # pragma: no mutate
)
@click.option("--tango-size", is_flag=True, help="also print the tolerance test's exact size")  # pragma: no mutate
@click.option(
    "--sequential",
    "drops",
    default=None,
    metavar="PTS[,PTS...]",
    help="instead: how many items a sequential gate (--bcas-gate-sequential) needs for these drops, "  # pragma: no mutate
    "simulated on each --n with --discordance",
)
@click.option(
    "--discordance",
    type=click.FloatRange(0, 100, min_open=True),
    default=20.0,
    show_default=True,
    help="with --sequential: percent of items the two runs disagree on",  # pragma: no mutate
)
@click.option(
    "--fallback-share",
    type=click.FloatRange(0, 1, max_open=True),
    default=None,
    help="with --sequential: share of alpha the fixed-n test at N keeps, as --bcas-gate-fallback-share "  # pragma: no mutate
    "(default: the gate's default)",
)
def gate_power(
    alpha: float,
    cases: str,
    sizes: str,
    p_better: float,
    tango_size: bool,
    drops: str | None,
    discordance: float,
    fallback_share: float | None,
) -> int:
    from bcas.gating.power import power_tables, sequential_lines, tango_size_lines

    families, counts = _numbers("--cases", cases), _numbers("--n", sizes)
    if drops is not None:
        points = [float(x) for x in _numbers("--sequential", drops)]
        for family in families:
            lines = (
                sequential_lines(alpha, points, discordance, counts, family)
                if fallback_share is None
                else sequential_lines(alpha, points, discordance, counts, family, share=fallback_share)
            )
            click.echo("\n".join(lines) + "\n")
        return 0
    click.echo(power_tables(alpha, families, counts, p_better))
    if tango_size:
        click.echo("\n".join(tango_size_lines(alpha)))
    return 0


@click.group("data", cls=Group, help="Datasets.")  # pragma: no mutate
def data() -> None:
    """The datasets' subcommands."""


@data.command(
    "check",
    help="Item count, document count and content hash of datasets (every registered one by default): "  # pragma: no mutate
    "a registered name, a file whose layout is detected, or FORMAT:PATH (see --formats).",  # pragma: no mutate
)
@click.argument("datasets", nargs=-1, metavar="[NAME|PATH|FORMAT:PATH]...")
@click.option("--formats", is_flag=True, help="list the dataset formats FORMAT:PATH accepts")  # pragma: no mutate
def data_check(datasets: Sequence[str], formats: bool) -> int:
    from bcas.data import DatasetError, check_lines, format_lines

    if formats:
        click.echo("\n".join(format_lines()))
        return 0
    try:
        click.echo("\n".join(check_lines(list(datasets) or None)))
    except DatasetError as exc:
        fail(exc)
    return 0


__all__ = ["data", "gate"]
