"""What makes two runs' answers a comparison of models: the rule of ``bcas compare`` and ``bcas view``.

Only the model may differ: answers whose dataset hashes, prompt hashes or configuration ids
differ are refused in one line (:func:`refusal`), a configuration id naming each field that
differs, with both values (:func:`bcas.config.config_differences`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bcas.config import config_differences
from bcas.records import Record
from bcas.records.case_status import StatusIndex, items_note

# What must be equal for answers of two runs to be a comparison of models: the items, the prompts and
# the configuration (seed included).  The model is what is compared, so its fingerprint is not here.
COMPARED_ON = (("dataset_hash", "dataset hash"), ("prompt_hash", "prompt hash"), ("config_id", "configuration id"))


def _values(records: Sequence[Record | dict[str, Any]], name: str) -> list[str]:
    return sorted({str(r.get(name) if isinstance(r, dict) else getattr(r, name)) for r in records})


def _config_of(r: Record | dict[str, Any]) -> Any:
    return r.get("config") if isinstance(r, dict) else r.config


def field_differences(
    recs_a: Sequence[Record | dict[str, Any]], recs_b: Sequence[Record | dict[str, Any]]
) -> list[str]:
    """The configuration fields two groups' answers differ in, in words with both values
    (:func:`bcas.config.config_differences`); [] when either group holds several configurations."""
    configs_a = {json.dumps(_config_of(r), sort_keys=True) for r in recs_a}
    configs_b = {json.dumps(_config_of(r), sort_keys=True) for r in recs_b}
    if len(configs_a) != 1 or len(configs_b) != 1:
        return []
    return config_differences(json.loads(next(iter(configs_a))), json.loads(next(iter(configs_b))))


def identity_differences(
    recs_a: Sequence[Record | dict[str, Any]], recs_b: Sequence[Record | dict[str, Any]]
) -> list[str]:
    """What makes two groups' answers incomparable: the dataset hash, the prompt hash or the
    configuration id differs (another model is the comparison, not a difference); a configuration
    id names the fields that differ, with both values (``rerank_candidates ... differs: A 10 vs B 100``).
    The records may be :class:`Record` objects or their dicts (``bcas view``)."""
    out = []
    for name, what in COMPARED_ON:
        a, b = _values(recs_a, name), _values(recs_b, name)
        if a != b:
            fields = field_differences(recs_a, recs_b) if name == "config_id" else []
            tail = f" ({'; '.join(fields)})" if fields else ""
            out.append(f"{what} differs: A {', '.join(a)} vs B {', '.join(b)}{tail}")
        for tag, values in (("A", a), ("B", b)):
            if len(values) > 1:
                out.append(f"{tag} mixes {len(values)} values of the {what} under one label")
    return out


def refusal(differences: list[str]) -> str:
    """The one line that refuses answers that are not a comparison of models."""
    return (
        "error: not comparable (only the model may differ): " + "; ".join(differences) + " "
        "(--allow-mismatch compares them anyway and says so in the output)"
    )


def file_note(statuses: StatusIndex, recs: Sequence[Record]) -> str:
    """The words beside the n of a run's case (``recs``: its answers) evaluated on fewer items than
    its dataset file holds (:func:`bcas.records.case_status.items_note`); "" otherwise or unknown."""
    first = recs[0] if recs else None
    key = {} if first is None else {f: getattr(first, f) for f in ("model_fingerprint", "config_id", "dataset")}
    status = statuses.of_record(key) if key else None
    if status is None:
        return ""
    return items_note(len({r.item_id for r in recs}), status.file_items, status.held_out)
