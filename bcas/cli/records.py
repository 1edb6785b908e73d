"""``bcas reprice``, ``bcas rejudge`` and ``bcas merge``: commands over stored records.

::

    bcas reprice RECORDS --prices SHEET      # costs under another price sheet
    bcas rejudge RUN --judge BACKEND:MODEL   # grades by another judge (answers are kept)
    bcas merge RUN [RUN ...] [--out DIR]     # worker files, shard runs, or RUN/shard-K-of-N/

The work is done by :mod:`bcas.records` (store, pricing), :mod:`bcas.rejudge` and
:mod:`bcas.harness.merge`; each command parses its arguments and prints one line per
error (``error: FILE:LINE: field ...``), exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bcas.harness.merge import find_shards, merge_runs
from bcas.records import (
    PriceError,
    PriceSheet,
    Record,
    RecordError,
    ResultStore,
    load_price_sheet,
    load_records,
    missing_price_note,
    reprice,
)
from bcas.rejudge import rejudge


def _summarise(before: Sequence[Record], after: Sequence[Record], sheet: PriceSheet) -> str:
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


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 2


def reprice_main(argv: Sequence[str] | None = None, prog: str = "bcas reprice") -> int:
    """Recompute record costs under another price sheet; the stored records are never rewritten."""
    parser = argparse.ArgumentParser(prog=prog, description="Recompute record costs under another price sheet.")
    parser.add_argument("records", help="a records*.jsonl file or a run folder")
    parser.add_argument(
        "--prices", required=True, help="price TOML path, PATH:NAME, or a sheet name in fixtures/prices.toml"
    )
    parser.add_argument("--sheet", default=None, help="sheet name inside the price file")
    parser.add_argument("--out", default=None, help="write the repriced records here (JSONL); never the input file")
    args = parser.parse_args(argv)
    try:
        sheet = load_price_sheet(args.prices, args.sheet)
        before = load_records(args.records)
        after = reprice(before, sheet)
        if args.out:
            out = Path(args.out)
            if out.exists() and Path(args.records).exists() and out.resolve() == Path(args.records).resolve():
                raise RecordError("--out must differ from the input: stored records are never rewritten")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(r.to_json() + "\n" for r in after), encoding="utf-8")
    except (PriceError, RecordError, ValueError) as exc:
        return _fail(exc)
    print(_summarise(before, after, sheet))
    return 0


def rejudge_main(argv: Sequence[str] | None = None, prog: str = "bcas rejudge") -> int:
    """Grade recorded answers with another judge (answers are not regenerated)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Grade recorded answers with another judge (answers are not regenerated)."
    )
    parser.add_argument("run_dir", help="a run folder")
    parser.add_argument("--judge", required=True, help="BACKEND:MODEL, e.g. openai:gpt-4o-mini, embedded, mock:gold")
    parser.add_argument("--judge-base-url", default=None, help="the judge server's /v1 URL (openai backend)")
    parser.add_argument("--api-key-env", default=None, help="NAME of the environment variable holding the judge's key")
    parser.add_argument("--repeats", type=int, default=1, help="ask the judge this many times per answer")
    parser.add_argument(
        "--three-way",
        action="store_true",
        help="grade correct / incorrect / not attempted (SimpleQA; its own grade id)",
    )
    parser.add_argument("--no-cache", action="store_true", help="disable the generation cache")
    args = parser.parse_args(argv)
    try:
        if args.repeats < 1:
            raise RecordError(f"--repeats must be >= 1, got {args.repeats}")
        summary = rejudge(
            args.run_dir,
            args.judge,
            base_url=args.judge_base_url,
            api_key_env=args.api_key_env,
            repeats=args.repeats,
            cache=not args.no_cache,
            three_way=args.three_way,
        )
    except (PriceError, RecordError, ValueError) as exc:
        return _fail(exc)
    print("\n".join(summary.lines()))
    return 0


def merge_main(argv: Sequence[str] | None = None, prog: str = "bcas merge") -> int:
    """Merge per-worker record files, or join the shard runs of a ``--bcas-shard`` run."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Merge per-worker records.<worker>.jsonl files into records.jsonl; with several run folders "
        "(the shards of a --bcas-shard run) and --out, join them into one run; a run folder holding "
        "shard-K-of-N folders (--bcas-shard auto) is joined into itself.",
    )
    parser.add_argument(
        "run_dir", nargs="+", help="a run folder, a folder of shard-K-of-N folders, or several with --out"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="the new run folder that joins the given ones (records, run.json, summaries and report)",
    )
    parser.add_argument(
        "--partial", action="store_true", help="join the shards there are when some are missing (they are named)"
    )
    parser.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="join shards whose manifests disagree (bcas version, grids, options, model fingerprints, "
        "dataset hashes, price sheet); the differences are written into the merged run.json",
    )
    parser.add_argument("--keep", action="store_true", help="keep the worker files (one run folder, no --out)")
    args = parser.parse_args(argv)
    try:
        if args.out is None and len(args.run_dir) > 1:
            raise RecordError("merging several run folders writes a new one: give --out DIR")
        if args.out is None and not find_shards(Path(args.run_dir[0])):
            print(ResultStore(args.run_dir[0]).merge(remove_worker_files=not args.keep))
            return 0
        merged = merge_runs(args.run_dir, args.out, partial=args.partial, allow_mismatch=args.allow_mismatch)
    except (PriceError, RecordError, ValueError) as exc:
        return _fail(exc)
    print("\n".join(merged.lines()))
    return 0
