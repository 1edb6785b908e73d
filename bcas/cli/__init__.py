"""The ``bcas`` command: one installed command whose subcommands call the library.

::

    bcas merge RUN [RUN ...] [--out DIR]      bcas compare RUN_A RUN_B
    bcas rejudge RUN --judge BACKEND:MODEL    bcas reprice RUN|RECORDS --prices SHEET
    bcas report RUN [RUN ...]                 bcas gate write RUN OUT.json
    bcas latency RUN_DIR [RUN_DIR ...]        bcas view RUN_DIR... | FOLDER [--serve]
    bcas figures RUN_DIR [--format svg|pdf|png]
    bcas gate power                           bcas data check [NAME|PATH ...]
    bcas models [convert]                     bcas serve --model FILE.gguf --port N
    bcas index evaluate | milvus

Grids run under pytest (``pytest benchmarks --bcas-grid smoke``); this command handles
what comes before and after a run.  Every subcommand is declared in click
(:mod:`bcas.cli.framework`), so ``bcas SUB --help`` prints one style of usage line, a
mistyped subcommand or option is answered with the closest name, and a bad input is one
line on standard error (``error: FILE:LINE: field ...``) with exit status 2, before
anything is created.  ``bcas serve`` alone hands its arguments to llama.cpp's server.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from bcas.cli.figures import figures
from bcas.cli.framework import Group, run_group
from bcas.cli.inputs import data, gate
from bcas.cli.latency import latency
from bcas.cli.models import models
from bcas.cli.records import compare, merge, rejudge, report, reprice
from bcas.cli.serve import index, serve
from bcas.cli.view import view


@click.group(
    cls=Group,
    help="Before and after a bcas run: merge, compare, report, figures, latency, rejudge, reprice, gate, data, models, "  # pragma: no mutate
    "serve, index, view. Grids run under pytest: pytest benchmarks --bcas-grid smoke.",  # pragma: no mutate
    context_settings={"help_option_names": ["-h", "--help"]},
)
def cli() -> None:
    """The group; its subcommands are added below."""


for _command in (merge, compare, report, figures, latency, rejudge, reprice, gate, data, models, serve, index, view):
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``bcas`` with ``argv`` (default: the process's arguments); returns the exit status."""
    return run_group(cli, list(sys.argv[1:] if argv is None else argv), "bcas")


__all__ = ["cli", "main"]
