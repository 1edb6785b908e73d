"""The append-only, multi-process-safe results store of one run.

Store layout: ``reports/<run>/records.jsonl`` (or ``records.<worker>.jsonl`` per
pytest-xdist worker, merged by :meth:`ResultStore.merge`).  Every append is one
``write`` of complete JSON lines (one record's, or those of the records that finished
together: :meth:`ResultStore.append_many`), then flush and ``fsync``, under an exclusive
``fcntl`` lock on ``<run>/.records.lock``, so several processes may append to the
same file.  A process killed mid-write can leave a torn last line (no newline, or
not JSON); opening a store for writing detects it, reports it (``logging`` warning
and :attr:`ResultStore.repaired`) and truncates it away; readers skip it.
:meth:`ResultStore.done_keys` lets a rerun skip what is already recorded (by answer
identity); a run folder holding 0.1.0 records is refused for writing
(:meth:`ResultStore.check_writable`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bcas.records.schema import Key, Record, RecordError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas

log = logging.getLogger(__name__)

RECORDS_FILE = "records.jsonl"
LOCK_FILE = ".records.lock"
_WORKER_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _parse_lines(path: Path, data: bytes) -> tuple[list[Record], str | None]:
    """Records of a JSONL payload; a torn last line is returned as a warning, not parsed."""
    records: list[Record] = []
    torn: str | None = None
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    if tail.strip():
        torn = f"{path}:{len(complete) + 1}: torn last line without newline ({len(tail)} bytes) skipped"
    for number, raw in enumerate(complete, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise RecordError(f"expected a JSON object, got {type(obj).__name__}")
            records.append(Record.from_dict(obj))
        except (json.JSONDecodeError, RecordError, TypeError) as exc:
            why = f"not valid JSON ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else str(exc)
            if number == len(complete) and torn is None:
                # a damaged last line is what a killed writer leaves: skip it, never parse it
                torn = f"{path}:{number}: torn last line ({why}) skipped"
                continue
            raise RecordError(f"{path}:{number}: {why}; the file is damaged") from None
    return records, torn


def read_records_file(path: str | os.PathLike[str]) -> list[Record]:
    """Every record of one JSONL file, in file order (a torn last line is skipped with a warning)."""
    p = Path(path)
    records, torn = _parse_lines(p, p.read_bytes())
    if torn:
        log.warning(torn)
    return records


def record_files(folder: str | os.PathLike[str]) -> list[Path]:
    """``records.jsonl`` then the per-worker ``records.<worker>.jsonl`` files of a run folder."""
    root = Path(folder)
    main = root / RECORDS_FILE
    workers = sorted(p for p in root.glob("records.*.jsonl") if p.name != RECORDS_FILE)
    return ([main] if main.exists() else []) + workers


def dedupe(records: Iterable[Record]) -> list[Record]:
    """One record per answer identity (``Record.key``), in order of first appearance.

    The last record without an error wins (a re-graded answer is appended again with
    its new grade, so the newest version carries every grade); a key with only error
    records keeps the last of them (a retried item replaces its failure).
    """
    chosen: dict[Key, Record] = {}
    for rec in records:
        current = chosen.get(rec.key)
        if current is None or current.error is not None or rec.error is None:
            chosen[rec.key] = rec
    return list(chosen.values())


def load_records(path: str | os.PathLike[str], *, deduplicate: bool = True) -> list[Record]:
    """Records of a ``records*.jsonl`` file or of every such file in a run folder."""
    p = Path(path)
    if p.is_dir():
        files = record_files(p)
        if not files:
            raise RecordError(f"{p} holds no records*.jsonl files")
    elif p.is_file():
        files = [p]
    else:
        raise RecordError(f"{p} does not exist")
    records = [r for f in files for r in read_records_file(f)]
    return dedupe(records) if deduplicate else records


def to_dataframe(path: str | os.PathLike[str] | Sequence[Record]) -> pandas.DataFrame:
    """A pandas DataFrame of records (one row each) from a path or a list of records.

    Scalar fields become columns; ``config``, ``judge``, ``steps`` and ``extra`` stay
    as objects; ``n_steps`` and ``judge_agreement`` are added for convenience.
    ``cost_usd`` stays missing (NaN) where the price sheet could not price a record.
    ``path``: a ``records*.jsonl`` file or a run folder (``records.parquet`` there holds
    the same rows with the nested fields as JSON text, for tools without bcas).

    Example: accuracy, searches and cost per model and configuration of a run::

        from bcas.records import to_dataframe

        df = to_dataframe("reports/smoke")
        df.groupby(["model", "dataset", "label"]).agg(
            n=("item_id", "nunique"), em=("correct_em", "mean"),
            searches=("searches_used", "mean"), cost=("cost_usd", "sum"))
    """
    import pandas as pd

    records = list(path) if not isinstance(path, str | os.PathLike) else load_records(path)
    rows = []
    for rec in records:
        row = rec.to_dict()
        row["n_steps"] = len(rec.steps)
        row["judge_agreement"] = (rec.judge or {}).get("agreement")
        rows.append(row)
    columns = [f.name for f in dataclasses.fields(Record)] + ["n_steps", "judge_agreement"]
    return pd.DataFrame(rows, columns=columns)


# -- the store ---------------------------------------------------------------------------


class ResultStore:
    """Append-only, multi-process-safe JSONL store of one run (``reports/<run>/``).

    ``worker``: write to ``records.<worker>.jsonl`` instead of ``records.jsonl``
    (one file per pytest-xdist worker; :meth:`merge` folds them together).
    Opening the store repairs a torn last line of the file it writes to.
    """

    def __init__(self, root: str | os.PathLike[str], worker: str | None = None) -> None:
        self.root = Path(root)
        if worker is not None and not _WORKER_NAME.match(worker):
            raise ValueError(f"worker name {worker!r} may hold only letters, digits, '_', '.', '-'")
        self.worker = worker
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = self.root / (RECORDS_FILE if worker is None else f"records.{worker}.jsonl")
        self.repaired: list[str] = []
        self.repair()

    @contextlib.contextmanager
    def lock(self, shared: bool = False) -> Iterator[None]:
        """The run folder's ``fcntl`` lock (exclusive for writers, shared for readers)."""
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def repair(self) -> list[str]:
        """Truncate a torn last line (no newline, or not JSON) of this store's file."""
        found: list[str] = []
        with self.lock():
            if not self.path.exists():
                return found
            data = self.path.read_bytes()
            keep = len(data)
            if data and not data.endswith(b"\n"):
                keep = data.rfind(b"\n") + 1
                found.append(f"{self.path}: torn last line without newline ({len(data) - keep} bytes) truncated")
            body = data[:keep]
            if body:
                start = body.rfind(b"\n", 0, len(body) - 1) + 1
                last = body[start:]
                if last.strip():
                    try:
                        obj = json.loads(last)
                        Record.from_dict(obj)
                    except (json.JSONDecodeError, RecordError, TypeError, AttributeError) as exc:
                        found.append(f"{self.path}: last line is not a valid record ({exc}); truncated")
                        keep = start
            if keep != len(data):
                with open(self.path, "r+b") as handle:
                    handle.truncate(keep)
                    handle.flush()
                    os.fsync(handle.fileno())
        for message in found:
            log.warning(message)
        self.repaired.extend(found)
        return found

    def append(self, record: Record) -> None:
        """Append one record: one write of one full line, flush, fsync, under the lock."""
        self.append_many([record])

    def append_many(self, records: Sequence[Record]) -> None:
        """Append ``records`` in order: one write of their full lines, one fsync, under the lock
        (a group commit: the executor writes the records that finished together at once)."""
        if not records:
            return
        payload = "".join(record.to_json() + "\n" for record in records).encode("utf-8")
        with self.lock():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(payload)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)

    def extend(self, records: Iterable[Record]) -> None:
        for record in records:
            self.append(record)

    def records(self, deduplicate: bool = True) -> list[Record]:
        """Every record of the run (all files), de-duplicated by key unless told otherwise."""
        with self.lock(shared=True):
            records = [r for f in record_files(self.root) for r in read_records_file(f)]
        return dedupe(records) if deduplicate else records

    def check_writable(self) -> None:
        """Refuse to add answers to a folder holding 0.1.0 records (runs are never silently mixed)."""
        legacy = [f for f in record_files(self.root) if any(r.legacy for r in read_records_file(f))]
        if legacy:
            raise RecordError(
                f"{legacy[0]} holds records written by bcas 0.1.0 (record schema 1, no model fingerprint or "
                "prompt hash); new answers cannot be told apart from them. Use another run folder "
                "(--bcas-report DIR) or move the old records away; they still read (upgraded) for reports"
            )

    def done_keys(self, include_errors: bool = True) -> set[Key]:
        """``{(config_id, dataset_hash, item_id)}`` already recorded (for resuming).

        ``include_errors=False`` leaves out items whose only records are errors, so a
        rerun retries them.
        """
        return {r.key for r in self.records() if include_errors or r.error is None}

    def merge(self, remove_worker_files: bool = True) -> Path:
        """Append to ``records.jsonl`` every worker record whose key it lacks (or holds only as an error)."""
        main = self.root / RECORDS_FILE
        with self.lock():
            existing = read_records_file(main) if main.exists() else []
            best = {r.key: r for r in dedupe(existing)}
            workers = [p for p in record_files(self.root) if p != main]
            to_add: list[Record] = []
            for rec in dedupe(r for f in workers for r in read_records_file(f)):
                current = best.get(rec.key)
                newer_grade = current is not None and rec.error is None and bool(set(rec.grades) - set(current.grades))
                if current is None or (current.error is not None and rec.error is None) or newer_grade:
                    best[rec.key] = rec
                    to_add.append(rec)
            if to_add:
                payload = "".join(r.to_json() + "\n" for r in to_add).encode("utf-8")
                with open(main, "ab") as handle:
                    handle.write(payload)
                    handle.flush()
                    os.fsync(handle.fileno())
            if remove_worker_files:
                for path in workers:
                    path.unlink()
        return main
