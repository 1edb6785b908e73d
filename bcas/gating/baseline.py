"""CI regression gate: compare a case's accuracy with a baseline run on the same items.

A case fails when (a) its accuracy in the grid's primary metric is below an absolute
floor (``min_accuracy`` marker or ``--bcas-min-accuracy``), or (b) it is significantly
worse than the baseline on the items both runs share, in that same metric (a per-item
pass/fail field of the records; ``correct_em`` unless the grid declares
``primary_metric``).

The test on the paired items: with no tolerance, the exact one-sided McNemar test
(``bcas.stats.mcnemar_exact_one_sided``: under "no regression" each discordant item
is a fair coin); with a tolerance ``max_drop`` (a fraction), Tango's (1998) score
test of ``H0: drop <= max_drop`` (``bcas.stats.tango_noninferiority``), so a case
fails only when the drop is significantly larger than the tolerance.

The p-values are Holm-corrected over a family of gated cases: the whole session
(default), each grid, or each case alone.  Holm's procedure needs every p-value, but
a case must pass or fail when it runs, so a case fails in place when its p-value
clears Holm's first (strictest) step, ``p <= alpha / m`` with ``m`` the number of
gated cases of its family collected -- every such case is also rejected by the full
procedure.  At session end the full Holm step-down runs over each family (a planned
case that produced no p-value counts as ``p = 1``); a case it rejects that the
in-place check let pass is reported and makes the session exit non-zero.

Baselines are either a previous run's ``records.jsonl`` (paired per item) or a
baseline file written by ``bcas gate write RUN_DIR OUT.json``,
which stores per-case item outcomes of every pass/fail field of the records.

Everything here is a function of records and baseline files; nothing imports pytest.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bcas.gating.errors import BaselineError
from bcas.grading.outcomes import METRICS
from bcas.grading.outcomes import outcome as metric_outcome
from bcas.report.paired import paired_table
from bcas.stats import (
    holm_bonferroni,
    mcnemar_exact_one_sided,
    mcnemar_min_discordant,
    tango_min_worse_only,
    tango_noninferiority,
)

BASELINE_VERSION = 2
DEFAULT_METRIC = "correct_em"
KEY_FIELDS = ("model", "dataset", "config_id", "dataset_hash")


def case_key(rec: dict[str, Any]) -> str:
    """A baseline case: model, dataset, config id and dataset content hash (of the item subset)."""
    return "|".join(str(rec.get(k, "")) for k in KEY_FIELDS)


def item_digest(question: Any, answers: Any) -> str:
    """Content digest of an item (question and gold answers): pairs items across item subsets safely."""
    text = json.dumps([str(question), [str(a) for a in answers or ()]], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def item_outcomes(records: list[dict[str, Any]], metric: str = DEFAULT_METRIC) -> dict[str, bool]:
    """Item id -> passed, in ``metric`` as :func:`bcas.grading.outcomes.outcome` reads it (an empty
    or errored answer fails).  With several records per item (``--bcas-epochs``) an item passes
    when at least half of its graded epochs pass."""
    votes: dict[str, list[bool]] = defaultdict(list)
    for rec in records:
        value = metric_outcome(rec, metric)
        if value is not None:
            votes[str(rec.get("item_id"))].append(value)
    return {item_id: 2 * sum(v) >= len(v) for item_id, v in votes.items()}


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
    """Per-case item outcomes: ``items`` (correct_em), ``metrics`` (every boolean field of the
    records), ``digests`` (item content, for pairing across item subsets) and the model's
    label and fingerprint."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        grouped[case_key(rec)].append(rec)
    cases: dict[str, dict[str, Any]] = {}
    for key, recs in grouped.items():
        first = recs[0]
        names = sorted({k for r in recs for k, v in r.items() if isinstance(v, bool)} | {DEFAULT_METRIC} | set(METRICS))
        metrics = {name: item_outcomes(recs, name) for name in names}
        items = metrics[DEFAULT_METRIC]
        n = len(items)
        cases[key] = {
            "model": first.get("model"),
            "model_fingerprint": first.get("model_fingerprint"),
            "prompt_hash": first.get("prompt_hash"),
            "dataset": first.get("dataset"),
            "label": first.get("label"),
            "config_id": first.get("config_id"),
            "dataset_hash": first.get("dataset_hash"),
            "items": items,
            "metrics": {k: v for k, v in metrics.items() if v},
            "digests": {
                str(r.get("item_id")): item_digest(r.get("question"), r.get("answers")) for r in recs if "question" in r
            },
            "n": n,
            "accuracy": sum(items.values()) / n if n else 0.0,
        }
    return {"version": BASELINE_VERSION, "cases": cases}


@dataclass
class BaselineCase:
    """One case of a baseline: whose outcomes they are, and the items' outcomes in one metric."""

    key: str
    model: str
    fingerprint: str
    dataset: str
    config_id: str
    dataset_hash: str
    label: str
    items: dict[str, bool]
    digests: dict[str, str]
    prompt_hash: str = ""


def _case_items(path: Path, key: str, case: Any, metric: str) -> dict[str, bool] | None:
    if not isinstance(case, dict) or not isinstance(case.get("items"), dict):
        raise BaselineError(f"{path}: case {key!r}: field 'items' must be an object of item id -> true/false")
    metrics = case.get("metrics")
    if isinstance(metrics, dict) and metric in metrics:
        values = metrics[metric]
    elif metric == DEFAULT_METRIC:
        values = case["items"]  # version-1 files and hand-edited ones carry correct_em as 'items'
    else:
        return None
    if not isinstance(values, dict):
        raise BaselineError(f"{path}: case {key!r}: metric {metric!r} must be an object of item id -> true/false")
    out = {}
    for item_id, value in values.items():
        if not isinstance(value, bool) and value is not None:
            raise BaselineError(
                f"{path}: case {key!r}: item {item_id!r}: {metric} must be true or false, got {value!r}"
            )
        if value is not None:
            out[str(item_id)] = value
    return out


def _read_baseline_data(path: Path) -> dict[str, Any]:
    if path.is_dir():
        path = path / "records.jsonl"
    if not path.is_file():
        raise BaselineError(f"{path}: baseline file not found")
    if path.suffix == ".jsonl":
        return build_baseline(_read_records(path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), dict):
        raise BaselineError(
            f"{path}: not a bcas baseline (no 'cases'); write one with `bcas gate write RUN_DIR OUT.json`"
        )
    return data


def load_baseline_cases(path: str | Path, metric: str = DEFAULT_METRIC) -> list[BaselineCase]:
    """Every case of a baseline JSON or records JSONL with its items' outcomes in ``metric``
    (cases that never recorded ``metric`` are left out)."""
    path = Path(path)
    data = _read_baseline_data(path)
    out = []
    for key, case in data["cases"].items():
        items = _case_items(path, key, case, metric)
        if items is None:
            continue
        digests = case.get("digests") if isinstance(case.get("digests"), dict) else {}
        out.append(
            BaselineCase(
                str(key),
                str(case.get("model") or ""),
                str(case.get("model_fingerprint") or ""),
                str(case.get("dataset") or ""),
                str(case.get("config_id") or ""),
                str(case.get("dataset_hash") or ""),
                str(case.get("label") or ""),
                items,
                {str(k): str(v) for k, v in digests.items()},
                str(case.get("prompt_hash") or ""),
            )
        )
    return out


def load_baseline(path: str | Path, metric: str = DEFAULT_METRIC) -> dict[str, dict[str, bool]]:
    """Map case key -> {item_id: passed} in ``metric``, from a baseline JSON or a records JSONL."""
    return {c.key: c.items for c in load_baseline_cases(path, metric)}


def match_baseline(
    cases: list[BaselineCase],
    model: str,
    dataset: str,
    config_id: str,
    dataset_hash: str,
    digests: dict[str, str],
) -> tuple[BaselineCase | None, dict[str, bool], str]:
    """The baseline case to compare a case with, its paired items' outcomes, and a note.

    The baseline's case of the same dataset and configuration, run by the same model
    (by label) when the baseline has it, else by the baseline's only model for it (a
    new model against the old).  Items pair by id over the same item subset (equal
    dataset hash), or, across subsets, by id and content digest.  ``(None, {}, why)``
    when nothing pairs.
    """
    same_config = [c for c in cases if c.dataset == dataset and c.config_id == config_id]
    if not same_config:
        return None, {}, "the baseline has no case of this dataset and configuration"
    models = sorted({c.model for c in same_config})
    if model in models:
        chosen_model, note = model, ""
    elif len(models) == 1:
        chosen_model, note = models[0], f"against baseline model {models[0]}"
    else:
        return None, {}, f"the baseline ran this configuration with {', '.join(models)}, none of them {model}"
    best: tuple[BaselineCase | None, dict[str, bool]] = (None, {})
    for c in (c for c in same_config if c.model == chosen_model):
        if c.dataset_hash == dataset_hash:
            paired = {i: v for i, v in c.items.items() if i in digests}
        else:
            paired = {i: v for i, v in c.items.items() if i in digests and c.digests.get(i) == digests[i]}
        if c.dataset_hash == dataset_hash or len(paired) > len(best[1]):
            best = (c, paired)
            if c.dataset_hash == dataset_hash:
                break
    if best[0] is None or not best[1]:
        return (
            None,
            {},
            (
                "no item of this case's subset is in the baseline with the same content "
                "(a baseline written before item digests pairs only the same item subset)"
            ),
        )
    return best[0], best[1], note


def identity_differences(found: BaselineCase, fingerprint: str, prompt: str, *, new_model: bool = False) -> list[str]:
    """How the answers a baseline claims differ in identity from this run's (bcas.identity).

    A baseline without a fingerprint or prompt hash (written before they were recorded)
    claims nothing about them.  Dataset content is checked item by item when pairing
    (same dataset hash, or the same item digests), so it never appears here.  With
    ``new_model`` (``--bcas-gate-new-model``) the model is what is being compared, so a
    different fingerprint is not a difference; the prompt hash still is.
    """
    out = []
    if found.fingerprint and fingerprint and found.fingerprint != fingerprint and not new_model:
        out.append(f"model fingerprint {found.fingerprint} ({found.model}, baseline) vs {fingerprint} (this run)")
    if found.prompt_hash and prompt and found.prompt_hash != prompt:
        out.append(f"prompt hash {found.prompt_hash} (baseline) vs {prompt} (this run)")
    return out


def paired_test(worse_only: int, better_only: int, n: int, max_drop: float = 0.0) -> tuple[float, str]:
    """p-value and name of the gate's test on a paired table (small p: current worse than baseline)."""
    if max_drop <= 0.0:
        # first = the current run: small p when it wins few of the discordant items.
        return mcnemar_exact_one_sided(first_only=better_only, second_only=worse_only), "one-sided exact McNemar"
    p = tango_noninferiority(worse_only, better_only, n, max_drop)
    return p, f"Tango score test, drop > {max_drop * 100:g} pts"


def min_detectable(n: int, threshold: float, max_drop: float = 0.0) -> tuple[int | None, float | None]:
    """Fewest baseline-only items that can be significant on ``n`` paired items, and that drop.

    ``(None, None)`` when no outcome on ``n`` items reaches ``threshold``: the case cannot fail.
    """
    if n <= 0:
        return None, None
    k = mcnemar_min_discordant(threshold, n) if max_drop <= 0.0 else tango_min_worse_only(n, max_drop, threshold)
    if k is None or k > n:
        return None, None
    return k, k / n


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
    family: str = "session"
    family_size: int = 1
    alpha: float = 0.05
    max_drop: float = 0.0
    metric: str = DEFAULT_METRIC
    test: str = "one-sided exact McNemar"
    grid: str = ""
    min_discordant: int | None = None
    min_drop: float | None = None
    baseline: str = ""  # the baseline model (and fingerprint) when it is not the current model
    # --bcas-gate-sequential (bcas.gating.sequential): the state (fail, pass, undecided), the
    # paired items used (K of n_paired), the largest e-value and how the verdict was reached
    sequential: str = ""
    stopped_at: int | None = None
    e_value: float | None = None
    how: str = ""

    @property
    def can_fail(self) -> bool:
        return self.min_discordant is not None

    def message(self, threshold: float | None = None, step: str = "Holm first-step") -> str:
        """The failure message with every number the verdict used.

        ``threshold``: the Holm threshold the case was rejected at (default: the
        first step's ``alpha / family_size``, the in-place check).
        """
        threshold = self.threshold if threshold is None else threshold
        tolerance = f" by more than {self.max_drop * 100:g} points" if self.max_drop > 0 else ""
        whose = f" ({self.baseline})" if self.baseline else ""
        how = f"; sequential gate: {self.how}" if self.how else ""
        used = f"{self.stopped_at} of " if self.stopped_at is not None and self.stopped_at < self.n_paired else ""
        return (
            f"regression gate: {self.case_id}: {self.metric} accuracy {self.current_acc:.3f} vs baseline "
            f"{self.baseline_acc:.3f}{whose} on {used}{self.n_paired} shared items; baseline-only correct {self.worse_only}, "
            f"current-only correct {self.better_only}; {self.test} p = {self.p_value:.4g} <= {step} "
            f"threshold {threshold:.4g} (alpha {self.alpha:g}, {self.family_size} gated cases in family "
            f"{self.family}): significantly worse{tolerance}{how}"
        )


def paired_result(
    case_id: str,
    key: str,
    records: list[dict[str, Any]],
    base: dict[str, bool],
    n_gated: int,
    alpha: float = 0.05,
    *,
    metric: str = DEFAULT_METRIC,
    max_drop: float = 0.0,
    family: str = "session",
    grid: str = "",
    baseline: str = "",
) -> GateResult | None:
    """Test the case's records against the baseline's item outcomes ``base``; None if no item is shared.

    ``n_gated`` is the size of the case's Holm family; the case fails in place when
    ``p <= alpha / n_gated`` (Holm's first step).
    """
    a, b, c, d = paired_table(item_outcomes(records, metric), base)
    n = a + b + c + d
    if n == 0:
        return None
    p, test = paired_test(worse_only=c, better_only=b, n=n, max_drop=max_drop)
    m = max(1, int(n_gated))
    threshold = alpha / m
    k, drop = min_detectable(n, threshold, max_drop)
    return GateResult(
        case_id,
        key,
        n,
        (a + b) / n,
        (a + c) / n,
        c,
        b,
        p,
        threshold,
        p <= threshold,
        family=family,
        family_size=m,
        alpha=alpha,
        max_drop=max_drop,
        metric=metric,
        test=test,
        grid=grid,
        min_discordant=k,
        min_drop=drop,
        baseline=baseline,
    )


def holm_families(results: list[GateResult]) -> dict[str, tuple[list[GateResult], list[bool], list[float]]]:
    """Full Holm step-down within each family: results, rejected flags, adjusted p-values.

    A family's size is the number of gated cases planned for it; cases that produced
    no p-value (not run, stopped early) enter as ``p = 1``, so a short run is judged
    as strictly as the planned one.
    """
    by_family: dict[str, list[GateResult]] = defaultdict(list)
    for r in results:
        by_family[r.family].append(r)
    out = {}
    for family, members in by_family.items():
        size = max([len(members)] + [r.family_size for r in members])
        pvalues = [r.p_value for r in members] + [1.0] * (size - len(members))
        reject, adjusted = holm_bonferroni(pvalues, alpha=members[0].alpha)
        out[family] = (members, reject[: len(members)], adjusted[: len(members)])
    return out


def holm_session(results: list[GateResult], alpha: float | None = None) -> list[GateResult]:
    """Cases the full Holm procedure rejects within their families (each a significant regression).

    ``alpha`` overrides the level each result carries.
    """
    if alpha is not None:
        results = [replace(r, alpha=alpha) for r in results]
    rejected: list[GateResult] = []
    for members, reject, _ in holm_families(results).values():
        rejected.extend(r for r, rej in zip(members, reject, strict=True) if rej)
    return rejected


def check_baseline(value: str | None) -> None:
    """A baseline is a readable run folder, records JSONL or baseline JSON (read, not written);
    ``BaselineError`` says what is accepted."""
    if not value:
        return
    try:
        load_baseline_cases(value)
    except BaselineError as exc:
        raise BaselineError(
            f"{exc}; accepted: a run folder, its records.jsonl, or a baseline JSON (bcas gate write RUN_DIR OUT.json)"
        ) from None


def write_baseline_file(run: str | Path, out: str | Path) -> str:
    """``bcas gate write RUN OUT.json``: a baseline file from a run folder or records file; returns
    the line saying what was written.  :class:`BaselineError` (nothing written) on a bad input."""
    src = Path(run)
    if src.is_dir():
        src = src / "records.jsonl"
    try:
        data = build_baseline(_read_records(src))
    except OSError as exc:
        raise BaselineError(f"{src}: {exc.strerror or exc}") from None
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    sizes = sorted({case["n"] for case in data["cases"].values()})
    return (
        f"wrote {out}: {len(data['cases'])} cases, {'/'.join(map(str, sizes))} items each; "
        "`bcas gate power` prints the drop each case size can detect"
    )
