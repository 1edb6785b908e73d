"""A finished run folder read as what a tracker stores: params, tags, metrics, artifacts.

Pure reading of the files the run engine writes (``run.json``, ``summary.json``,
``records.jsonl``): the run's configuration and answer identity (model fingerprints,
served names, dataset hashes, prompt hashes, configuration ids, and each case's verdicts in
the words of :mod:`bcas.report.verdict`) become params and tags,
each summary row (one case: grid x model x dataset x configuration) its metrics with
their intervals, cost and tokens.  No tracker is imported here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Files of the run folder published as artifacts, when present.
ARTIFACTS = (
    "records.jsonl",
    "records.parquet",
    "summary.json",
    "summary.csv",
    "run.json",
    "index.html",
    "gate-report.json",
)
# Summary-row fields that are a case's metrics (numbers; a missing one is left out, never 0).
CASE_METRICS = (
    "accuracy",
    "ci_lo",
    "ci_hi",
    "judge_accuracy",
    "judge_ci_lo",
    "judge_ci_hi",
    "accuracy_given_attempted",
    "not_attempted_rate",
    "mean_f1",
    "em_squad",
    "n",
    "n_correct",
    "errors",
    "ungraded",
    "cost_usd",
    "mean_cost_usd",
    "cost_of_pass",
    "cost_of_pass_lo",
    "cost_of_pass_hi",
    "mean_tokens_in",
    "mean_tokens_out",
    "tokens_of_pass",
    "tokens_of_pass_lo",
    "tokens_of_pass_hi",
    "mean_searches",
    "mean_llm_calls",
    "evidence_recall",
    "pass_at_k",
    "pass_at_k_lo",
    "pass_at_k_hi",
    "pass_hat_k",
    "pass_hat_k_lo",
    "pass_hat_k_hi",
    # latency and throughput (bcas.metrics.latency)
    "latency_p50",
    "latency_p50_lo",
    "latency_p50_hi",
    "latency_p95",
    "latency_p95_lo",
    "latency_p95_hi",
    "latency_p99",
    "latency_p99_lo",
    "latency_p99_hi",
    "mean_wait_s",
    "mean_model_call_s",
    "mean_search_s",
    "mean_ttft_s",
    "items_per_min",
    "share_model",
    "share_search",
    "share_wait",
    "share_harness",
    "concurrency",
)


@dataclass(frozen=True)
class CaseResult:
    """One case of the run: its key, params, tags and metrics."""

    key: str  # grid/model/dataset/config_id: the case's identity within its run (tag ``bcas.case``)
    params: dict[str, str]
    tags: dict[str, str]
    metrics: dict[str, float]
    name: str = ""  # what the tracker shows: ``model · dataset · label``, unique within the run (case_names)


@dataclass(frozen=True)
class RunFolder:
    """A run folder as a tracker sees it."""

    run_dir: Path
    run_id: str
    params: dict[str, str]
    tags: dict[str, str]
    metrics: dict[str, float]
    cases: list[CaseResult] = field(default_factory=list)
    artifacts: list[Path] = field(default_factory=list)
    name: str = ""  # what the tracker shows: the grids and models (run_name)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line of an interrupted run
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _gate_rows(run_dir: Path, gate: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The gate report's rows by the case's (model, dataset, config id), through ``cases.jsonl``."""
    if not isinstance(gate, dict):
        return {}
    from bcas.records.case_status import read_case_statuses

    where = {s.case_id: (s.model, s.dataset, s.config_id) for s in read_case_statuses(run_dir)}
    rows = [r for r in gate.get("rows") or [] if isinstance(r, dict)]
    return {where[str(r.get("case_id"))]: r for r in rows if str(r.get("case_id")) in where}


def case_key(grid: str, model: str, dataset: str, config_id: str) -> str:
    return f"{grid}/{model}/{dataset}/{config_id}"


def verdict_tags(summary: dict[str, Any], row: dict[str, Any]) -> dict[str, str]:
    """The case's verdicts as ``summary.json`` words them (:mod:`bcas.report.verdict`), as tags:
    ``bcas.verdict.reference`` (against the entries its grid compares it with),
    ``bcas.verdict.models`` (against the other models on its configuration) and
    ``bcas.verdict.extra_cost`` (the loop against the methods beside it); several joined by `` | ``."""
    grid, model, dataset, label = (str(row.get(k)) for k in ("grid", "model", "dataset", "label"))
    found: dict[str, list[str]] = {}
    for c in summary.get("comparisons") or []:
        if (str(c.get("grid")), str(c.get("model")), str(c.get("dataset")), str(c.get("label"))) == (
            grid,
            model,
            dataset,
            label,
        ) and c.get("verdict"):
            found.setdefault("bcas.verdict.reference", []).append(str(c["verdict"]))
    for c in summary.get("model_comparisons") or []:
        if (
            (str(c.get("grid")), str(c.get("dataset")), str(c.get("label"))) == (grid, dataset, label)
            and model in (str(c.get("model")), str(c.get("reference")))
            and c.get("verdict")
        ):
            found.setdefault("bcas.verdict.models", []).append(str(c["verdict"]))
    for e in (summary.get("methods") or {}).get("extra_cost") or []:
        if (str(e.get("grid")), str(e.get("model")), str(e.get("dataset")), str(e.get("agent"))) == (
            grid,
            model,
            dataset,
            label,
        ) and e.get("text"):
            found.setdefault("bcas.verdict.extra_cost", []).append(str(e["text"]))
    return {tag: " | ".join(texts)[:5000] for tag, texts in found.items()}  # MLflow's tag value limit


NAME_SEPARATOR = " · "
NAMED_MODELS = 3  # a run name lists this many models, then "+ N more"


def case_names(cases: list[dict[str, str]]) -> list[str]:
    """A name per case a person can read, unique within the run: ``model · dataset · label``.

    Each case is a dict with ``model``, ``dataset``, ``label``, ``grid`` and ``config_id``.
    Names that collide (one configuration label in two grids, two configurations of one
    label) get ``· grid``, then ``[config_id's first 8 characters]``, then ``#2``, ``#3``...
    in the order of their grid and configuration id; the result depends on the cases
    alone, never on their order.
    """
    names = [NAME_SEPARATOR.join((c["model"], c["dataset"], c["label"])) for c in cases]
    qualifiers = (lambda c: NAME_SEPARATOR + c["grid"], lambda c: f" [{c['config_id'][:8]}]")
    for qualify in qualifiers:
        counts: dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        names = [name + qualify(c) if counts[name] > 1 else name for name, c in zip(names, cases, strict=True)]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name, []).append(i)
    for name, members in groups.items():
        if len(members) > 1:
            ordered = sorted(members, key=lambda i: (cases[i]["grid"], cases[i]["config_id"], i))
            for n, i in enumerate(ordered[1:], start=2):
                names[i] = f"{name} #{n}"
    return names


def run_name(grids: list[str], models: list[str]) -> str:
    """The run's name a person can read: its grids and its models (``smoke · mock-gold + coin``),
    each in first-seen order; past NAMED_MODELS models the rest are counted."""
    grids, models = list(dict.fromkeys(grids)), list(dict.fromkeys(models))
    shown = models[:NAMED_MODELS] + ([f"{len(models) - NAMED_MODELS} more"] if len(models) > NAMED_MODELS else [])
    return NAME_SEPARATOR.join(part for part in (" + ".join(grids), " + ".join(shown)) if part)


def read_run_folder(run_dir: Path) -> RunFolder:
    """Read ``run_dir``; raises ``FileNotFoundError`` when it holds no summary."""
    run_dir = Path(run_dir).resolve()
    summary = _read_json(run_dir / "summary.json")
    if not isinstance(summary, dict):
        raise FileNotFoundError(f"{run_dir}: no summary.json (the run has not finished)")
    manifest = _read_json(run_dir / "run.json") or {}
    sessions = [s for s in manifest.get("sessions") or [] if isinstance(s, dict)]
    first = sessions[0] if sessions else {}
    records = _records(run_dir)
    run_id = next((str(r["run_id"]) for r in records if r.get("run_id")), run_dir.name)

    params: dict[str, str] = {}
    for name, entry in sorted((first.get("options") or {}).items()):
        if isinstance(entry, dict) and entry.get("source") == "default":
            continue  # only the options that were set (a default is the code's, not the run's choice)
        value = entry.get("value") if isinstance(entry, dict) else entry
        if value is not None and value != [] and "key" not in name:  # never an API key's name or value
            params[f"option.{name}"] = json.dumps(value) if not isinstance(value, str) else value
    params["seed"] = str(first.get("seed", ""))
    params["epochs"] = str(first.get("epochs", ""))
    tags = {"bcas.run_id": run_id, "bcas.run_dir": str(run_dir)}
    bcas_info = first.get("bcas") or {}
    if bcas_info.get("version"):
        tags["bcas.version"] = str(bcas_info["version"])
    if bcas_info.get("git_commit"):
        tags["bcas.git_commit"] = str(bcas_info["git_commit"])
    models = first.get("models") or {}
    for label, model in sorted(models.items()):
        if not isinstance(model, dict):
            continue
        tags[f"bcas.model.{label}.fingerprint"] = str(model.get("fingerprint"))
        if model.get("backend"):  # the backend that answered (mock for a test double), not the option's default
            tags[f"bcas.model.{label}.backend"] = str(model["backend"])
        if model.get("base_url") or model.get("endpoints"):
            tags[f"bcas.model.{label}.served_name"] = str(model.get("model"))
    for dataset, hashes in sorted((first.get("datasets") or {}).items()):
        tags[f"bcas.dataset.{dataset}.hash"] = ",".join(str(h) for h in hashes or [])

    by_case: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        by_case.setdefault((str(r.get("model")), str(r.get("dataset")), str(r.get("config_id"))), []).append(r)
    gate = _read_json(run_dir / "gate-report.json")
    gates = _gate_rows(run_dir, gate)
    if isinstance(gate, dict) and gate.get("overall"):
        tags["bcas.gate"] = str(gate["overall"])[:5000]
    cases = []
    total_cost, total_in, total_out, cost_known = 0.0, 0.0, 0.0, True
    for row in summary.get("rows") or []:
        key = case_key(str(row.get("grid")), str(row.get("model")), str(row.get("dataset")), str(row.get("config_id")))
        case_records = by_case.get((str(row.get("model")), str(row.get("dataset")), str(row.get("config_id"))), [])
        one = case_records[0] if case_records else {}
        case_params = {
            "grid": str(row.get("grid")),
            "model": str(row.get("model")),
            "dataset": str(row.get("dataset")),
            "label": str(row.get("label")),
            "config_id": str(row.get("config_id")),
            "metric": str(row.get("metric")),
            "interval": str(row.get("interval")),
        }
        if one.get("config") is not None:
            case_params["config"] = json.dumps(one["config"], sort_keys=True)[:6000]  # MLflow's param limit
        fingerprint = str(row.get("model_fingerprint") or one.get("model_fingerprint"))
        model_entry = models.get(str(row.get("model")).split(" [", 1)[0])
        if isinstance(model_entry, dict) and model_entry.get("backend"):
            case_params["backend"] = str(model_entry["backend"])
        case_tags = {
            "bcas.run_id": run_id,
            "bcas.case": key,
            "bcas.model_fingerprint": fingerprint,
            "bcas.config_id": str(row.get("config_id")),
        }
        if row.get("status"):  # passed, failed, incomplete, error (bcas.records.case_status)
            case_tags["bcas.status"] = str(row["status"])
            if row.get("reason"):
                case_tags["bcas.status_reason"] = str(row["reason"])[:5000]  # MLflow's tag value limit
        if one.get("dataset_hash"):
            case_tags["bcas.dataset_hash"] = str(one["dataset_hash"])
        if one.get("prompt_hash"):
            case_tags["bcas.prompt_hash"] = str(one["prompt_hash"])
        gate_row = gates.get((str(row.get("model")), str(row.get("dataset")), str(row.get("config_id"))))
        if gate_row is not None:  # the regression gate's verdict, and how a sequential gate reached it
            case_tags["bcas.gate"] = str(gate_row.get("verdict"))
            if gate_row.get("how"):
                case_tags["bcas.gate_how"] = str(gate_row["how"])[:5000]
                case_tags["bcas.gate_items_used"] = str(gate_row.get("items_used"))
        if row.get("items_note"):  # a case evaluated on fewer items than its file holds: "20 of 50 items; ..."
            case_tags["bcas.items_note"] = str(row["items_note"])
        if row.get("latency_source"):  # live, or cache: the latency metrics are the recorded times
            case_tags["bcas.latency_source"] = str(row["latency_source"])
        case_tags.update(verdict_tags(summary, row))
        metrics = {name: v for name in CASE_METRICS if (v := _number(row.get(name))) is not None}
        tokens_in = sum(float(r.get("tokens_in") or 0) for r in case_records)
        tokens_out = sum(float(r.get("tokens_out") or 0) for r in case_records)
        metrics["tokens_in"], metrics["tokens_out"] = tokens_in, tokens_out
        total_in, total_out = total_in + tokens_in, total_out + tokens_out
        if (cost := _number(row.get("cost_usd"))) is None:
            cost_known = False
        else:
            total_cost += cost
        cases.append(CaseResult(key, case_params, case_tags, metrics))
    names = case_names([c.params for c in cases])
    cases = [CaseResult(c.key, c.params, c.tags, c.metrics, name) for c, name in zip(cases, names, strict=True)]
    run_metrics = {"cases": float(len(cases)), "answers": float(len(records)), "tokens_in": total_in}
    statuses = [c.tags.get("bcas.status") for c in cases]
    if any(statuses):  # the cases that failed, stopped short or raised: none of their accuracies is logged
        run_metrics["cases_not_passed"] = float(sum(1 for st in statuses if st and st != "passed"))
    run_metrics["tokens_out"] = total_out
    if cost_known and cases:
        run_metrics["cost_usd"] = total_cost  # an unknown price leaves the total out, never 0
    artifacts = [run_dir / name for name in ARTIFACTS if (run_dir / name).is_file()]
    name = run_name([c.params["grid"] for c in cases], [c.params["model"] for c in cases]) or run_id
    return RunFolder(run_dir, run_id, params, tags, run_metrics, cases, artifacts, name)
