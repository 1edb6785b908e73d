"""The ``rsc/`` folder of a run: an RSC probe's profile, results, calls and cost (MADARA §3,
Algorithm 2 lines 1-6, Appendix K).

Both the ``rsc`` run kind and the routed MADARA pipeline (which probes its calibration
items before it routes) write, per probe, into ``<run>/rsc/``:

- ``<stem>.json``: the profile, the routing decision, the dataset and model, and ``cost``:
  the probe's calls, prompt and completion tokens, searches and dollar cost, in all and
  ``by_phase`` (``probe``: CoT scoring and re-scoring; ``evalnf``: No-Filter generation;
  ``retrieve``: the searches for the calibration documents and the ``llm`` reranker's
  calls while they were retrieved).  ``routed`` says whether the routed pipeline made it.
- ``<stem>.probe.jsonl``: one (query, document, agent) triple a line: the normal score and
  the score under each perturbation level.
- ``<stem>.evalnf.jsonl``: one calibration item a line: the No-Filter answer, whether it
  matched (strict EM), its calls and tokens.
- ``<stem>.calls.jsonl``: one model call a line, as the probe's ledger recorded it.

A routed case probes with its own configuration; where an ``rsc`` case of the same model,
dataset and configuration wrote the same stem, the routed case's files (the same probe,
with ``routed`` true and the routing cost) replace them.

The cost uses the session's price sheet and the model id the records are priced by;
without a sheet, or for a model the sheet does not price, ``cost_usd`` is ``None``
(unknown, never 0), as for a record.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bcas.records import PriceError

if TYPE_CHECKING:
    from bcas.assess.rsc.probe import ProbeRun
    from bcas.assess.usage import Usage
    from bcas.records import PriceSheet

RSC_DIR = "rsc"


def _priced(usage: Usage, searches: int, model_id: str, prices: PriceSheet | None) -> dict[str, Any]:
    cost: float | None = None
    if prices is not None:
        try:
            cost = prices.cost(model_id, usage.tokens_in, usage.tokens_out, searches)
        except PriceError:
            cost = None
    return {
        "calls": usage.llm_calls,
        "tokens_in": usage.tokens_in,
        "tokens_out": usage.tokens_out,
        "searches": searches,
        "cost_usd": cost,
    }


def probe_cost(run: ProbeRun, model_id: str, prices: PriceSheet | None, searches: int) -> dict[str, Any]:
    """The probe's calls, tokens, searches and cost, in all and by phase (MADARA Appendix K)."""
    from bcas.assess.rsc.probe import usage_by_phase
    from bcas.assess.usage import Ledger

    total = _priced(Ledger(entries=list(run.entries)).usage(), searches, model_id, prices)
    phases = usage_by_phase(run.entries)
    total["by_phase"] = {
        name: _priced(u, searches if name == "retrieve" else 0, model_id, prices) for name, u in phases.items()
    }
    total["price_sheet"] = prices.name if prices is not None else None
    return total


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows)


def write_probe(
    run_dir: Path,
    stem: str,
    run: ProbeRun,
    meta: dict[str, Any],
    *,
    model_id: str,
    prices: PriceSheet | None,
    searches: int,
) -> Path:
    """Write the probe's four files under ``run_dir/rsc``; returns the profile's path.

    ``meta``: what the profile file says besides the profile (dataset, model label, case
    id, ``routed``).  ``searches``: the retrievals the probe made (one per calibration
    item with ``doc_source="retrieval"``), priced as a record's searches are.
    """
    folder = run_dir / RSC_DIR
    folder.mkdir(parents=True, exist_ok=True)
    data = run.profile.to_dict()
    data["decision"] = run.profile.decision().to_dict() if run.profile.em_nf is not None else None
    data.update(meta)
    data["cost"] = probe_cost(run, model_id, prices, searches)
    ids = run.item_ids
    triples = [{**asdict(t), "item_id": ids[t.query] if t.query < len(ids) else None} for t in run.triples]
    _write(folder / f"{stem}.probe.jsonl", _jsonl(triples))
    _write(folder / f"{stem}.evalnf.jsonl", _jsonl(run.nf_results))
    _write(folder / f"{stem}.calls.jsonl", _jsonl([asdict(e) for e in run.entries]))
    path = folder / f"{stem}.json"
    _write(path, json.dumps(data, indent=1, sort_keys=True, default=str))
    return path


def routing_rows(profiles: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The routing cost beside the routed accuracy, one row per routed probe (summary.json's ``routing``).

    A routed probe is shared by the routed cases of its model and dataset in a session;
    its row covers the records of the routed pipeline (``extra.assess_method`` ``madara``)
    on that model and dataset: their number and accuracy.
    """
    rows = []
    for prof in profiles:
        if not prof.get("routed"):
            continue
        label, dataset = prof.get("model_label"), prof.get("dataset_evaluated") or prof.get("dataset")
        routed = [
            r
            for r in records
            if (r.get("extra") or {}).get("assess_method") == "madara"
            and r.get("model") in (label, prof.get("model"))
            and r.get("dataset") == dataset
        ]
        cost = prof.get("cost") or {}
        rows.append(
            {
                "case_id": prof.get("case_id"),
                "model": label,
                "dataset": dataset,
                "mode": (prof.get("decision") or {}).get("mode"),
                "calibration_items": len(prof.get("item_ids") or []),
                "routing_calls": cost.get("calls"),
                "routing_tokens_in": cost.get("tokens_in"),
                "routing_tokens_out": cost.get("tokens_out"),
                "routing_cost_usd": cost.get("cost_usd"),
                "routing_by_phase": cost.get("by_phase"),
                "n": len(routed),
                "accuracy": sum(bool(r.get("correct_em")) for r in routed) / len(routed) if routed else None,
            }
        )
    return rows


def routing_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The terminal summary's line per routed probe: routed accuracy, then the routing cost."""
    lines = []
    for row in rows:
        acc = "—" if row["accuracy"] is None else f"{row['accuracy'] * 100:.1f}%"
        cost = "—" if row["routing_cost_usd"] is None else f"${row['routing_cost_usd']:.4f}"
        lines.append(
            f"routed {row['model']} / {row['dataset']}: accuracy {acc} on {row['n']} items ({row['mode']}); "
            f"routing cost {row['routing_calls']} calls, {row['routing_tokens_in']} tokens in, "
            f"{row['routing_tokens_out']} out, {cost} ({row['calibration_items']} calibration items)"
        )
    return lines
