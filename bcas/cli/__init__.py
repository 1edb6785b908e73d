"""The ``bcas`` command: one installed command whose subcommands call the library.

::

    bcas merge RUN [RUN ...] [--out DIR]      bcas compare RUN_A RUN_B
    bcas rejudge RUN --judge BACKEND:MODEL    bcas reprice RECORDS --prices SHEET
    bcas gate write RUN OUT.json              bcas gate power
    bcas data check [NAME|PATH ...]           bcas models [convert]
    bcas serve --model FILE.gguf --port N     bcas index evaluate | milvus

Grids run under pytest (``pytest benchmarks --bcas-grid smoke``); this command handles
what comes before and after a run.  Each subcommand keeps its module's own argument
parser, so ``bcas SUB --help`` lists its options and a bad input is one line on standard
error (``error: FILE:LINE: field ...``) with exit status 2.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

import click

# name -> (one-line help, "module:function"); the function takes (argv, prog) and returns an exit status.
LEAVES: dict[tuple[str, ...], tuple[str, str]] = {
    ("merge",): ("Merge worker record files, or join the shard runs of one run.", "bcas.cli.records:merge_main"),
    ("rejudge",): ("Grade recorded answers with another judge.", "bcas.cli.records:rejudge_main"),
    ("reprice",): ("Recompute record costs under another price sheet.", "bcas.cli.records:reprice_main"),
    ("compare",): ("Compare two runs item by item (paired statistics).", "bcas.report.compare:main"),
    ("latency",): (
        "Throughput against p95 latency by concurrency level.",
        "bcas.report.latency_runs:main",
    ),
    ("gate", "write"): ("Write a baseline file from a run folder.", "bcas.gating.baseline:write_main"),
    ("gate", "power"): ("Print what the gate can detect by paired items.", "bcas.gating.power:main"),
    ("data", "check"): ("Count items and documents and hash datasets.", "bcas.data:main"),
    ("models", "convert"): ("Convert a GGUF model into a checkpoint vLLM loads.", "bcas.llm.convert:main"),
    ("serve",): ("Start a llama.cpp server (the arguments of llama_cpp.server).", "bcas.cli.serve:serve_main"),
    ("index", "evaluate"): ("Build retrieval indexes and measure recall.", "bcas.retrieval.evaluate:main"),
    ("index", "milvus"): ("Start a Milvus Lite server for the search engine.", "bcas.retrieval.milvus_lite:main"),
}
GROUPS = {
    "gate": "The regression gate's baseline files.",
    "data": "Datasets.",
    "index": "Retrieval indexes.",
}


def _target(spec: str) -> Callable[[list[str], str], int]:
    module, attr = spec.split(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def _leaf(path: tuple[str, ...], help_line: str, spec: str) -> click.Command:
    """A subcommand that hands its arguments, ``--help`` included, to the module's own parser."""

    def run(args: tuple[str, ...]) -> None:
        raise SystemExit(_target(spec)(list(args), "bcas " + " ".join(path)))

    return click.Command(
        path[-1],
        callback=run,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=help_line,
        short_help=help_line,
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    )


@click.group(
    help="Before and after a bcas run: merge, compare, gate, rejudge, reprice, data, models, serve, index. "
    "Grids run under pytest: pytest benchmarks --bcas-grid smoke.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
def cli() -> None:
    """The group; its subcommands are added below."""


@click.group("models", invoke_without_command=True, help="The shipped GGUF model's path and the model backends.")
@click.option("--gguf", "gguf_only", is_flag=True, help="print only the shipped GGUF's path (for bcas serve --model)")
@click.pass_context
def models(ctx: click.Context, gguf_only: bool) -> None:
    if ctx.invoked_subcommand is None:
        from bcas.cli.models import models_lines

        try:
            lines = models_lines()[:1] if gguf_only else models_lines()
            if gguf_only:
                lines = [lines[0].removeprefix("shipped GGUF: ")]
        except Exception as exc:  # noqa: BLE001 - any failure to locate the model is one line
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(2) from None
        click.echo("\n".join(lines))


def _build() -> click.Group:
    groups: dict[str, click.Group] = {"models": models}
    cli.add_command(models)
    for path, (help_line, spec) in LEAVES.items():
        parent: click.Group = cli
        if len(path) == 2:
            if path[0] not in groups:
                groups[path[0]] = click.Group(path[0], help=GROUPS[path[0]])
                cli.add_command(groups[path[0]])
            parent = groups[path[0]]
        parent.add_command(_leaf(path, help_line, spec))
    return cli


_build()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``bcas`` with ``argv`` (default: the process's arguments); returns the exit status."""
    try:
        cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="bcas", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        return 130
    return 0
