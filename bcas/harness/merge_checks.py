"""Whether run folders belong to one run: the fields their manifests and records must share.

Before :mod:`bcas.harness.merge` joins shards, every session of every input is compared
with the first input's first session on what decides an answer or its price:

* ``bcas version`` (and ``bcas commit`` when both sessions ran from a git checkout);
* ``grids`` and every option in :data:`ANSWER_OPTIONS` (``option --bcas-NAME``), as
  ``run.json`` resolved them;
* ``models`` (their labels), ``model fingerprint of LABEL`` (the manifest's, and the
  fingerprints the records carry) and ``judge`` (its fingerprint and grade id);
* ``dataset hash of NAME``: for each dataset both sides answered, from the manifests
  and the records;
* ``price sheet``: the sheet's name and the sha256 of its file (not its path: each
  machine may keep its copy elsewhere);
* every configuration field of each grid entry the records of both sides answered, named
  in words (``rerank_candidates (retrieval.candidates) of 'bcas/hs+r'``), from the records.

Options that only say where or how fast (``--bcas-base-url``, ``--bcas-concurrency``,
``--bcas-report``, ``--bcas-shard``) or what the gate does are not compared.  Each
difference is a :class:`Mismatch` naming the input, its shard and the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bcas.config import config_leaves, field_name
from bcas.grids import base_label

# Options whose value changes which answers are made or what they are (the answer identity's parts).
ANSWER_OPTIONS = (
    "model",
    "backend",
    "datasets",
    "corpus",
    "limit",
    "seed",
    "epochs",
    "calibration-n",
    "embedder",
    "reranker",
    "rerank-candidates",
    "judge",
    "judge-repeats",
)


@dataclass(frozen=True)
class Mismatch:
    """Input ``run`` (shard ``shard``) differs from the reference input in ``field``."""

    run: str
    shard: str | None
    field: str
    value: Any
    reference_run: str
    reference_shard: str | None
    reference: Any

    def line(self) -> str:
        here = f"shard {self.shard}" if self.shard else "unsharded run"
        there = f"shard {self.reference_shard}" if self.reference_shard else "the unsharded run"
        return (
            f"{here} ({self.run}): {self.field} is {_shown(self.value)}, "
            f"{there} ({self.reference_run}) has {_shown(self.reference)}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "shard": self.shard,
            "field": self.field,
            "value": self.value,
            "reference_run": self.reference_run,
            "reference_shard": self.reference_shard,
            "reference": self.reference,
        }


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def _option(session: dict[str, Any], name: str) -> Any:
    entry = (session.get("options") or {}).get(name)
    return entry.get("value") if isinstance(entry, dict) else None


def session_fields(session: dict[str, Any]) -> dict[str, Any]:
    """The compared fields of one ``run.json`` session entry (a field it lacks is left out)."""
    out: dict[str, Any] = {}
    version = session.get("bcas") or {}
    if "version" in version:
        out["bcas version"] = version.get("version")
    if version.get("git_commit"):
        out["bcas commit"] = version["git_commit"]
    settings = session.get("settings") or {}
    if "grids" in settings:
        out["grids"] = settings.get("grids")
    for name in ANSWER_OPTIONS:
        if name in (session.get("options") or {}):
            out[f"option --bcas-{name}"] = _option(session, name)
    models = session.get("models")
    if isinstance(models, dict):
        out["models"] = sorted(models)
        for label, model in models.items():
            out[f"model fingerprint of {label!r}"] = (model or {}).get("fingerprint")
    if "judge" in session:
        judge = session.get("judge") or {}
        out["judge"] = None if not judge else {k: judge.get(k) for k in ("spec", "fingerprint", "grade_id")}
    for name, hashes in (session.get("datasets") or {}).items():
        out[f"dataset hash of {name!r}"] = sorted(hashes)
    if "price_sheet" in session:
        sheet = session.get("price_sheet")
        out["price sheet"] = None if not sheet else {"sheet": sheet.get("sheet"), "sha256": sheet.get("sha256")}
    return out


def record_fields(records: Sequence[Any]) -> dict[str, Any]:
    """The compared fields the records of one input carry: fingerprints per model, hashes per dataset."""
    fingerprints: dict[str, set[str]] = {}
    hashes: dict[str, set[str]] = {}
    for rec in records:
        fingerprints.setdefault(str(rec.model), set()).add(str(rec.model_fingerprint))
        hashes.setdefault(str(rec.dataset), set()).add(str(rec.dataset_hash))
    out: dict[str, Any] = {f"model fingerprint of {k!r}": sorted(v) for k, v in fingerprints.items()}
    out.update({f"dataset hash of {k!r}": sorted(v) for k, v in hashes.items()})
    # Each configuration field of each grid entry, named in words (rerank_candidates (retrieval.candidates)
    # of 'bcas/hs+r'): two inputs whose answers differ in it are refused with both values.
    fields: dict[str, set[str]] = {}
    for rec in records:
        label = base_label(str(getattr(rec, "label", "") or getattr(rec, "config_id", "")))
        for path, value in config_leaves(getattr(rec, "config", None) or {}).items():
            fields.setdefault(f"{field_name(path)} of {label!r}", set()).add(json.dumps(value, sort_keys=True))
    out.update({k: [json.loads(v) for v in sorted(vs)] for k, vs in fields.items()})
    return out


def mismatches(
    runs: Sequence[Path],
    shards: Sequence[str | None],
    manifests: Sequence[dict[str, Any] | None],
    records: Sequence[Sequence[Any]],
) -> list[Mismatch]:
    """Every difference between an input and the reference: the first session of the first input
    with a manifest for manifest fields, the first input with records for record fields."""
    found: list[Mismatch] = []
    seen: set[tuple[str, str]] = set()
    references: dict[str, tuple[str, str | None, dict[str, Any]]] = {}

    def compare(kind: str, run: Path, shard: str | None, mine: dict[str, Any]) -> None:
        if not mine:
            return
        ref_run, ref_shard, reference = references.setdefault(kind, (str(run), shard, mine))
        for name in sorted(set(mine) & set(reference)):
            if mine[name] != reference[name] and (str(run), name) not in seen:
                seen.add((str(run), name))
                found.append(Mismatch(str(run), shard, name, mine[name], ref_run, ref_shard, reference[name]))

    for run, shard, manifest, recs in zip(runs, shards, manifests, records, strict=True):
        for session in (manifest or {}).get("sessions", []):
            if isinstance(session, dict):
                compare("manifest", run, shard, session_fields(session))
        compare("records", run, shard, record_fields(recs))
    return found


__all__ = ["ANSWER_OPTIONS", "Mismatch", "mismatches", "record_fields", "session_fields"]
