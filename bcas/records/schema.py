"""The record of one evaluated answer (BCAS §3.7): its schema and identity.

Each evaluated item × configuration yields one :class:`Record`: identity, prediction,
grades, ledger totals, per-step ledger and cost.  BCAS logs per-question
``searches_used``, ``tokens_in``, ``tokens_out``, ``early_stop`` and grader verdicts
"along with a cost ledger so practitioners can recompute dollar metrics under
alternative price sheets" (§3.7).  A record is keyed by the answer's identity
(:mod:`bcas.identity`: model fingerprint, config id, dataset hash, item id, prompt hash,
epoch).  Records of schema 1 (bcas 0.1.0, no fingerprints) are upgraded on read with a
``legacy:`` fingerprint that matches no new answer.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

RECORD_SCHEMA_VERSION = 2
LEGACY_PREFIX = "legacy:"

# (model fingerprint, config id, dataset hash, item id, prompt hash, epoch): see bcas.identity
Key = tuple[str, str, str, str, str, int]


class RecordError(ValueError):
    """A stored record is malformed; the message names the file and line."""


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
    # Where the item's time went (bcas.llm.timing.item_timing): slot wait, model calls,
    # searches, the harness, what the backend measured; {} in records written before it.
    # A run condition, not part of the answer's identity (key).
    timing: dict[str, Any] = field(default_factory=dict)

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


TEST_DOUBLE_PREFIX = "mock:"  # the fingerprint of every model of the ``mock`` backend (bcas.llm.fingerprint)


def is_test_double(fingerprint: str | None, extra: dict[str, Any] | None = None) -> bool:
    """The model is a test double: the ``mock`` backend's fingerprint, or a record marked ``extra.mock``."""
    return str(fingerprint or "").startswith(TEST_DOUBLE_PREFIX) or bool((extra or {}).get("mock") is True)
