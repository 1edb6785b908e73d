"""Price sheets and the cost of a record (BCAS §3.7).

:func:`reprice` recomputes the cost of stored records under another sheet without
rerunning anything (``bcas reprice RECORDS --prices SHEET``).  A model
a sheet does not price gets ``cost_usd = None`` -- unknown, never 0.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bcas.records.schema import Record, is_test_double
from bcas.registry import did_you_mean
from bcas.resources import resource_path

DEFAULT_PRICES = resource_path("prices.toml")  # package data: a non-editable install has it too


class PriceError(KeyError):
    """A price sheet is malformed or lacks a model; the message says which and where."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


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
        raise PriceError(f"{path}: no sheet {name!r}{did_you_mean(str(name), sheets)}; sheets: {sorted(sheets)}")
    return sheets[name]


def missing_price_note(model: str, sheet: str) -> str:
    """The report's line for a model that a price sheet does not price."""
    return f"no price for {model} in sheet {sheet}: add it or alias it, then `bcas reprice`"


def reprice_record(record: Record, sheet: PriceSheet) -> Record:
    """The record with ``cost_usd`` (and the judge's cost) computed under ``sheet``.

    A model the sheet does not price gets ``cost_usd = None`` (unknown, never 0) and
    ``extra["price_missing"]`` naming the model and the sheet (the warning and the report's
    note), except a test double (the ``mock`` backend's), which has no price by nature and
    is named as such by the report's banner; pricing never raises, so it can never cost a record.
    """
    extra = record.extra
    try:
        cost: float | None = sheet.cost(record.model, record.tokens_in, record.tokens_out, record.searches_used)
        if extra and "price_missing" in extra:
            extra = {k: v for k, v in extra.items() if k != "price_missing"}
    except PriceError:
        cost = None
        if not is_test_double(record.model_fingerprint, extra):
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
