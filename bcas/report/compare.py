"""Paired comparison of two runs: ``bcas compare RUN_A RUN_B [--html OUT] [--allow-mismatch]``.

Both runs' records (:func:`bcas.records.load_records`: a run folder or a records file)
are grouped by model label x model fingerprint x dataset x configuration label, and each
group of run A is paired with the same group of run B (when each run holds one model
only, those two models are paired whatever their labels; a label with one fingerprint in
each run is paired across fingerprints and the difference reported; a label with several
fingerprints in a run pairs equal fingerprints only, never pooling two models).  On the
items both groups hold:

* accuracy of A and of B, the discordant counts both ways (A right and B wrong, A wrong
  and B right) and the difference B - A with Newcombe's (1998) paired 95% interval and
  the exact McNemar p-value (BCAS Figure 3, MADARA §6; :mod:`bcas.stats`), Holm-adjusted
  over the compared groups, and the verdict in the words of :mod:`bcas.report.verdict` (a
  run is named ahead only when the test separates them; else "not separable at n = K"
  with the paired items 80% power would need);
* with several epochs per item, the per-item means and a paired t-test on them
  (:mod:`bcas.report.paired` says why);
* on a metric that is not pass/fail per item (``--metric f1``, ``evidence_recall``,
  ``cost_usd``, ``tokens``, ...: :data:`bcas.metrics.values.VALUES`), the per-item means
  of A and B and a paired bootstrap over items of the mean difference B - A
  (:func:`bcas.report.paired.paired_bootstrap`), with the items where A / B is higher
  counted (no flipped-item listing: every item may differ);
* the flipped items, listed both ways, and in the HTML (``--html OUT``, one
  self-contained file without scripts) each flipped item's two trajectories side by side.

Another model is the comparison: two runs of different models on the same items are
paired and compared without a warning (the models are named).  Anything else that
differs is not a comparison of models: a pair of groups whose dataset hashes, prompt
hashes or configuration ids (another seed, say) differ is refused in one line (exit
status 2, naming each difference: a configuration id names every field that differs, in
words with both values, ``rerank_candidates (retrieval.candidates) differs: A 10 vs B
100``) unless ``--allow-mismatch``, which prints every difference and writes it into the
HTML.  Groups are paired by configuration label; a label that names departures from the
grid's defaults (``bcas/hs+r/rc10``) is paired with its partner under the grid's own
label (:func:`base_label`), so two runs that differ in such an option are refused with
the field named, not reported as unpaired.

Two or more runs (of different models, say) also combine into one report of the usual
kind (``--report DIR``, :mod:`bcas.run.combine`): every model against every other on
the same configuration and items, Holm within each grid × dataset.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from bcas.grading.outcomes import outcome
from bcas.grids import base_label
from bcas.metrics.values import VALUES, is_share, value
from bcas.records import Record, RecordError, load_records
from bcas.records.case_status import StatusIndex, read_case_statuses
from bcas.records.manifest import read_manifest
from bcas.report.charts import shift_chart
from bcas.report.comparable import _values, file_note, identity_differences, refusal
from bcas.report.membership import model_names
from bcas.report.paired import paired, paired_bootstrap
from bcas.report.templating import render
from bcas.report.vega import Figure, page_scripts
from bcas.report.verdict import paired_verdict
from bcas.stats import holm_bonferroni, mcnemar_exact, newcombe_paired_diff

GroupKey = tuple[str, str, str, str]  # (model label, model fingerprint, dataset, configuration label)
TEXT_CAP = 4000  # characters of one step's text shown in the HTML


@dataclass
class Run:
    path: Path
    records: list[Record]
    manifest: dict[str, Any] | None
    statuses: StatusIndex = field(default_factory=lambda: StatusIndex(()))  # its cases.jsonl

    @property
    def name(self) -> str:
        return self.path.name if self.path.is_dir() else f"{self.path.parent.name}/{self.path.name}"

    def groups(self) -> dict[GroupKey, list[Record]]:
        """Records by model label x model fingerprint x dataset x configuration label."""
        out: dict[GroupKey, list[Record]] = defaultdict(list)
        for rec in self.records:
            out[(rec.model, rec.model_fingerprint or "", rec.dataset, rec.label or rec.config_id)].append(rec)
        return dict(out)

    def model_names(self) -> dict[tuple[str, str], str]:
        """(label, fingerprint) -> the model's display name in this run (:func:`bcas.report.membership.model_names`)."""
        return model_names({"model": r.model, "model_fingerprint": r.model_fingerprint} for r in self.records)


@dataclass
class GroupComparison:
    """One group of run A against its partner in run B on the items both hold."""

    model_a: str
    model_b: str
    dataset: str
    label: str
    n: int
    acc_a: float
    acc_b: float
    a_only: list[str]  # items A got right and B wrong (per-item mean higher in A, with epochs)
    b_only: list[str]
    diff: float  # B - A
    ci_lo: float
    ci_hi: float
    p_value: float
    test: str
    epochs: int
    mismatches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records_a: dict[str, Record] = field(default_factory=dict)  # item id -> shown record (flipped items)
    records_b: dict[str, Record] = field(default_factory=dict)
    binary: bool = True  # a pass/fail metric; else a value metric (a_only / b_only: A / B higher)
    share: bool = True  # values in [0, 1], shown in percent
    p_holm: float = 1.0  # Holm over the compared groups of a pass/fail metric (holm_verdicts)
    verdict: str = ""  # bcas.report.verdict's words: which run is ahead, only when separated

    def shown(self, x: float, signed: bool = False) -> str:
        """``x`` as the table shows it: percent (points for a difference) or the amount."""
        if self.share:
            return f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}"
        return f"{x:+.4g}" if signed else f"{x:.4g}"

    @property
    def model(self) -> str:
        return self.model_a if self.model_a == self.model_b else f"{self.model_a} vs {self.model_b}"

    @property
    def title(self) -> str:
        return f"{self.model} / {self.dataset} / {self.label}"


def load_run(path: str | Path) -> Run:
    p = Path(path)
    records = load_records(p)
    folder = p if p.is_dir() else p.parent
    return Run(p, records, read_manifest(folder), StatusIndex(read_case_statuses(folder)))


def _outcome(rec: Record, metric: str) -> bool | None:
    """``em`` (SQuAD EM), ``judge`` (the recorded verdict) or a registered metric (``bcas.grading.outcomes``)."""
    if metric in ("em", "judge"):
        return bool(rec.correct_em) if metric == "em" else rec.judge_verdict
    return outcome(rec.to_dict(), metric)


def compare_groups(
    model_a: str, model_b: str, dataset: str, label: str, recs_a: list[Record], recs_b: list[Record], metric: str = "em"
) -> GroupComparison:
    """Paired comparison of two groups on the items both hold (module docstring)."""
    if metric in VALUES:
        return compare_values(model_a, model_b, dataset, label, recs_a, recs_b, metric)
    by_item_a: dict[str, list[Record]] = defaultdict(list)
    by_item_b: dict[str, list[Record]] = defaultdict(list)
    for recs, by_item in ((recs_a, by_item_a), (recs_b, by_item_b)):
        for rec in sorted(recs, key=lambda r: r.epoch):
            if _outcome(rec, metric) is not None:
                by_item[rec.item_id].append(rec)
    shared = sorted(set(by_item_a) & set(by_item_b))
    means_a = {i: sum(bool(_outcome(r, metric)) for r in by_item_a[i]) / len(by_item_a[i]) for i in shared}
    means_b = {i: sum(bool(_outcome(r, metric)) for r in by_item_b[i]) / len(by_item_b[i]) for i in shared}
    epochs = max([len(by_item_a[i]) for i in shared] + [len(by_item_b[i]) for i in shared] + [1])
    a_only = [i for i in shared if means_a[i] > means_b[i]]
    b_only = [i for i in shared if means_b[i] > means_a[i]]
    n = len(shared)
    if epochs == 1:
        both = sum(1 for i in shared if means_a[i] and means_b[i])
        neither = n - both - len(a_only) - len(b_only)
        # first = B: the difference is B - A
        diff, lo, hi = newcombe_paired_diff(both, len(b_only), len(a_only), neither) if n else (0.0, 0.0, 0.0)
        p_value, test = mcnemar_exact(len(b_only), len(a_only)), "exact McNemar"
    else:
        result = paired(means_b, means_a, binary=False)
        diff, lo, hi, p_value, test = (
            result.diff,
            result.ci_lo,
            result.ci_hi,
            result.p_value,
            "paired t on per-item means",
        )
    out = GroupComparison(
        model_a,
        model_b,
        dataset,
        label,
        n,
        sum(means_a.values()) / n if n else 0.0,
        sum(means_b.values()) / n if n else 0.0,
        a_only,
        b_only,
        diff,
        lo,
        hi,
        p_value,
        test,
        epochs,
    )
    for item in a_only + b_only:
        out.records_a[item] = by_item_a[item][0]
        out.records_b[item] = by_item_b[item][0]
    only_a, only_b = len(set(by_item_a) - set(by_item_b)), len(set(by_item_b) - set(by_item_a))
    if only_a or only_b:
        out.notes.append(f"items in one run only, left out: {only_a} in A, {only_b} in B")
    return out


def compare_values(
    model_a: str, model_b: str, dataset: str, label: str, recs_a: list[Record], recs_b: list[Record], metric: str
) -> GroupComparison:
    """A value metric (:mod:`bcas.metrics.values`): per-item means over epochs, paired bootstrap of B - A."""
    by_item: list[dict[str, list[float]]] = [defaultdict(list), defaultdict(list)]
    for recs, values in zip((recs_a, recs_b), by_item, strict=True):
        for rec in recs:
            v = value(rec.to_dict(), metric)
            if v is not None:
                values[rec.item_id].append(v)
    shared = sorted(set(by_item[0]) & set(by_item[1]))
    means_a, means_b = ({i: sum(v[i]) / len(v[i]) for i in shared} for v in by_item)
    result = paired_bootstrap(means_b, means_a)
    n = len(shared)
    out = GroupComparison(
        model_a, model_b, dataset, label, n,
        sum(means_a.values()) / n if n else 0.0, sum(means_b.values()) / n if n else 0.0,
        [i for i in shared if means_a[i] > means_b[i]], [i for i in shared if means_b[i] > means_a[i]],
        result.diff, result.ci_lo, result.ci_hi, result.p_value, "paired bootstrap",
        max([len(v[i]) for v in by_item for i in shared] + [1]), binary=False, share=is_share(metric),
    )  # fmt: skip
    unmeasured = len({r.item_id for r in recs_a} | {r.item_id for r in recs_b}) - n
    if unmeasured:
        out.notes.append(f"items left out: {unmeasured} not measured in {metric} in both runs")
    return out


def _partner(key: GroupKey, groups_b: dict[GroupKey, list[Record]], rename: dict[str, str]) -> GroupKey | None:
    """Run B's group for run A's group ``key``: the same fingerprint, else the label's only one.

    A model label with one fingerprint in each run is paired across fingerprints (the
    difference is then reported as a mismatch); a label with several fingerprints in
    either run pairs only equal fingerprints, so two models are never pooled.
    """
    label, fingerprint, dataset, config = key
    label_b = rename.get(label, label)
    if (label_b, fingerprint, dataset, config) in groups_b:
        return (label_b, fingerprint, dataset, config)
    prints_b = {k[1] for k in groups_b if k[0] == label_b and k[2:] == (dataset, config)}
    if len(prints_b) == 1:
        return (label_b, next(iter(prints_b)), dataset, config)
    # The same grid entry under other departures from the grid's values (bcas/hs+r/rc10 vs
    # bcas/hs+r): paired, so the configuration difference is named rather than left unpaired.
    others = [
        k
        for k in groups_b
        if k[0] == label_b and k[2] == dataset and k[3] != config and base_label(k[3]) == base_label(config)
    ]
    same_print = [k for k in others if k[1] == fingerprint]
    if len(same_print) == 1:
        return same_print[0]
    return others[0] if len(others) == 1 else None


def compare_runs(run_a: Run, run_b: Run, metric: str = "em") -> tuple[list[GroupComparison], list[str]]:
    """Every paired group (with its identity differences) and the groups found in one run only."""
    groups_a, groups_b = run_a.groups(), run_b.groups()
    names_a, names_b = run_a.model_names(), run_b.model_names()
    models_a, models_b = {k[0] for k in groups_a}, {k[0] for k in groups_b}
    rename = {}
    if len(models_a) == 1 and len(models_b) == 1 and models_a != models_b:
        rename = {next(iter(models_a)): next(iter(models_b))}  # one model each: those two are compared
    out: list[GroupComparison] = []
    unmatched: list[str] = []
    paired_b: set[GroupKey] = set()
    for key, recs_a in sorted(groups_a.items()):
        label_a, fp_a, dataset, label = key
        prints_a = {k[1] for k in groups_a if k[0] == label_a and k[2:] == key[2:]}
        key_b = _partner(key, groups_b, rename)
        if key_b is not None and key_b[1] != fp_a and len(prints_a) > 1:
            key_b = None  # A holds this label under several fingerprints: pair equal fingerprints only
        model_a = names_a[(label_a, fp_a)]
        if key_b is None or key_b in paired_b:
            unmatched.append(f"only in A: {model_a} / {dataset} / {label}")
            continue
        paired_b.add(key_b)
        shown = label if key_b[3] == label else f"{label} vs {key_b[3]}"
        comp = compare_groups(model_a, names_b[key_b[:2]], dataset, shown, recs_a, groups_b[key_b], metric)
        comp.mismatches = identity_differences(recs_a, groups_b[key_b])
        prints_b = _values(groups_b[key_b], "model_fingerprint")
        if [fp_a] != prints_b:  # the comparison itself: which two models' answers are paired
            comp.notes.insert(0, f"models compared: A {model_a} ({fp_a}) vs B {comp.model_b} ({', '.join(prints_b)})")
        for tag, run, recs in (("A", run_a, recs_a), ("B", run_b, groups_b[key_b])):
            if note := file_note(run.statuses, recs):  # a case evaluated on fewer items than its file holds
                comp.notes.append(f"{tag}: {note}")
        out.append(comp)
    unmatched += [f"only in B: {names_b[k[:2]]} / {k[2]} / {k[3]}" for k in sorted(groups_b) if k not in paired_b]
    holm_verdicts(out)
    return out, unmatched


def holm_verdicts(comps: list[GroupComparison], alpha: float = 0.05) -> None:
    """Holm over the groups of a pass/fail metric, one family (Holm 1979), and each group's verdict
    (:func:`bcas.report.verdict.paired_verdict`: run B or run A is named ahead only when separated)."""
    binary = [c for c in comps if c.binary]
    _, adjusted = holm_bonferroni([c.p_value for c in binary], alpha)
    for c, adj in zip(binary, adjusted, strict=True):
        c.p_holm = adj
        first, second = (
            ("run B", "run A") if c.model_a == c.model_b else (f"run B ({c.model_b})", f"run A ({c.model_a})")
        )
        c.verdict = paired_verdict(first, second, len(c.b_only), len(c.a_only), c.n, adj, alpha, len(binary)).text


# -- text ------------------------------------------------------------------------------------


def _session(run: Run) -> dict[str, Any]:
    sessions = (run.manifest or {}).get("sessions") or []
    return sessions[-1] if sessions and isinstance(sessions[-1], dict) else {}


def run_lines(run_a: Run, run_b: Run) -> list[str]:
    """Where each run came from (its manifest's latest session) and which package versions differ."""
    lines = []
    for tag, run in (("A", run_a), ("B", run_b)):
        bcas = _session(run).get("bcas") or {}
        origin = f"bcas {bcas.get('version')} @ {bcas.get('git_commit')}" if bcas else "no run.json"
        lines.append(f"{tag}: {run.path} ({len(run.records)} records; {origin})")
    pa, pb = _session(run_a).get("packages") or {}, _session(run_b).get("packages") or {}
    for name in sorted(set(pa) | set(pb)):
        if pa.get(name) != pb.get(name) and pa and pb:
            lines.append(f"  package {name}: A {pa.get(name)} vs B {pb.get(name)}")
    return lines


def table_lines(comps: list[GroupComparison]) -> list[str]:
    binary = all(c.binary for c in comps)
    a, b, d = ("A %", "B %", "B-A pts") if all(c.share for c in comps) else ("A", "B", "B-A")
    only = ("A only", "B only") if binary else ("A >", "B >")
    # text columns as wide as their longest cell: two models' names are never cut
    mw, dw, lw = (max([len(head), *(len(getattr(c, attr)) for c in comps)]) + 2 for head, attr in (
        ("model", "model"), ("dataset", "dataset"), ("config", "label")))  # fmt: skip
    lines = [
        f"{'model':<{mw}}{'dataset':<{dw}}{'config':<{lw}}{'n':>5}{a:>9}{b:>9}{d:>9}"
        f"{'95% CI':>18}{only[0]:>8}{only[1]:>8}{'p':>9}{'Holm p':>9}"
    ]
    for c in comps:
        lines.append(
            f"{c.model:<{mw}}{c.dataset:<{dw}}{c.label:<{lw}}{c.n:>5}{c.shown(c.acc_a):>9}"
            f"{c.shown(c.acc_b):>9}{c.shown(c.diff, True):>9}{f'{c.shown(c.ci_lo, True)} {c.shown(c.ci_hi, True)}':>18}"
            f"{len(c.a_only):>8}{len(c.b_only):>8}{c.p_value:>9.4f}{c.p_holm if c.binary else c.p_value:>9.4f}"
        )
    lines += [f"verdict: {c.title}: {c.verdict}" for c in comps if c.verdict]
    return lines


def flipped_lines(comps: list[GroupComparison]) -> list[str]:
    lines = []
    for c in comps:
        if not (c.a_only or c.b_only) or not c.binary:
            continue
        lines.append(f"{c.title} ({c.test}{f', {c.epochs} epochs' if c.epochs > 1 else ''}):")
        lines.append(f"  A right, B wrong ({len(c.a_only)}): {', '.join(c.a_only) or '-'}")
        lines.append(f"  A wrong, B right ({len(c.b_only)}): {', '.join(c.b_only) or '-'}")
    return lines


# -- HTML ------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right} th{background:#f3f3f3} td.t{text-align:left}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#fafafa;border:1px solid #eee;padding:4px;margin:2px 0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em} .side{min-width:0}
.ok{color:#137333}.bad{color:#b3261e} .warn{background:#fff3f3;border:1px solid #b3261e;padding:4px 8px}
details{margin:4px 0} summary{cursor:pointer;overflow-wrap:anywhere}
"""


def _cap(text: str) -> str:
    return text if len(text) <= TEXT_CAP else f"{text[:TEXT_CAP]}… ({len(text) - TEXT_CAP} more characters)"


def side_of(tag: str, run_name: str, rec: Record, metric: str) -> dict[str, Any]:
    """One side of a flipped item: the run's answer, its outcome and its steps (texts capped);
    ``templates/_trajectory.html`` shows it (here and in ``bcas view``)."""
    steps = []
    for step in rec.steps:
        docs = step.get("titles") or step.get("docs") or []
        steps.append(
            {
                "kind": str(step.get("kind", "")),
                "texts": [(name, _cap(str(step[name]))) for name in ("query", "output") if step.get(name)],
                "docs": ", ".join(map(str, docs)),
            }
        )
    return {
        "tag": tag,
        "run": run_name,
        "model": rec.model,
        "epoch": rec.epoch,
        "prediction": rec.prediction,
        "ok": bool(_outcome(rec, metric)),
        "stop": str(rec.stop_reason or ""),
        "searches": rec.searches_used,
        "tokens_in": rec.tokens_in,
        "tokens_out": rec.tokens_out,
        "error": str(rec.error) if rec.error else "",
        "steps": steps,
    }


_GROUP_COLUMNS = (
    "model",
    "dataset",
    "config",
    "n paired",
    "A %",
    "B %",
    "B − A pts",
    "95% CI",
    "A right, B wrong",
    "A wrong, B right",
    "p",
    "Holm p",
    "test",
    "verdict",
)


def shift_figure(run_a: Run, run_b: Run, comps: list[GroupComparison]) -> Figure:
    """B − A per group in points with its paired 95% interval (BCAS Figure 3's style), one colour
    per model; a group whose metric is not a share (no points) is left out of the figure."""
    bars = [(c.model, f"{c.dataset} · {c.label}", c.diff, c.ci_lo, c.ci_hi) for c in comps if c.share]
    title = f"B − A: {run_b.name} against {run_a.name}, paired 95% interval"
    return shift_chart("compare-shift", title, bars, y_title="B − A (points)")


def render_html(
    run_a: Run,
    run_b: Run,
    comps: list[GroupComparison],
    unmatched: list[str],
    overridden: list[str],
    metric: str = "em",
) -> str:
    """The comparison as one self-contained page (``templates/compare.html``, autoescaped): its one
    figure drawn by the Vega bundle inlined in the page (:mod:`bcas.report.vega`), no other script."""
    rows = [
        {
            "cells": [
                c.model,
                c.dataset,
                c.label,
                c.n,
                c.shown(c.acc_a),
                c.shown(c.acc_b),
                c.shown(c.diff, True),
                f"{c.shown(c.ci_lo, True)} – {c.shown(c.ci_hi, True)}",
                len(c.a_only),
                len(c.b_only),
                f"{c.p_value:.4f}",
                f"{c.p_holm:.4f}" if c.binary else "",
                c.test,
                c.verdict,
            ]
        }
        for c in comps
    ]
    figure = render("_figure_one.html", figure=shift_figure(run_a, run_b, comps))
    scripts, hashes = page_scripts(figure)
    return str(
        render(
            "compare.html",
            figure=figure,
            scripts=scripts,
            script_hashes=hashes,
            title=f"bcas compare — {run_a.name} vs {run_b.name}",
            css=Markup(CSS),  # the page's own stylesheet, a constant
            runs=run_lines(run_a, run_b),
            overridden=overridden,
            metric={"em": "EM", "judge": "judge verdict"}.get(metric, metric),
            headers=_GROUP_COLUMNS,
            rows=rows,
            notes=[f"{c.title}: {n}" for c in comps for n in c.notes] + unmatched,
            flips=_flips(run_a, run_b, comps, metric),
        )
    )


def _flips(run_a: Run, run_b: Run, comps: list[GroupComparison], metric: str) -> list[dict[str, Any]]:
    """Each flipped item, both ways, with its two trajectories side by side (empty when none flipped)."""
    groups = []
    for c in comps:
        for tag, items in (("A right, B wrong", c.a_only), ("A wrong, B right", c.b_only)):
            if not items or not c.binary:
                continue
            shown = []
            for item in items:
                ra, rb = c.records_a[item], c.records_b[item]
                shown.append(
                    {
                        "item": item,
                        "question": ra.question[:200],
                        "gold": " | ".join(ra.answers),
                        "a": side_of("A", run_a.name, ra, metric),
                        "b": side_of("B", run_b.name, rb, metric),
                    }
                )
            groups.append({"title": c.title, "tag": tag, "flipped": shown})
    return groups


# -- command line ------------------------------------------------------------------------------


def runs_error(n: int, report: bool = False) -> str | None:
    """Why ``n`` runs cannot be compared (two, or two or more into one ``--report``), else None."""
    if n < 2 or (n > 2 and not report):
        return (
            f"give two runs to compare (RUN_A RUN_B), got {n}; two or more are combined into one report "
            "with --report DIR"
        )
    return None


def compare_command(
    runs: Sequence[str],
    html: str | None = None,
    allow_mismatch: bool = False,
    metric: str = "em",
) -> int:
    """What ``bcas compare`` prints and writes for two run folders (or records files) ``runs``,
    compared item by item (``--report``, which combines two or more into one run folder, is
    :func:`bcas.run.combine.combine_runs`).  Returns the exit status (2: one line on standard
    error)."""
    if (problem := runs_error(len(runs))) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        run_a, run_b = load_run(runs[0]), load_run(runs[1])
    except (OSError, RecordError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    comps, unmatched = compare_runs(run_a, run_b, metric)
    if not comps:
        print("error: no model / dataset / configuration is in both runs; " + "; ".join(unmatched), file=sys.stderr)
        return 2
    differences = [f"{c.title}: {m}" for c in comps for m in c.mismatches]
    if differences and not allow_mismatch:
        print(refusal(differences), file=sys.stderr)
        return 2
    for line in run_lines(run_a, run_b):
        print(line)
    for line in differences:
        print(f"MISMATCH ALLOWED (--allow-mismatch): {line}")
    print()
    for line in table_lines(comps):
        print(line)
    for line in [f"note: {c.title}: {n}" for c in comps for n in c.notes] + [f"note: {u}" for u in unmatched]:
        print(line)
    flips = flipped_lines(comps)
    print()
    print("\n".join(flips) if flips else "no flipped items")
    if html:
        out = Path(html)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(run_a, run_b, comps, unmatched, differences, metric), encoding="utf-8")
        print(f"html: {out}")
    return 0
