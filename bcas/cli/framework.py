"""One framework for every subcommand of ``bcas``: click, with one-line errors.

Every subcommand is a click command of the :class:`Group` (no subcommand keeps an
argument parser of its own), so the usage lines, the help pages, the answer to a
mistyped subcommand or option (the closest name: ``did you mean``) and the errors look
the same everywhere.  An error is one line on standard error, ``error: ...``, with exit
status 2 (a bad input) -- click's usage errors included, which click itself would print
over three lines.  A command checks its inputs before it creates anything: a bad input
leaves no file and no folder behind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click

from bcas.keys import key_name_problem
from bcas.registry import did_you_mean

F = TypeVar("F", bound=Callable[..., Any])


class BadInput(click.ClickException):
    """A bad input: one line on standard error, exit status 2."""

    exit_code = 2


def fail(exc: BaseException | str) -> NoReturn:
    """Stop the command with ``exc`` as its one line (a library error's own message)."""
    raise BadInput(one_line(str(exc))) from None


def one_line(text: str) -> str:
    """``text`` on one line: its lines joined by ``; `` (a library message may span several)."""
    return "; ".join(part.strip() for part in text.strip().splitlines() if part.strip())


class Group(click.Group):
    """A group whose unknown subcommand is answered with the closest name."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            hint = did_you_mean(name, self.list_commands(ctx))
            ctx.fail(f"No such command {name!r}{hint}; commands: {', '.join(self.list_commands(ctx))}")
        return super().resolve_command(ctx, args)


def key_env_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An option naming the environment variable that holds a key: a key itself is refused, never echoed."""
    problem = key_name_problem(value)
    if problem is not None:
        raise click.BadParameter(f"the value {problem}", ctx=ctx, param=param)
    return value


def sink_options(command: F) -> F:
    """``--<option> [TARGET]`` for each registered result sink (``--mlflow [URI]``), as under pytest."""
    from bcas.tracking import SINKS, sink_option

    for name in reversed(SINKS.names()):
        command = click.option(
            f"--{sink_option(name)}",
            f"sink_{name.replace('-', '_')}",
            is_flag=False,
            flag_value="",
            default=None,
            metavar="[TARGET]",
            help=str(SINKS.meta(name, "help")) + "; after the run folders (TARGET is optional)",  # pragma: no mutate
        )(command)
    return command


def chosen_sinks(options: dict[str, Any]) -> dict[str, str | None]:
    """The sinks chosen among a command's options (name -> target; ``None``: the default target)."""
    from bcas.tracking import SINKS

    chosen: dict[str, str | None] = {}
    for name in SINKS.names():
        value = options.get(f"sink_{name.replace('-', '_')}")
        if value is not None:
            chosen[name] = value or None
    return chosen


def run_group(group: click.Group, args: Sequence[str], prog: str) -> int:
    """Run ``group`` on ``args``; every error is one line on standard error; returns the exit status."""
    try:
        result = group.main(args=list(args), prog_name=prog, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # `bcas`, `bcas gate`: the group's help, as --help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else prog
        click.echo(f"error: {where}: {one_line(exc.format_message())}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"error: {one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        return 130
    except SystemExit as exc:  # bcas serve: the server's own parser
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return result if isinstance(result, int) else 0


__all__ = ["BadInput", "Group", "chosen_sinks", "fail", "key_env_name", "one_line", "run_group", "sink_options"]
