"""The commands over stored records: ``merge``, ``compare``, ``report``, ``rejudge``, ``reprice``.

::

    bcas merge RUN [RUN ...] [--out DIR]     # worker files, shard runs, or RUN/shard-K-of-N/
    bcas compare RUN_A RUN_B [--html OUT]    # paired comparison (bcas.report.compare)
    bcas report RUN [RUN ...] [--mlflow]     # summaries, index.html, parquet (and sinks) from the records
    bcas rejudge RUN --judge BACKEND:MODEL   # grades by another judge, then the report
    bcas reprice RUN --prices SHEET          # costs under another sheet, then the report

The work is done by :mod:`bcas.records` (store, pricing), :mod:`bcas.rejudge`,
:mod:`bcas.harness.merge` and :mod:`bcas.run.rebuild`; a command that changes records
ends with the rebuild (``--no-report`` skips it), so every view agrees with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bcas.cli.framework import BadInput, chosen_sinks, fail, key_env_name, sink_options

if TYPE_CHECKING:
    from bcas.records import PriceSheet, Record


def input_errors() -> tuple[type[Exception], ...]:
    """What a bad input raises below the command: each is one line, exit status 2 (imported when
    a command runs, so ``bcas --help`` starts at once)."""
    from bcas.llm.base import ModelError
    from bcas.llm.preflight import PreflightError
    from bcas.records import PriceError, RecordError
    from bcas.registry import RegistryError
    from bcas.tracking import SinkError

    return (PriceError, RecordError, RegistryError, ModelError, PreflightError, SinkError, ValueError, OSError)


def _rebuild(run_dir: Path, sinks: dict[str, str | None]) -> None:
    from bcas.run.rebuild import rebuild_run

    try:
        click.echo("\n".join(rebuild_run(run_dir, sinks).lines()))
    except input_errors() as exc:
        fail(exc)


@click.command(
    "report",
    short_help="Rebuild the summaries, report and parquet from the records.",  # pragma: no mutate
    help="Rebuild summary.json/csv, index.html and records.parquet of run folders from their records, "  # pragma: no mutate
    "with no model call; with --mlflow, publish them too.",  # pragma: no mutate
)
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@sink_options
def report(runs: Sequence[str], **options: Any) -> int:
    from bcas.records import RecordError
    from bcas.run.rebuild import check_run_folder

    folders = []
    for run in runs:  # every folder is checked before any is written
        try:
            folders.append(check_run_folder(run))
        except RecordError as exc:
            fail(exc)
    for folder in folders:
        _rebuild(folder, chosen_sinks(options))
    return 0


@click.command(
    "rejudge",
    short_help="Grade recorded answers with another judge.",  # pragma: no mutate
    help="Grade recorded answers with another judge (answers are not regenerated).",  # pragma: no mutate
)
@click.argument("run_dir", metavar="RUN")
@click.option(
    "--judge",
    required=True,
    metavar="BACKEND:MODEL",
    help="the judge, e.g. openai:gpt-4o-mini, embedded, mock:gold",  # pragma: no mutate
)
@click.option(
    "--judge-base-url",
    default=None,
    metavar="URL",
    help="the judge server's /v1 URL (openai backend)",  # pragma: no mutate
)
@click.option(
    "--api-key-env",
    default=None,
    metavar="NAME",
    callback=key_env_name,
    help="NAME of the environment variable holding the judge's key (never the key itself)",  # pragma: no mutate
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="ask the judge this many times per answer",  # pragma: no mutate
)
@click.option(
    "--three-way",
    is_flag=True,
    help="grade correct / incorrect / not attempted (SimpleQA; its own grade id)",  # pragma: no mutate
)
@click.option("--no-cache", is_flag=True, help="disable the generation cache")  # pragma: no mutate
@click.option("--no-report", is_flag=True, help="leave the summaries and the report as they are")  # pragma: no mutate
@sink_options
def rejudge(
    run_dir: str,
    judge: str,
    judge_base_url: str | None,
    api_key_env: str | None,
    repeats: int,
    three_way: bool,
    no_cache: bool,
    no_report: bool,
    **options: Any,
) -> int:
    from bcas.rejudge import rejudge as regrade

    if judge_base_url is not None and not judge_base_url.startswith(("http://", "https://")):
        fail("--judge-base-url: expected an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")
    try:
        summary = regrade(
            run_dir,
            judge,
            base_url=judge_base_url,
            api_key_env=api_key_env,
            repeats=repeats,
            cache=not no_cache,
            three_way=three_way,
        )
    except input_errors() as exc:
        fail(exc)
    click.echo("\n".join(summary.lines()))
    if summary.graded:
        from bcas.run.manifest import record_command

        record_command(Path(run_dir), "bcas rejudge", {"judge": summary.manifest_entry()}, summary.graded)
    if not no_report:
        _rebuild(Path(run_dir), chosen_sinks(options))
    return 0


def _summarise(before: Sequence[Record], after: Sequence[Record], sheet: PriceSheet) -> str:
    from bcas.records import missing_price_note

    groups: dict[tuple[str, str], list[tuple[Record, Record]]] = {}
    for old, new in zip(before, after, strict=True):
        groups.setdefault((old.label or old.config_id, old.model), []).append((old, new))
    lines = [f"price sheet: {sheet.name}", f"{'config':<28} {'model':<32} {'n':>5} {'old $':>12} {'new $':>12}"]
    for (label, model), pairs in sorted(groups.items()):
        olds = [o.cost_usd for o, _ in pairs]
        old_total = "n/a" if any(c is None for c in olds) else f"{sum(olds):.6f}"  # type: ignore[arg-type]
        news = [n.cost_usd for _, n in pairs]
        new_total = "n/a" if any(c is None for c in news) else f"{sum(news):.6f}"  # type: ignore[arg-type]
        lines.append(f"{label:<28} {model:<32} {len(pairs):>5} {old_total:>12} {new_total:>12}")
    priced = [n.cost_usd for n in after if n.cost_usd is not None]
    unpriced = sorted({n.model for n in after if n.cost_usd is None})
    lines.append(f"total: {sum(priced):.6f} USD over {len(priced)} of {len(after)} records")
    for model in unpriced:
        lines.append(missing_price_note(model, sheet.name))
    return "\n".join(lines)


def _record_sheet(run_dir: Path, prices: str, sheet: str | None, changed: int) -> None:
    """run.json: the sheet the records are now priced under (the report's "Run" section shows it)."""
    from bcas.records.pricing import price_source
    from bcas.run.manifest import file_sha256, record_command

    path, name = price_source(prices, sheet)
    entry = {"path": str(path), "sheet": name, "sha256": file_sha256(path)}
    record_command(run_dir, "bcas reprice", {"price_sheet": entry}, changed)


@click.command(
    "reprice",
    short_help="Price the records under another price sheet.",  # pragma: no mutate
    help="Recompute record costs under another price sheet. A run folder's records are priced anew "  # pragma: no mutate
    "(each changed record is appended again, the newest version wins) and its report rebuilt; "  # pragma: no mutate
    "with --out, or given a records file, the repriced records are written there or printed only.",  # pragma: no mutate
)
@click.argument("records", metavar="RUN|RECORDS")
@click.option(
    "--prices",
    required=True,
    metavar="SHEET",
    help="price TOML path, PATH:NAME, or a sheet name in fixtures/prices.toml",  # pragma: no mutate
)
@click.option("--sheet", default=None, help="sheet name inside the price file")  # pragma: no mutate
@click.option(
    "--out",
    default=None,
    metavar="FILE",
    help="write the repriced records here (JSONL) and leave the run as it is; never the input file",  # pragma: no mutate
)
@click.option("--no-report", is_flag=True, help="leave the summaries and the report as they are")  # pragma: no mutate
@sink_options
def reprice_command(
    records: str, prices: str, sheet: str | None, out: str | None, no_report: bool, **options: Any
) -> int:
    from bcas.records import RecordError, ResultStore, load_price_sheet, load_records
    from bcas.records import reprice as reprice_records
    from bcas.run.rebuild import check_run_folder

    source = Path(records)
    try:
        price_sheet = load_price_sheet(prices, sheet)
        if source.is_dir():
            check_run_folder(source)
        elif not source.is_file():
            raise RecordError(f"{source}: no such run folder or records file")
        stored = source / "records.jsonl" if source.is_dir() else source
        if out is not None and Path(out).resolve() in (source.resolve(), stored.resolve()):
            raise RecordError("--out must differ from the input: stored records are never rewritten")
        before = load_records(source)
        after = reprice_records(before, price_sheet)
    except input_errors() as exc:
        fail(exc)
    if out is not None:
        target = Path(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(r.to_json() + "\n" for r in after), encoding="utf-8")
    elif source.is_dir():
        changed = [new for old, new in zip(before, after, strict=True) if new.to_dict() != old.to_dict()]
        ResultStore(source).extend(changed)
        if changed:
            _record_sheet(source, prices, sheet, len(changed))
    click.echo(_summarise(before, after, price_sheet))
    if source.is_dir() and out is None and not no_report:
        _rebuild(source, chosen_sinks(options))
    return 0


reprice = reprice_command


@click.command(
    "merge",
    short_help="Merge worker record files, or join the shard runs of one run.",  # pragma: no mutate
    help="Merge per-worker records.<worker>.jsonl files into records.jsonl; with several run folders "  # pragma: no mutate
    "(the shards of a --bcas-shard run) and --out, join them into one run; a run folder holding "  # pragma: no mutate
    "shard-K-of-N folders (--bcas-shard auto) is joined into itself.",  # pragma: no mutate
)
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN...")
@click.option(
    "--out",
    default=None,
    metavar="DIR",
    help="the new run folder that joins the given ones (records, run.json, summaries and report)",  # pragma: no mutate
)
@click.option(
    "--partial",
    is_flag=True,
    help="join the shards there are when some are missing (they are named)",  # pragma: no mutate
)
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="join shards whose manifests disagree (bcas version, grids, options, model fingerprints, "  # pragma: no mutate
    "dataset hashes, price sheet); the differences are written into the merged run.json",  # pragma: no mutate
)
@click.option("--keep", is_flag=True, help="keep the worker files (one run folder, no --out)")  # pragma: no mutate
def merge(run_dirs: Sequence[str], out: str | None, partial: bool, allow_mismatch: bool, keep: bool) -> int:
    from bcas.harness.merge import find_shards, merge_runs
    from bcas.records import RecordError, ResultStore

    for run in run_dirs:  # nothing is created for a folder that is not there
        if not Path(run).is_dir():
            fail(f"{run}: no such run folder")
    try:
        if out is None and len(run_dirs) > 1:
            raise RecordError("merging several run folders writes a new one: give --out DIR")
        if out is None and not find_shards(Path(run_dirs[0])):
            click.echo(ResultStore(run_dirs[0]).merge(remove_worker_files=not keep))
            return 0
        merged = merge_runs(list(run_dirs), out, partial=partial, allow_mismatch=allow_mismatch)
    except input_errors() as exc:
        fail(exc)
    click.echo("\n".join(merged.lines()))
    return 0


def _metric_names() -> list[str]:
    from bcas.grading.outcomes import METRICS
    from bcas.metrics.values import VALUES

    return ["em", "judge", *METRICS.names(), *VALUES.names()]


class _Metric(click.ParamType[str]):
    """``--metric``: one of the registered names (read when used: plugins may add some)."""

    name = "metric"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from bcas.registry import did_you_mean

        names = _metric_names()
        if value not in names:
            self.fail(f"{value!r} is no metric{did_you_mean(str(value), names)}; known: {', '.join(names)}", param, ctx)
        return str(value)


@click.command(
    "compare",
    help="Compare two runs item by item (paired statistics); with --report DIR, combine two or more runs "  # pragma: no mutate
    "of different models into one report.",  # pragma: no mutate
)
@click.argument("runs", nargs=-1, required=True, metavar="RUN_A RUN_B [RUN ...]")
@click.option("--html", default=None, metavar="OUT", help="write the comparison page here")  # pragma: no mutate
@click.option(
    "--report",
    default=None,
    metavar="DIR",
    help="combine the runs (two or more, of different models) into one run folder DIR with the usual "  # pragma: no mutate
    "report: every two models paired on the same configuration and items",  # pragma: no mutate
)
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="compare even when model fingerprints, dataset hashes or prompt hashes differ",  # pragma: no mutate
)
@click.option(
    "--metric",
    type=_Metric(),
    default="em",
    show_default=True,
    help="outcome compared: exact match, the recorded judge verdict, a registered pass/fail metric "  # pragma: no mutate
    "(McNemar) or a registered value metric such as f1, evidence_recall, cost_usd, tokens (paired bootstrap)",  # pragma: no mutate
)
def compare(runs: Sequence[str], html: str | None, report: str | None, allow_mismatch: bool, metric: str) -> int:
    from bcas.report.compare import compare_command, runs_error

    for run in runs:
        if not Path(run).exists():
            fail(f"{run}: no such run folder or records file")
    if (problem := runs_error(len(runs), report is not None)) is not None:
        raise BadInput(problem)
    if report is not None:  # two or more runs into one run folder with the usual report
        from bcas.records import RecordError
        from bcas.run.combine import combine_runs

        try:
            combined = combine_runs(list(runs), report, allow_mismatch)
        except (OSError, RecordError) as exc:
            fail(exc)
        click.echo("\n".join(combined.lines()))
        return 0
    return compare_command(runs, html=html, allow_mismatch=allow_mismatch, metric=metric)


__all__ = ["compare", "merge", "rejudge", "report", "reprice"]
