"""CI regression gate: compare a case's accuracy with a baseline run on the same items.

A case fails when (a) its EM accuracy is below an absolute floor (``min_accuracy``
marker or ``--bcas-min-accuracy``), or (b) it is significantly worse than the
baseline on the items both runs share: exact one-sided McNemar test on the paired
table, Holm-corrected across every gated case of the session.

Holm's procedure needs every p-value, but a case must pass or fail when it runs.
So a case fails in place when its p-value clears Holm's first (strictest) step,
p ≤ α/m with m the number of gated cases collected — every such case is also
rejected by the full procedure.  At session end the full Holm step-down runs over
all p-values; a case it rejects that the in-place check let pass is reported in the
terminal summary and makes the session exit non-zero.

Baselines are either a previous run's ``records.jsonl`` (paired per item) or a
baseline file written by ``python -m bcas.report.gate write RUN_DIR OUT.json``,
which stores per-case item outcomes.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bcas.report.summary import paired_table
from bcas.stats import holm_bonferroni, mcnemar_exact_one_sided

BASELINE_VERSION = 1


class BaselineError(ValueError):
    """A baseline file cannot be read."""


def case_key(rec: dict[str, Any]) -> str:
    """Cases are matched by model, dataset, config id and dataset content hash."""
    return "|".join(str(rec.get(k, "")) for k in ("model", "dataset", "config_id", "dataset_hash"))


def _read_records(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):
                    continue  # torn last line of an interrupted run: not a record
                raise BaselineError(f"{path}:{line_no}: invalid JSON ({exc.msg})") from None
    return out


def build_baseline(records: list[dict[str, Any]]) -> dict[str, Any]:
    cases: dict[str, dict[str, Any]] = {}
    for rec in records:
        key = case_key(rec)
        case = cases.setdefault(
            key,
            {"model": rec.get("model"), "dataset": rec.get("dataset"), "label": rec.get("label"),
             "config_id": rec.get("config_id"), "dataset_hash": rec.get("dataset_hash"), "items": {}},
        )
        case["items"][str(rec.get("item_id"))] = bool(rec.get("correct_em"))
    for case in cases.values():
        n = len(case["items"])
        case["n"] = n
        case["accuracy"] = sum(case["items"].values()) / n if n else 0.0
    return {"version": BASELINE_VERSION, "cases": cases}


def load_baseline(path: str | Path) -> dict[str, dict[str, bool]]:
    """Map case key -> {item_id: correct} from a baseline JSON or a records JSONL."""
    path = Path(path)
    if path.is_dir():
        path = path / "records.jsonl"
    if not path.is_file():
        raise BaselineError(f"{path}: baseline file not found")
    if path.suffix == ".jsonl":
        data = build_baseline(_read_records(path))
    else:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise BaselineError(f"{path}: invalid JSON ({exc.msg})") from None
        if not isinstance(data, dict) or "cases" not in data:
            raise BaselineError(f"{path}: not a bcas baseline (no 'cases'); write one with "
                                "`python -m bcas.report.gate write RUN_DIR OUT.json`")
    return {key: {str(i): bool(v) for i, v in case["items"].items()} for key, case in data["cases"].items()}


@dataclass
class GateResult:
    case_id: str
    key: str
    n_paired: int
    current_acc: float
    baseline_acc: float
    worse_only: int
    better_only: int
    p_value: float
    threshold: float
    failed_now: bool

    def message(self) -> str:
        return (
            f"regression gate: {self.case_id}: accuracy {self.current_acc:.3f} vs baseline {self.baseline_acc:.3f} "
            f"on {self.n_paired} shared items; baseline-only correct {self.worse_only}, current-only correct "
            f"{self.better_only}; one-sided exact McNemar p = {self.p_value:.4g} "
            f"(Holm first-step threshold {self.threshold:.4g})"
        )


def check_case(
    case_id: str,
    records: list[dict[str, Any]],
    baseline: dict[str, dict[str, bool]],
    n_gated: int,
    alpha: float = 0.05,
) -> GateResult | None:
    """Paired one-sided test of the case against the baseline; None if nothing to compare."""
    if not records:
        return None
    key = case_key(records[0])
    base = baseline.get(key)
    if not base:
        return None
    current = {str(r.get("item_id")): bool(r.get("correct_em")) for r in records}
    a, b, c, d = paired_table(current, base)
    n = a + b + c + d
    if n == 0:
        return None
    p = mcnemar_exact_one_sided(first_only=b, second_only=c)  # small when current (first) is worse
    threshold = alpha / max(1, n_gated)
    return GateResult(case_id, key, n, (a + b) / n, (a + c) / n, c, b, p, threshold, p <= threshold)


def holm_session(results: list[GateResult], alpha: float = 0.05) -> list[GateResult]:
    """Cases the full Holm procedure rejects (each a significant regression)."""
    if not results:
        return []
    reject, _ = holm_bonferroni([r.p_value for r in results], alpha=alpha)
    return [r for r, rej in zip(results, reject, strict=True) if rej]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bcas.report.gate", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write a baseline file from a run directory or records file")
    w.add_argument("run", help="reports/<run> directory or a records.jsonl file")
    w.add_argument("out", help="baseline JSON to write, e.g. fixtures/baselines/smoke.json")
    args = parser.parse_args(argv)
    src = Path(args.run)
    if src.is_dir():
        src = src / "records.jsonl"
    try:
        data = build_baseline(_read_records(src))
    except (OSError, BaselineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    print(f"wrote {args.out}: {len(data['cases'])} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
