"""The invariants a finished case must hold: every item (and epoch) recorded once, the
run kind's own checks (the BCAS budgets), no errored item unless allowed (the case's
failure message lists the distinct errors)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bcas.config import RunConfig
from bcas.registry import per_item
from bcas.run.pipelines import run_kind
from bcas.run.settings import Case

if TYPE_CHECKING:  # typing only
    from bcas.data import Dataset


def check_invariants(
    case: Case,
    ds: Dataset,
    config: RunConfig,
    records: list[dict[str, Any]],
    allow_errors: bool,
    epochs: int | None = None,
) -> list[str]:
    """Every item recorded once; budgets respected; no errored items unless allowed."""
    problems: list[str] = []
    keys = [(str(r.get("item_id")), int(r.get("epoch") or 0)) for r in records]
    epochs = max([e for _, e in keys] + [0]) + 1 if epochs is None else epochs
    expected = {(it.id, e) for it in ds.items for e in range(epochs)}
    missing = expected - set(keys)
    if missing:
        shown = sorted(i if e == 0 else f"{i}@epoch{e}" for i, e in missing)[:5]
        problems.append(f"{len(missing)} items not recorded: {shown}")
    counts: dict[tuple[str, int], int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    dupes = {i for (i, _), n in counts.items() if n > 1}
    if dupes:
        problems.append(f"items recorded more than once: {sorted(dupes)[:5]}")
    if per_item(case.entry.kind):
        problems.extend(run_kind(case.entry.kind).check(config, records))
    if not allow_errors:
        errs = [r for r in records if r.get("stop_reason") == "error"]
        if errs:
            distinct: dict[str, list[str]] = {}
            for r in errs:
                distinct.setdefault(str(r.get("error")), []).append(str(r.get("item_id")))
            listed = "; ".join(f"{len(ids)}x {message} (e.g. {ids[0]})" for message, ids in list(distinct.items())[:5])
            more = f"; and {len(distinct) - 5} more distinct errors" if len(distinct) > 5 else ""
            problems.append(
                f"{len(errs)} items ended in error, {len(distinct)} distinct: {listed}{more}; "
                "pass --bcas-allow-errors to accept"
            )
    return problems
