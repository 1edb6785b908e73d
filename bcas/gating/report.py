"""The regression gate's verdict where people look: terminal summary, index.html, JUnit XML.

At session end the per-case results (``gate.<token>.<worker>.json``, one per
process) and the collection-time plan (``gate-plan.<token>.json``) are joined into
one ``GateReport``: per gated case the paired items, both accuracies on them, the
discordant counts both ways, the p-value, the Holm threshold at the case's rank in
its family (Holm 1979 step-down, missing p-values counted as 1), the verdict; and the
overall verdict, which says so when the gate could not have failed.  Per case, the
numbers behind the in-place verdict as JUnit properties (:func:`junit_properties`; the
pytest front door attaches them to its report).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bcas.gating.baseline import GateResult, holm_families
from bcas.gating.plan import CasePlan, GatePlan, load_plan
from bcas.records.case_status import PASSED, CaseStatus, read_case_statuses

VERDICT_FAIL = "FAIL"
VERDICT_PASS = "pass"
VERDICT_CANNOT_FAIL = "pass (cannot fail)"
VERDICT_NOT_RUN = "not run"
VERDICT_CASE = "case "  # + the case's status: a case that failed, stopped short or raised has no result to gate


@dataclass
class GateRow:
    case_id: str
    grid: str
    family: str
    family_size: int
    n_paired: int
    baseline_acc: float | None
    current_acc: float | None
    worse_only: int | None
    better_only: int | None
    p_value: float | None
    holm_threshold: float | None
    p_holm: float | None
    min_drop: float | None
    verdict: str
    compared_with: str = ""  # the baseline's model when another, and any --bcas-allow-mismatch override
    case_status: str = ""  # the case's status (bcas.records.case_status), when the run folder has it
    reason: str = ""  # why a case that did not pass did not
    how: str = ""  # --bcas-gate-sequential: how the verdict was reached ("stopped after K of N items: ...")
    items_used: int | None = None  # --bcas-gate-sequential: paired items the decision used (K of n_paired)


@dataclass
class GateReport:
    baseline: str
    alpha: float
    family: str
    test: str
    metrics: list[str]
    rows: list[GateRow]
    not_gated: list[tuple[str, str]] = field(default_factory=list)
    holm_failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.verdict == VERDICT_FAIL or r.verdict.startswith(VERDICT_CASE) for r in self.rows)

    @property
    def cannot_fail(self) -> list[GateRow]:
        return [r for r in self.rows if r.verdict == VERDICT_CANNOT_FAIL]

    @property
    def overall(self) -> str:
        """FAIL, PASS, or a pass that says how much of the gate could not have failed."""
        broken = sum(r.verdict.startswith(VERDICT_CASE) for r in self.rows)
        if self.failed:
            n = sum(r.verdict == VERDICT_FAIL for r in self.rows)
            parts = [f"{n} of {len(self.rows)} gated cases significantly worse than the baseline"] if n else []
            if broken:
                parts.append(f"{broken} of {len(self.rows)} gated cases failed, stopped short or raised (no result)")
            return "FAIL: " + "; ".join(parts)
        if not self.rows:
            return "NOTHING GATED: the baseline matches no case of this run"
        stuck = len(self.cannot_fail)
        if stuck == len(self.rows):
            return (
                f"CANNOT FAIL: none of the {stuck} gated cases has enough paired items to reach significance "
                f"at alpha {self.alpha:g}; this pass measures nothing"
            )
        not_run = sum(r.verdict == VERDICT_NOT_RUN for r in self.rows)
        notes = []
        if stuck:
            notes.append(f"{stuck} of {len(self.rows)} gated cases could not fail")
        if not_run:
            notes.append(f"{not_run} did not run")
        return "PASS" + (f" ({'; '.join(notes)})" if notes else "")

    def lines(self) -> list[str]:
        """The terminal summary section."""
        out = [
            f"baseline {self.baseline}; {self.test} on {', '.join(self.metrics)}; alpha {self.alpha:g}, "
            f"Holm over each {self.family} family",
            f"{'case':<44}{'n':>5}{'base%':>7}{'cur%':>7}{'b-only':>7}{'c-only':>7}{'p':>10}{'Holm thr':>10}"
            f"{'Holm p':>9}{'min drop':>9}  verdict",
        ]
        for r in self.rows:
            out.append(
                f"{r.case_id[:43]:<44}{r.n_paired:>5}{_pct(r.baseline_acc):>7}{_pct(r.current_acc):>7}"
                f"{_int(r.worse_only):>7}{_int(r.better_only):>7}{_num(r.p_value):>10}{_num(r.holm_threshold):>10}"
                f"{_num(r.p_holm):>9}{_pct(r.min_drop, '-'):>9}  {r.verdict}"
            )
        out.extend(f"{r.case_id}: {r.verdict}: {r.reason}" for r in self.rows if r.verdict.startswith(VERDICT_CASE))
        out.extend(f"{r.case_id}: sequential gate: {r.how}" for r in self.rows if r.how)
        for case_id, reason in self.not_gated[:10]:
            out.append(f"not gated: {case_id}: {reason}")
        if len(self.not_gated) > 10:
            out.append(f"not gated: ... and {len(self.not_gated) - 10} more")
        out.append(
            "b-only: items only the baseline got right; c-only: only the current run; Holm thr: alpha over "
            "the cases left at the case's rank (the step-down stops at the first p above its threshold, so "
            "FAIL <=> Holm p <= alpha); min drop: the smallest accuracy drop (points) the case could call "
            "significant, '-' when none"
        )
        out.append(f"overall: {self.overall}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overall": self.overall, "failed": self.failed}


def _pct(v: float | None, empty: str = "") -> str:
    return empty if v is None else f"{v * 100:.1f}"


def _int(v: int | None) -> str:
    return "" if v is None else str(v)


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}"


def read_results(run_dir: Path, token: str) -> list[GateResult]:
    """Gate results of this session (all its workers); older sessions' files are removed."""
    run_dir = Path(run_dir)
    for path in run_dir.glob("gate.*.json"):
        if not path.name.startswith(f"gate.{token}."):
            path.unlink(missing_ok=True)
    out: list[GateResult] = []
    for path in sorted(run_dir.glob(f"gate.{token}.*.json")):
        try:
            out.extend(GateResult(**d) for d in json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, TypeError):
            continue
    return out


def build_report(plan: GatePlan | None, results: list[GateResult]) -> GateReport | None:
    """Join the plan and the results; run the full Holm step-down in each family."""
    if plan is None and not results:
        return None
    planned: dict[str, CasePlan] = plan.cases if plan is not None else {}
    # Each case once (a rerun of a case in one session keeps its last result).
    latest = {r.case_id: r for r in results}
    verdicts: dict[str, tuple[bool, float, float]] = {}
    holm_failures = []
    for members, reject, adjusted_p in holm_families(list(latest.values())).values():
        size = max([len(members)] + [m.family_size for m in members])
        ranked = sorted(range(len(members)), key=lambda i: members[i].p_value)
        first_rank: dict[float, int] = {}
        for rank, i in enumerate(ranked):
            member = members[i]
            # Tied p-values stand or fall together, at the strictest threshold of their group.
            threshold = member.alpha / (size - first_rank.setdefault(member.p_value, rank))
            verdicts[member.case_id] = (reject[i], threshold, adjusted_p[i])
            if reject[i] and not member.failed_now:
                holm_failures.append(member.message(threshold, "Holm step-down"))
    rows = []
    order = [c.case_id for c in planned.values() if c.gated] + [cid for cid in latest if cid not in planned]
    for case_id in order:
        r = latest.get(case_id)
        cp = planned.get(case_id)
        if r is None and cp is not None:
            rows.append(
                GateRow(
                    case_id,
                    cp.grid,
                    cp.family,
                    cp.family_size,
                    cp.n_paired,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    cp.min_drop,
                    VERDICT_NOT_RUN,
                )
            )
            continue
        assert r is not None
        rejected, threshold, adjusted = verdicts[case_id]
        verdict = VERDICT_FAIL if rejected or r.failed_now else (VERDICT_PASS if r.can_fail else VERDICT_CANNOT_FAIL)
        rows.append(
            GateRow(
                case_id,
                r.grid,
                r.family,
                r.family_size,
                r.n_paired,
                r.baseline_acc,
                r.current_acc,
                r.worse_only,
                r.better_only,
                r.p_value,
                threshold,
                adjusted,
                r.min_drop,
                verdict,
                r.baseline,
                how=r.how,
                items_used=r.stopped_at,
            )
        )
    if plan is not None:
        alpha, family, test, baseline = plan.options.alpha, plan.options.family, plan.options.test, plan.baseline
        not_gated = [(c.case_id, c.reason) for c in planned.values() if not c.gated]
        metrics = sorted({c.metric for c in planned.values()})
    else:
        first = results[0]
        alpha, family, test, baseline = first.alpha, first.family, first.test, "(baseline)"
        not_gated = []
        metrics = sorted({r.metric for r in results})
    return GateReport(baseline, alpha, family, test, metrics, rows, not_gated, holm_failures)


def session_gate_report(run_dir: Path, token: str) -> GateReport | None:
    """This session's gate report from the files its processes wrote, or None when no gate ran.

    The report is also written to ``gate-report.json`` in ``run_dir`` for CI tooling.
    """
    report = build_report(load_plan(run_dir, token), read_results(run_dir, token))
    path = Path(run_dir) / "gate-report.json"
    if report is None:
        path.unlink(missing_ok=True)
        return None
    with_case_statuses(report, read_case_statuses(Path(run_dir)))
    path.write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")
    return report


def with_case_statuses(report: GateReport, statuses: list[CaseStatus]) -> None:
    """Mark each gated case that did not pass (failed, incomplete, error): its accuracy is no
    result, so its row shows the case's status and reason in place of a verdict and a current accuracy."""
    by_case = {s.case_id: s for s in statuses}
    for row in report.rows:
        found = by_case.get(row.case_id)
        if found is None:
            continue
        row.case_status, row.reason = found.status, found.reason
        if found.status != PASSED:
            row.verdict, row.current_acc = VERDICT_CASE + found.status, None
            row.worse_only = row.better_only = None


def junit_properties(result: GateResult | None, plan: CasePlan | None) -> list[tuple[str, str]]:
    """Per-case JUnit properties: the in-place verdict (Holm's first step) and the numbers behind it."""
    if result is None and (plan is None or not plan.gated):
        return [("bcas_gate", "not gated: " + plan.reason)] if plan is not None else []
    if result is None:
        assert plan is not None
        return [
            ("bcas_gate", VERDICT_NOT_RUN),
            ("bcas_gate_n_paired", str(plan.n_paired)),
            ("bcas_gate_can_fail", str(plan.can_fail).lower()),
        ]
    verdict = VERDICT_FAIL if result.failed_now else (VERDICT_PASS if result.can_fail else VERDICT_CANNOT_FAIL)
    return [
        ("bcas_gate", verdict),
        ("bcas_gate_metric", result.metric),
        ("bcas_gate_test", result.test),
        ("bcas_gate_n_paired", str(result.n_paired)),
        ("bcas_gate_baseline_acc", f"{result.baseline_acc:.4f}"),
        ("bcas_gate_current_acc", f"{result.current_acc:.4f}"),
        ("bcas_gate_baseline_only", str(result.worse_only)),
        ("bcas_gate_current_only", str(result.better_only)),
        ("bcas_gate_p", f"{result.p_value:.6g}"),
        ("bcas_gate_holm_threshold", f"{result.threshold:.6g}"),
        ("bcas_gate_family", f"{result.family} ({result.family_size} cases)"),
        ("bcas_gate_can_fail", str(result.can_fail).lower()),
        ("bcas_gate_min_drop_pts", "" if result.min_drop is None else f"{result.min_drop * 100:.2f}"),
    ] + _sequential_properties(result)


def _sequential_properties(result: GateResult) -> list[tuple[str, str]]:
    """``--bcas-gate-sequential``: how the verdict was reached, the items used and the e-value."""
    if not result.how:
        return []
    return [
        ("bcas_gate_sequential", result.how),
        ("bcas_gate_items_used", str(result.stopped_at)),
        ("bcas_gate_e_value", "" if result.e_value is None else f"{result.e_value:.6g}"),
    ]
