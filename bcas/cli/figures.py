"""``bcas figures RUN_DIR --format pdf``: every figure of a run's report as a file for a paper.

The figures are the Vega-Lite specs the page draws (:mod:`bcas.report.vega`), converted by
vl-convert with no network: one ``NAME.svg``, ``.pdf``, ``.png`` or ``.json`` (the spec) per
figure, under the run's ``figures/`` unless ``--out`` says where."""

from __future__ import annotations

import click

from bcas.cli.framework import fail


@click.command(
    "figures",
    short_help="Export the figures of a run's report as SVG, PDF or PNG.",  # pragma: no mutate
    help="Write every figure of a run's report (RUN_DIR/index.html, or a page written by bcas compare --html "  # pragma: no mutate
    "or bcas latency --out) as one file each, under RUN_DIR/figures/ unless --out says where.",  # pragma: no mutate
)
@click.argument("source", metavar="RUN_DIR|PAGE.html")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["svg", "pdf", "png", "json"]),
    default="svg",
    show_default=True,
    help="svg, pdf, png, or json (the Vega-Lite spec)",  # pragma: no mutate
)
@click.option(
    "--out", default=None, metavar="DIR", help="the folder to write into (default: figures/ beside the page)"
)  # pragma: no mutate
def figures(source: str, fmt: str, out: str | None) -> int:
    from bcas.report.vega import write_figures

    try:
        written = write_figures(source, fmt, out)
    except (ValueError, OSError) as exc:
        fail(exc)
    for path in written:
        click.echo(str(path))
    click.echo(f"{len(written)} figure{'s' if len(written) != 1 else ''} written ({fmt})")
    return 0


__all__ = ["figures"]
