"""What the regression gate can catch, known before any case runs.

Once the cases are collected, every case's paired items (its item subset that the
baseline also recorded) and the Holm families are known, so the gate's power is
known too: a case facing Holm threshold ``alpha / m`` (``m`` gated cases in its
family: the threshold it faces when it is the only regression) needs at least
``ceil(log2(m / alpha))`` items that only the baseline gets right before the exact
one-sided McNemar test can reject (``bcas.stats.mcnemar_min_discordant``; McNemar
1947, Holm 1979).  With fewer paired items than that the case cannot fail whatever
the model does; the plan says so, and ``--bcas-gate-strict`` stops the session.

The plan is a function of the cases (as plain objects with an id, grid, dataset,
grid entry and model label), the baseline file and the gate's options; nothing here
imports pytest.  ``bcas gate power`` prints what each number of paired
items can detect (:mod:`bcas.gating.power`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from bcas.gating.baseline import (
    DEFAULT_METRIC,
    BaselineCase,
    GateResult,
    identity_differences,
    item_digest,
    load_baseline_cases,
    match_baseline,
    min_detectable,
    paired_result,
)
from bcas.gating.errors import GateError
from bcas.gating.sequential import DEFAULT_FALLBACK_SHARE, check_share, sequential_result
from bcas.registry import per_item

if TYPE_CHECKING:
    from bcas.grids import GridEntry

FAMILIES = ("session", "grid", "case")
# A CI run is one red/green decision: Holm over the whole session bounds the chance of a
# false red build at alpha however many grids and cases run.  Per grid or per case it
# grows with their number (30 cases tested alone at 0.05: up to 1 - 0.95**30 = 79%).
DEFAULT_FAMILY = "session"


class Labelled(Protocol):
    """A case's model, as the gate sees it: its label (the records' ``model``)."""

    @property
    def label(self) -> str: ...


class PlannedCase(Protocol):
    """A case, as the gate plans it (``bcas.run.settings.Case`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def grid(self) -> str: ...
    @property
    def dataset(self) -> str: ...
    @property
    def entry(self) -> GridEntry: ...
    @property
    def model(self) -> Labelled: ...


C = TypeVar("C", bound=PlannedCase)


@dataclass(frozen=True)
class GateOptions:
    """The gate's level, Holm family, tolerance (a fraction) and strictness."""

    alpha: float = 0.05
    family: str = DEFAULT_FAMILY
    max_drop: float = 0.0
    strict: bool = False
    metric: str | None = None  # --bcas-gate-metric (from the settings): replaces each grid's primary metric
    sequential: bool = False  # --bcas-gate-sequential: decide after every item (bcas.gating.sequential)
    # --bcas-gate-fallback-share: share of alpha the sequential gate's fixed-n test at N keeps
    fallback_share: float = DEFAULT_FALLBACK_SHARE

    @classmethod
    def parse(
        cls,
        alpha: Any = None,
        family: Any = None,
        max_drop_points: Any = None,
        strict: Any = False,
        sequential: Any = False,
        fallback_share: Any = None,
    ) -> GateOptions:
        """Validate option values; ``GateError`` names the option at fault (as its flag)."""
        a = 0.05 if alpha is None else float(alpha)
        if not 0.0 < a < 1.0:
            raise GateError(f"--bcas-alpha must lie strictly between 0 and 1, got {alpha!r}")
        fam = DEFAULT_FAMILY if family in (None, "") else str(family)
        if fam not in FAMILIES:
            raise GateError(f"--bcas-gate-family must be one of {', '.join(FAMILIES)}, got {family!r}")
        pts = 0.0 if max_drop_points is None else float(max_drop_points)
        if not (0.0 <= pts < 100.0 and math.isfinite(pts)):
            raise GateError(f"--bcas-max-drop is in accuracy points and must lie in [0, 100), got {max_drop_points!r}")
        try:
            share = DEFAULT_FALLBACK_SHARE if fallback_share is None else check_share(fallback_share)
        except ValueError as exc:
            raise GateError(f"--bcas-gate-fallback-share {exc}") from None
        return cls(a, fam, pts / 100.0, bool(strict), sequential=bool(sequential), fallback_share=share)

    @property
    def test(self) -> str:
        if self.sequential:
            pts = self.max_drop * 100
            null = f"a drop of at most {pts:g} points" if pts > 0 else "no regression"
            return (
                f"sequential gate (mixture betting e-process on {null}, checked after every item; "
                f"at N undecided: the {self._fixed_test} at alpha x {self.fallback_share:g})"
            )
        return self._fixed_test

    @property
    def _fixed_test(self) -> str:
        if self.max_drop > 0:
            return f"Tango score test of a drop larger than {self.max_drop * 100:g} points"
        return "one-sided exact McNemar"


@dataclass
class CasePlan:
    """One collected case's place in the gate: its paired items, family and power."""

    case_id: str
    grid: str
    metric: str
    key: str
    n_paired: int = 0
    family: str = ""
    family_size: int = 0
    threshold: float = 0.0
    min_discordant: int | None = None
    min_drop: float | None = None
    reason: str = ""  # why the case is not gated
    baseline_model: str = ""  # the baseline's model (label and fingerprint) when it is another model
    mismatch: str = ""  # identity differences compared anyway under --bcas-allow-mismatch
    refused: bool = False  # identity differs and no --bcas-allow-mismatch: a usage error

    @property
    def gated(self) -> bool:
        return not self.reason

    @property
    def can_fail(self) -> bool:
        return self.gated and self.min_discordant is not None


@dataclass
class GatePlan:
    baseline: str
    options: GateOptions
    cases: dict[str, CasePlan]
    items: dict[str, dict[str, bool]] = field(default_factory=dict, repr=False, compare=False)
    seed: int = 0  # the session seed: it orders a sequential case's items (bcas.gating.sequential)

    @property
    def gated(self) -> list[CasePlan]:
        return [c for c in self.cases.values() if c.gated]

    @property
    def cannot_fail(self) -> list[CasePlan]:
        return [c for c in self.gated if not c.can_fail]

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "options": asdict(self.options),
            "cases": [asdict(c) for c in self.cases.values()],
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GatePlan:
        cases = [CasePlan(**c) for c in data["cases"]]
        options = GateOptions(**data["options"])
        return cls(data["baseline"], options, {c.case_id: c for c in cases}, seed=int(data.get("seed", 0)))

    def save(self, run_dir: Path, token: str, worker: str | None = None) -> Path:
        """Write the plan beside the records (the xdist controller reads what a worker planned)."""
        path = plan_path(run_dir, token)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{worker or 'main'}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1), encoding="utf-8")
        tmp.replace(path)
        return path

    def refusal(self) -> str | None:
        """Why the gate refuses this plan (cases whose answers differ in identity from the baseline's), or None."""
        refused = [c for c in self.cases.values() if c.refused]
        if not refused:
            return None
        more = f" (and {len(refused) - 1} more cases)" if len(refused) > 1 else ""
        return (
            f"the gate refuses to compare answers of different identity: {refused[0].case_id}: "
            f"{refused[0].reason.removeprefix('refused: ')}{more}"
        )

    def usage_problem(self) -> str | None:
        """Why ``--bcas-gate-strict`` refuses this plan, or None."""
        if not self.gated:
            return (
                f"regression gate: the baseline {self.baseline} matches none of the {len(self.cases)} "
                "collected cases (same model, dataset, configuration and item subset), so it gates nothing"
            )
        bad = self.cannot_fail
        if not bad:
            return None
        worst = bad[0]
        return (
            f"regression gate: {len(bad)} of {len(self.gated)} gated cases cannot fail at alpha "
            f"{self.options.alpha:g}: "
            + "; ".join(_cannot_fail_text(c) for c in bad[:5])
            + ("; ..." if len(bad) > 5 else "")
            + f". Give each case more items (--bcas-limit, e.g. {_items_needed(worst, self.options)}), "
            "fewer gated cases per Holm family (--bcas-gate-family), or a larger --bcas-alpha"
        )

    def lines(self) -> list[str]:
        """What the gate can catch, for the terminal before the cases run."""
        o = self.options
        gated = self.gated
        out = [
            f"regression gate: baseline {self.baseline}; {o.test} on the grid's primary metric, alpha {o.alpha:g}, "
            f"Holm over each {o.family} family; {len(gated)} of {len(self.cases)} collected cases gated"
        ]
        skipped = [c for c in self.cases.values() if not c.gated]
        for c in skipped[:5]:
            out.append(f"  not gated: {c.case_id}: {c.reason}")
        if len(skipped) > 5:
            out.append(f"  not gated: ... and {len(skipped) - 5} more")
        for c in gated:
            if c.baseline_model:
                out.append(f"  {c.case_id}: compared with the baseline's model {c.baseline_model}")
        for c in self.cannot_fail:
            out.append(f"  CANNOT FAIL: {_cannot_fail_text(c)}")
        able = [c for c in gated if c.can_fail]
        if able:
            drops = sorted(c.min_drop or 0.0 for c in able)
            out.append(
                f"  {len(able)} gated cases can fail; the smallest drop each can detect: "
                f"{drops[0] * 100:.1f}-{drops[-1] * 100:.1f} points"
            )
        if gated and not able:
            out.append("  THE GATE CANNOT FAIL: no gated case can reach significance, whatever the model does")
        return out


def _cannot_fail_text(c: CasePlan) -> str:
    return (
        f"{c.case_id}: {c.n_paired} paired items; its Holm threshold is {c.threshold:.4g} "
        f"({c.family_size} gated cases in family {c.family}) and even {c.n_paired} of {c.n_paired} items "
        "lost cannot reach it"
    )


def _items_needed(c: CasePlan, o: GateOptions) -> int:
    """Fewest paired items with which ``c`` could fail at its threshold."""
    n = max(1, c.n_paired)
    while min_detectable(n, c.threshold, o.max_drop)[0] is None:
        n = n + 1 if n < 64 else int(n * 1.25)
        if n > 1_000_000:
            break
    return n


def primary_metric(grid_name: str, judge: bool = False) -> str:
    """The grid's pass/fail metric: its ``primary_metric`` when it declares one, else ``correct_em``;
    ``judge`` (BCAS grids) is the judge's verdict when a judge is configured, else ``correct_em``."""
    from bcas.grading.outcomes import resolve
    from bcas.grids import get_grid

    try:
        grid = get_grid(grid_name)
    except KeyError:
        return DEFAULT_METRIC
    return resolve(getattr(grid, "primary_metric", None), judge=judge)


def family_of(options: GateOptions, case: PlannedCase) -> str:
    if options.family == "grid":
        return f"grid {case.grid}"
    if options.family == "case":
        return f"case {case.id}"
    return "session"


def plan_gate(
    cases: Sequence[C],
    limits: Mapping[str, int | None],
    baseline: str,
    seed: int,
    options: GateOptions,
    identity: Callable[[C], tuple[str, str]] | None = None,
    allow_mismatch: bool = False,
    judge: bool = False,
    new_model: bool = False,
) -> GatePlan:
    """Pair every collected case with the baseline and compute what each can detect.

    ``cases`` are the run's cases (id, grid, dataset, entry, model); ``limits`` maps a
    case id to its item limit; ``identity`` gives a case's model fingerprint and prompt
    hash.  A case is described exactly as its records will be (model label, dataset name,
    seeded config id, hash of the item subset, item content digests) and matched with
    :func:`bcas.gating.baseline.match_baseline`;
    its paired items are the subset's items the baseline recorded.  ``new_model``
    (``--bcas-gate-new-model``) gates a new model against the baseline's: the model
    fingerprints may differ; a prompt difference is still refused.
    ``BaselineError`` for an unreadable baseline.
    """
    from bcas.data import DatasetError, load_evaluation
    from bcas.grids import get_grid

    baselines: dict[str, list[BaselineCase]] = {}
    plans: dict[str, CasePlan] = {}
    items: dict[str, dict[str, bool]] = {}
    for case in cases:
        metric = options.metric or primary_metric(case.grid, judge)
        if metric not in baselines:
            baselines[metric] = load_baseline_cases(baseline, metric)
        if not per_item(case.entry.kind):
            reason = f"{case.entry.kind} case: no per-item records"
            plans[case.id] = CasePlan(case.id, case.grid, metric, "", reason=reason)
            continue
        try:
            ds = load_evaluation(
                case.dataset, limit=limits.get(case.id), seed=seed, holdout=get_grid(case.grid).holdout
            )
        except DatasetError as exc:  # the case itself stops with this message when it runs
            plans[case.id] = CasePlan(case.id, case.grid, metric, "", reason=str(exc))
            continue
        config_id = replace(case.entry.config, seed=seed).config_id
        digests = {it.id: item_digest(it.question, it.answers) for it in ds.items}
        found, paired, note = match_baseline(baselines[metric], case.model.label, ds.name, config_id, ds.hash, digests)
        plan = CasePlan(case.id, case.grid, metric, found.key if found else "")
        if found is None:
            plan.reason = note
        else:
            items[case.id] = paired
            plan.n_paired = len(paired)
            fingerprint = f" ({found.fingerprint})" if found.fingerprint else ""
            plan.baseline_model = f"{found.model}{fingerprint}" if note else ""
            if identity is not None:
                fingerprint, prompt = identity(case)
                differences = identity_differences(found, fingerprint, prompt, new_model=new_model)
                if new_model and found.fingerprint and fingerprint and found.fingerprint != fingerprint:
                    plan.baseline_model = f"{found.model}{fingerprint_note(found)} [new model: --bcas-gate-new-model]"
                if differences and allow_mismatch:
                    plan.mismatch = "; ".join(differences)
                    plan.baseline_model = (plan.baseline_model or found.model) + (
                        f" [compared despite --bcas-allow-mismatch: {plan.mismatch}]"
                    )
                elif differences:
                    plan.reason = "refused: the answers differ in identity: " + "; ".join(differences)
                    if all(d.startswith("model fingerprint") for d in differences):
                        plan.reason += " (a new model against the baseline's: --bcas-gate-new-model)"
                    plan.refused = True
        plans[case.id] = plan
    sizes: dict[str, int] = {}
    by_id = {c.id: c for c in cases}
    for plan in plans.values():
        if plan.gated:
            plan.family = family_of(options, by_id[plan.case_id])
            sizes[plan.family] = sizes.get(plan.family, 0) + 1
    for plan in plans.values():
        if plan.gated:
            plan.family_size = sizes[plan.family]
            plan.threshold = options.alpha / plan.family_size
            plan.min_discordant, plan.min_drop = min_detectable(plan.n_paired, plan.threshold, options.max_drop)
    return GatePlan(str(baseline), options, plans, items, seed)


# The options a sequential case's decision is recomputed with on resume, as run.json records
# them: (option, its value as the gate uses it, from a recorded raw value, and as a user types it).
_DECIDING: tuple[tuple[str, Callable[[Any], Any], Callable[[GateOptions], Any], Callable[[Any], str]], ...] = (
    ("alpha", lambda raw: GateOptions.parse(alpha=raw).alpha, lambda o: o.alpha, lambda v: f"{v:g}"),
    ("gate-family", lambda raw: GateOptions.parse(family=raw).family, lambda o: o.family, str),
    (
        "max-drop",
        lambda raw: GateOptions.parse(max_drop_points=raw).max_drop,
        lambda o: o.max_drop,
        lambda v: f"{100 * v:g}",
    ),
    (
        "gate-fallback-share",
        lambda raw: GateOptions.parse(fallback_share=raw).fallback_share,
        lambda o: o.fallback_share,
        lambda v: f"{v:g}",
    ),
    (
        "gate-metric",
        lambda raw: None if raw in (None, "") else str(raw),
        lambda o: o.metric,
        lambda v: v or "(each grid's own)",
    ),
)


def resumed_gate_problem(run_dir: Path, token: str, options: GateOptions) -> str | None:
    """Under ``--bcas-gate-sequential``: why this session may not continue ``run_dir`` -- the run
    folder's latest earlier sequential session (its ``run.json`` entry, :mod:`bcas.run.manifest`)
    gated with another level, Holm family, tolerance, fallback share or metric -- or None.

    A resumed case's decision is recomputed from its records with the options the resuming
    session is given (:func:`bcas.gating.sequential.case_decision`), so the same options decide at
    the same item; any other would re-decide the recorded sequence at another level or against
    another null.  An option an earlier entry does not record (written before the option
    existed) or records unreadably is not compared.
    """
    if not options.sequential:
        return None
    try:
        sessions = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8")).get("sessions", [])
    except (OSError, ValueError, AttributeError):
        return None
    for entry in reversed(sessions if isinstance(sessions, list) else []):
        if not isinstance(entry, dict) or entry.get("session") == token:
            continue
        chosen = entry.get("options") or {}
        if str((chosen.get("gate-sequential") or {}).get("value")).lower() not in ("true", "1", "yes"):
            continue
        for name, parse, current, shown in _DECIDING:
            if name not in chosen:
                continue
            try:
                earlier = parse((chosen[name] or {}).get("value"))
            except (GateError, ValueError, TypeError, AttributeError):
                continue
            if earlier != current(options):
                return (
                    f"--bcas-{name} {shown(current(options))} differs from the {shown(earlier)} this run folder's "
                    f"earlier sequential session used: a resumed case is decided again from its records with the "
                    f"value given, so resume with {shown(earlier)} or write into a new run folder"
                )
        return None
    return None


def fingerprint_note(found: BaselineCase) -> str:
    return f" ({found.fingerprint})" if found.fingerprint else ""


def plan_path(run_dir: Path, token: str) -> Path:
    return Path(run_dir) / f"gate-plan.{token}.json"


def load_plan(run_dir: Path, token: str) -> GatePlan | None:
    """This session's plan; plans of older sessions in ``run_dir`` are removed."""
    for path in Path(run_dir).glob("gate-plan.*.json"):
        if path != plan_path(run_dir, token):
            path.unlink(missing_ok=True)
    path = plan_path(run_dir, token)
    try:
        return GatePlan.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None


def case_result(plan: GatePlan, case_id: str, records: list[dict[str, Any]]) -> GateResult | None:
    """The paired test of one finished case against its place in ``plan``; None when it is not gated."""
    cp = plan.cases[case_id]
    if not cp.gated:
        return None
    o = plan.options
    if o.sequential:
        return sequential_result(plan, case_id, records)
    return paired_result(
        case_id,
        cp.key,
        records,
        plan.items[case_id],
        cp.family_size,
        o.alpha,
        metric=cp.metric,
        max_drop=o.max_drop,
        family=cp.family,
        grid=cp.grid,
        baseline=cp.baseline_model,
    )
