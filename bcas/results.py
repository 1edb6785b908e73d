"""Records, the append-only results store, and price sheets (BCAS §3.7).

Each evaluated item × configuration yields one :class:`Record` (the fields of
ARCHITECTURE.md "Records": identity, prediction, grades, ledger totals, per-step
ledger, cost).  BCAS logs per-question ``searches_used``, ``tokens_in``,
``tokens_out``, ``early_stop`` and grader verdicts "along with a cost ledger so
practitioners can recompute dollar metrics under alternative price sheets" (§3.7):
:func:`reprice` and ``python -m bcas.results reprice RECORDS --prices SHEET`` do that
without rerunning anything.

Store layout: ``reports/<run>/records.jsonl`` (or ``records.<worker>.jsonl`` per
pytest-xdist worker, merged by :meth:`ResultStore.merge`).  Every append is one
``write`` of one complete JSON line, then flush and ``fsync``, under an exclusive
``fcntl`` lock on ``<run>/.records.lock``, so several processes may append to the
same file.  A process killed mid-write can leave a torn last line (no newline, or
not JSON); opening a store for writing detects it, reports it (``logging`` warning
and :attr:`ResultStore.repaired`) and truncates it away; readers skip it.  A record
is keyed by the answer's identity (:mod:`bcas.identity`: model fingerprint, config id,
dataset hash, item id, prompt hash, epoch); :meth:`ResultStore.done_keys` lets a rerun
skip what is already recorded.  Records of schema 1 (bcas 0.1.0, no fingerprints) are
upgraded on read with a ``legacy:`` fingerprint that matches no new answer, and a run
folder holding them is refused for writing (:meth:`ResultStore.check_writable`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
import sys
import time
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas

    from bcas.agent.loop import Trajectory
    from bcas.data import Dataset

from bcas.resources import resource_path  # noqa: E402

log = logging.getLogger(__name__)

RECORDS_FILE = "records.jsonl"
LOCK_FILE = ".records.lock"
DEFAULT_PRICES = resource_path("prices.toml")  # package data: a non-editable install has it too
RECORD_SCHEMA_VERSION = 2
_WORKER_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
LEGACY_PREFIX = "legacy:"

# (model fingerprint, config id, dataset hash, item id, prompt hash, epoch): see bcas.identity
Key = tuple[str, str, str, str, str, int]


class RecordError(ValueError):
    """A stored record is malformed; the message names the file and line."""


class PriceError(KeyError):
    """A price sheet is malformed or lacks a model; the message says which and where."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


# -- records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """One evaluated item under one configuration (JSON-safe through ``to_dict``).

    ``steps``: the per-step ledger, each a dict with ``kind``, ``query``, ``output``,
    ``tokens_in``, ``tokens_out``, ``retrieved`` (chunk ids), ``docs`` (their
    document ids), ``cached``, ``flag``, ``reasoning`` and ``tokens_reasoning`` (see
    :mod:`bcas.agent.budget`).  ``tokens_reasoning``: the reasoning tokens the
    provider reported, a part of ``tokens_out``.  ``judge``:
    the LLM judge's details (verdicts of every repeat, agreement, its own tokens and
    cost), kept apart from the agent's tokens.  ``cost_usd``: the agent's cost
    (model tokens + searches) under ``price_sheet``; ``None`` when not priced.
    ``method`` names the pipeline (``"bcas"``, ``"madara"``) and ``extra`` holds its
    own fields (MADARA: treatment, score matrix, selected documents, ...).
    """

    run_id: str
    config_id: str
    model: str
    dataset: str
    dataset_hash: str
    item_id: str
    question: str
    answers: list[str]
    prediction: str
    correct_em: bool
    f1: float
    config: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    judge_verdict: bool | None = None
    judge: dict[str, Any] | None = None
    searches_used: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_reasoning: int = 0
    llm_calls: int = 0
    early_stop: bool = False
    stop_reason: str = ""
    latency_s: float = 0.0
    cost_usd: float | None = None
    price_sheet: str | None = None
    retries: int = 0
    error: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    method: str = "bcas"
    extra: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    grades: dict[str, dict[str, Any]] = field(default_factory=dict)
    model_fingerprint: str = ""
    prompt_hash: str = ""
    epoch: int = 0
    seed: int | None = None
    schema_version: int = RECORD_SCHEMA_VERSION

    @property
    def key(self) -> Key:
        """The answer's identity (bcas.identity): grid membership and grades are not part of it."""
        return (self.model_fingerprint, self.config_id, self.dataset_hash, self.item_id, self.prompt_hash, self.epoch)

    @property
    def legacy(self) -> bool:
        """Written by bcas 0.1.0 (schema 1), which recorded no model fingerprint or prompt hash."""
        return self.model_fingerprint.startswith(LEGACY_PREFIX)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        """Rebuild a record; unknown keys are kept under ``extra["unknown"]``."""
        names = {f.name for f in dataclasses.fields(cls)}
        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        missing = [n for n in required if n not in data]
        if missing:
            raise RecordError(f"record lacks required fields {missing}")
        known = {k: v for k, v in data.items() if k in names}
        unknown = {k: v for k, v in data.items() if k not in names}
        if unknown:
            extra = dict(known.get("extra") or {})
            extra.setdefault("unknown", {}).update(unknown)
            known["extra"] = extra
        known["answers"] = list(known["answers"])
        if int(known.get("schema_version") or 1) < 2:
            # Upgrade on read: 0.1.0 knew no model fingerprint, prompt hash or epoch. The
            # marker keeps such answers apart from every fingerprinted answer (never mixed).
            known.setdefault("model_fingerprint", LEGACY_PREFIX + str(known.get("model", "")))
            known.setdefault("prompt_hash", LEGACY_PREFIX.rstrip(":"))
            known["extra"] = {**(known.get("extra") or {}), "upgraded_from_schema": 1}
        return cls(**known)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def replace(self, **changes: Any) -> Record:
        return dataclasses.replace(self, **changes)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def record_from_trajectory(
    trajectory: Trajectory,
    *,
    run_id: str,
    dataset: Dataset | None = None,
    dataset_name: str | None = None,
    dataset_hash: str | None = None,
    scoring: str | None = None,
    judge: Any = None,
    prices: PriceSheet | None = None,
    extra: dict[str, Any] | None = None,
) -> Record:
    """The record of a BCAS trajectory, graded with the dataset's scoring rule.

    ``dataset`` supplies name, hash and scoring rule (or pass them one by one).
    ``judge``: a :class:`bcas.grading.JudgeResult` (or its dict) or ``None``.
    ``prices``: price the agent's usage (and the judge's) under this sheet.
    """
    from bcas.grading import score_prediction

    name = dataset_name if dataset_name is not None else (dataset.name if dataset is not None else None)
    hash_ = dataset_hash if dataset_hash is not None else (dataset.hash if dataset is not None else None)
    rule = scoring if scoring is not None else (dataset.scoring if dataset is not None else "qa")
    if name is None or hash_ is None:
        raise ValueError("record_from_trajectory needs dataset= or both dataset_name= and dataset_hash=")
    item = trajectory.item
    correct, f1 = score_prediction(trajectory.prediction, list(item.answers), rule)
    judge_dict = judge.to_dict() if hasattr(judge, "to_dict") else judge
    config = trajectory.config
    details = {
        "action_turns": trajectory.action_turns,
        "invalid_turns": trajectory.invalid_turns,
        "repeated_queries": trajectory.repeated_queries,
        "forced_answer": trajectory.forced_answer,
        "plan": trajectory.plan,
        "budget": dataclasses.asdict(config.budget),
    }
    details.update(extra or {})
    record = Record(
        run_id=run_id,
        config_id=config.config_id,
        config=config.to_dict(),
        label=config.label,
        model=trajectory.model,
        dataset=name,
        dataset_hash=hash_,
        item_id=item.id,
        question=item.question,
        answers=list(item.answers),
        prediction=trajectory.prediction,
        correct_em=bool(correct),
        f1=float(f1),
        judge_verdict=None if judge_dict is None else judge_dict.get("verdict"),
        judge=judge_dict,
        searches_used=trajectory.searches_used,
        tokens_in=trajectory.tokens_in,
        tokens_out=trajectory.tokens_out,
        tokens_reasoning=trajectory.tokens_reasoning,
        llm_calls=trajectory.llm_calls,
        early_stop=trajectory.early_stop,
        stop_reason=trajectory.stop_reason,
        latency_s=round(trajectory.latency_s, 6),
        retries=trajectory.retries,
        error=trajectory.error,
        steps=[s.to_dict() for s in trajectory.steps],
        method="bcas",
        extra=details,
        created_at=time.time(),
    )
    return reprice_record(record, prices) if prices is not None else record


# -- price sheets ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per one million input (prompt) and output (completion) tokens."""

    input_per_mtok: float
    output_per_mtok: float


@dataclass(frozen=True)
class PriceSheet:
    """Per-model token prices and a per-search price, under one name."""

    name: str
    models: dict[str, ModelPrice]
    search_per_call: float = 0.0
    aliases: dict[str, str] = field(default_factory=dict)
    description: str = ""

    def price_for(self, model_id: str) -> ModelPrice:
        """Price of ``model_id``: exact key, then alias, then the longest key it starts with."""
        wanted = model_id.strip().lower()
        wanted = wanted.rsplit("/", 1)[-1]  # "openai/gpt-4o-mini" -> "gpt-4o-mini"
        lowered = {k.lower(): k for k in self.models}
        if wanted in lowered:
            return self.models[lowered[wanted]]
        if wanted in self.aliases:
            return self.models[self.aliases[wanted]]
        prefixes = [k for k in lowered if wanted.startswith(k)]
        if prefixes:
            return self.models[lowered[max(prefixes, key=len)]]
        raise PriceError(
            f"price sheet {self.name!r} has no price for model {model_id!r}; "
            f"known models: {sorted(self.models)} (add it to the sheet or give it an alias)"
        )

    def token_cost(self, model_id: str, tokens_in: int, tokens_out: int) -> float:
        price = self.price_for(model_id)
        return (tokens_in * price.input_per_mtok + tokens_out * price.output_per_mtok) / 1_000_000

    def cost(self, model_id: str, tokens_in: int, tokens_out: int, searches: int = 0) -> float:
        """Dollar cost of one trajectory: its tokens plus its search calls."""
        return self.token_cost(model_id, tokens_in, tokens_out) + searches * self.search_per_call


def _number(table: dict[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PriceError(f"{where}: '{key}' must be a number (US dollars), got {value!r}")
    if value < 0:
        raise PriceError(f"{where}: '{key}' must be >= 0, got {value}")
    return float(value)


def parse_price_sheets(data: dict[str, Any], source: str = "<toml>") -> dict[str, PriceSheet]:
    """All sheets of a parsed price file (``[sheets.<name>]`` tables)."""
    sheets_table = data.get("sheets")
    if not isinstance(sheets_table, dict) or not sheets_table:
        raise PriceError(f"{source}: no [sheets.<name>] tables found")
    sheets: dict[str, PriceSheet] = {}
    for name, table in sheets_table.items():
        where = f"{source}: [sheets.{name}]"
        models_table = table.get("models")
        if not isinstance(models_table, dict) or not models_table:
            raise PriceError(f"{where}: needs at least one [sheets.{name}.models.<model>] table")
        models: dict[str, ModelPrice] = {}
        aliases: dict[str, str] = {}
        for model, entry in models_table.items():
            mwhere = f"{where}.models.{model}"
            models[model] = ModelPrice(
                input_per_mtok=_number(entry, "input_per_mtok", mwhere),
                output_per_mtok=_number(entry, "output_per_mtok", mwhere),
            )
            for alias in entry.get("aliases", []):
                aliases[str(alias).lower()] = model
        sheets[name] = PriceSheet(
            name=name,
            models=models,
            search_per_call=_number(table, "search_per_call", where, 0.0),
            aliases=aliases,
            description=str(table.get("description", "")),
        )
    return sheets


def price_source(spec: str | os.PathLike[str] | None = None, sheet: str | None = None) -> tuple[Path, str | None]:
    """(price file, sheet name or None) a ``load_price_sheet`` spec names, without reading the file.

    A path that does not exist (it ends in ``.toml`` or holds a folder) is a ``PriceError``;
    any other word is a sheet name in the packaged file.
    """
    if spec is None:
        return DEFAULT_PRICES, sheet
    text = str(spec)
    if Path(text).is_file():
        return Path(text), sheet
    if ":" in text and Path(text.rsplit(":", 1)[0]).is_file():
        file_part, sheet_part = text.rsplit(":", 1)
        return Path(file_part), sheet or sheet_part
    if text.endswith(".toml") or os.sep in text:
        raise PriceError(f"price file {text} does not exist")
    return DEFAULT_PRICES, sheet or text


def load_price_sheet(spec: str | os.PathLike[str] | None = None, sheet: str | None = None) -> PriceSheet:
    """Load one price sheet.

    ``spec``: a TOML path, ``PATH:NAME``, or a sheet name in ``fixtures/prices.toml``
    (``None``: that file).  ``sheet``: the sheet name inside the file (default: the
    file's top-level ``default`` key, or its only sheet).
    """
    path, sheet = price_source(spec, sheet)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PriceError(f"price file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"{path}: not valid TOML: {exc}") from None
    sheets = parse_price_sheets(data, str(path))
    name = sheet or data.get("default") or (next(iter(sheets)) if len(sheets) == 1 else None)
    if name is None:
        raise PriceError(f"{path}: several sheets {sorted(sheets)} and no 'default'; choose one")
    if name not in sheets:
        raise PriceError(f"{path}: no sheet {name!r}; sheets: {sorted(sheets)}")
    return sheets[name]


def missing_price_note(model: str, sheet: str) -> str:
    """The report's line for a model that a price sheet does not price."""
    return f"no price for {model} in sheet {sheet}: add it or alias it, then `python -m bcas.results reprice`"


def reprice_record(record: Record, sheet: PriceSheet) -> Record:
    """The record with ``cost_usd`` (and the judge's cost) computed under ``sheet``.

    A model the sheet does not price gets ``cost_usd = None`` (unknown, never 0) and
    ``extra["price_missing"]`` naming the model and the sheet; pricing never raises, so
    it can never cost a record.
    """
    extra = record.extra
    try:
        cost: float | None = sheet.cost(record.model, record.tokens_in, record.tokens_out, record.searches_used)
        if extra and "price_missing" in extra:
            extra = {k: v for k, v in extra.items() if k != "price_missing"}
    except PriceError:
        cost = None
        extra = {**(extra or {}), "price_missing": {"model": record.model, "sheet": sheet.name}}
    judge = record.judge
    if judge and judge.get("model"):
        judge = dict(judge)
        try:
            judge["cost_usd"] = sheet.token_cost(
                judge["model"], int(judge.get("tokens_in", 0)), int(judge.get("tokens_out", 0))
            )
        except PriceError:
            judge["cost_usd"] = None
    return record.replace(cost_usd=cost, price_sheet=sheet.name, judge=judge, extra=extra)


def reprice(records: Iterable[Record], sheet: PriceSheet) -> list[Record]:
    """Recompute the cost of stored records under another sheet (nothing is rerun)."""
    return [reprice_record(r, sheet) for r in records]


# -- reading -------------------------------------------------------------------------------


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

    @classmethod
    def for_run(
        cls, run: str, reports_dir: str | os.PathLike[str] = "reports", worker: str | None = None
    ) -> ResultStore:
        return cls(Path(reports_dir) / run, worker=worker)

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
        payload = (record.to_json() + "\n").encode("utf-8")
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


# -- command line -------------------------------------------------------------------------


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bcas.results", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rp = sub.add_parser("reprice", help="recompute record costs under another price sheet")
    rp.add_argument("records", help="a records*.jsonl file or a run folder")
    rp.add_argument(
        "--prices", required=True, help="price TOML path, PATH:NAME, or a sheet name in fixtures/prices.toml"
    )
    rp.add_argument("--sheet", default=None, help="sheet name inside the price file")
    rp.add_argument("--out", default=None, help="write the repriced records here (JSONL); never the input file")
    rj = sub.add_parser("rejudge", help="grade recorded answers with another judge (answers are not regenerated)")
    rj.add_argument("run_dir", help="a run folder")
    rj.add_argument("--judge", required=True, help="BACKEND:MODEL, e.g. openai:gpt-4o-mini, embedded, mock:gold")
    rj.add_argument("--judge-base-url", default=None, help="the judge server's /v1 URL (openai backend)")
    rj.add_argument("--api-key-env", default=None, help="NAME of the environment variable holding the judge's key")
    rj.add_argument("--repeats", type=int, default=1, help="ask the judge this many times per answer")
    rj.add_argument("--no-cache", action="store_true", help="disable the generation cache")
    mg = sub.add_parser("merge", help="merge per-worker records.<worker>.jsonl files into records.jsonl; with several "
                                      "run folders (the shards of a --bcas-shard run) and --out, join them into one run")
    mg.add_argument("run_dir", nargs="+", help="a run folder, or several with --out")
    mg.add_argument("--out", default=None, help="the new run folder that joins the given ones (records, run.json, "
                                                "summaries and report)")
    mg.add_argument("--partial", action="store_true", help="join the shards given even when some are missing")
    mg.add_argument("--keep", action="store_true", help="keep the worker files (one run folder, no --out)")
    args = parser.parse_args(argv)
    try:
        if args.command == "rejudge":
            from bcas.rejudge import rejudge

            if args.repeats < 1:
                raise RecordError(f"--repeats must be >= 1, got {args.repeats}")
            summary = rejudge(args.run_dir, args.judge, base_url=args.judge_base_url, api_key_env=args.api_key_env,
                              repeats=args.repeats, cache=not args.no_cache)
            print("\n".join(summary.lines()))
            return 0
        if args.command == "merge":
            if args.out is None and len(args.run_dir) > 1:
                raise RecordError("merging several run folders writes a new one: give --out DIR")
            if args.out is None:
                print(ResultStore(args.run_dir[0]).merge(remove_worker_files=not args.keep))
                return 0
            from bcas.report.merge import merge_runs  # the CLI sits above both layers, as rejudge does

            print("\n".join(merge_runs(args.run_dir, args.out, partial=args.partial).lines()))
            return 0
        sheet = load_price_sheet(args.prices, args.sheet)
        before = load_records(args.records)
        after = reprice(before, sheet)
        if args.out:
            out = Path(args.out)
            if out.exists() and Path(args.records).exists() and out.resolve() == Path(args.records).resolve():
                raise RecordError("--out must differ from the input: stored records are never rewritten")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(r.to_json() + "\n" for r in after), encoding="utf-8")
        print(_summarise(before, after, sheet))
        return 0
    except (PriceError, RecordError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
