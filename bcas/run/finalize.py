"""The end of a session: merge the workers' records, write the summaries, the parquet
export and the HTML report, run the session-wide Holm step of the gate, and build the
terminal summary's lines.

Both front doors end a run here: the pytest plugin at session finish, :func:`bcas.evaluate`
when its cases are done.  The gate's session-wide report comes from the caller
(``gate_report``), which knows how the gate was planned."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bcas.metrics.latency import latency_lines
from bcas.records.case_status import MARKS, read_case_statuses
from bcas.report.html_metrics import metric_lines
from bcas.report.methods import method_lines
from bcas.report.status import counting
from bcas.report.status import mark as status_mark
from bcas.run.cost import read_stops, stop_lines
from bcas.run.exports import PYARROW_MISSING, write_parquet
from bcas.run.rsc_files import routing_lines, routing_rows
from bcas.run.settings import Settings

if TYPE_CHECKING:
    from bcas.records import ResultStore
    from bcas.report.summary import Summaries
    from bcas.run.session import BcasSession


class GateVerdict(Protocol):
    """The regression gate's session-wide report (:class:`bcas.gating.report.GateReport`)."""

    holm_failures: list[str]

    def lines(self) -> list[str]: ...


GateReporter = Callable[[Path, str], GateVerdict | None]


@dataclass
class FinalResult:
    records_path: Path
    report_path: Path | None
    table_lines: list[str]
    holm_failures: list[str]
    gate: GateVerdict | None = None  # when a baseline gate ran
    summaries: Summaries | None = None  # the summary rows and paired comparisons written


def finalize_run(
    settings: Settings,
    session: BcasSession | None,
    token: str = "run",
    status: str | None = None,
    gate_report: GateReporter | None = None,
    title: str | None = None,
    notes: Sequence[str] = (),
) -> FinalResult | None:
    """Merge per-worker files, write summaries and the HTML report, run the session-wide Holm gate.

    ``status``: ``"interrupted"`` for a session stopped by Ctrl-C or SIGTERM (its run.json
    entry says so before the report shows it).  ``title`` (default ``bcas — FOLDER``) and
    ``notes`` head the report (``bcas compare --report`` names the runs it combined).
    """
    from bcas.grids import GRIDS, with_holm_scope
    from bcas.records import ResultStore
    from bcas.report.html import render_report
    from bcas.report.summary import write_summaries

    if session is not None:
        session.close()  # flushes this process's gate results
    store = ResultStore(settings.run_dir)
    store.merge()
    repriced = price_in_force(store, getattr(settings, "prices", None), getattr(settings, "price_sheet", None))
    if status is not None and settings.run_dir.is_dir():
        store.path.touch(exist_ok=True)  # an interrupted run leaves its records file, even with none finished
    records = [r.to_dict() for r in store.records()]
    profiles = read_profiles(settings.run_dir)
    if not records and not profiles:
        return None
    grids = with_holm_scope(dict(GRIDS.items()), settings.holm_scope)  # --bcas-holm-scope
    from bcas.records.manifest import read_manifest, served_by_fingerprint
    from bcas.report.summary import served_beside

    routing = routing_rows(profiles, records)  # the routed pipeline's probe cost beside its accuracy
    served = served_by_fingerprint(read_manifest(settings.run_dir))  # what answered, beside the label
    statuses = read_case_statuses(settings.run_dir)  # each case's passed/failed/incomplete/error (cases.jsonl)
    summaries = write_summaries(
        settings.run_dir, records, grids, settings.grids, routing=routing, served=served, statuses=statuses
    )
    rows, comps = summaries.rows, summaries.comparisons
    order = {name: [e.label for e in grid.entries] for name, grid in GRIDS.items()}
    gate = gate_report(settings.run_dir, token) if gate_report is not None else None  # Holm per family
    from bcas.run.manifest import complete_session

    manifest = complete_session(settings.run_dir, token, records, session, status)  # run.json, shown in the report
    stops = read_stops(settings.run_dir, token)  # cases --bcas-max-cost cut short in this session
    report = render_report(
        settings.run_dir,
        records,
        rows,
        comps,
        order,
        title=title or f"bcas — {settings.run_dir.name}",
        notes=list(notes),
        profiles=profiles,
        gate=gate,
        model_comparisons=summaries.model_comparisons,
        matrix=summaries.matrix,
        manifest=manifest,
        stops=stops,
        methods=summaries.methods,
    )
    parquet = write_parquet(settings.run_dir, records) if records else None  # records.parquet beside the JSONL
    # text columns as wide as their longest cell: a dataset or model name is never cut (hotpot_dev_distractor_v1)
    shown = {id(r): served_beside(r.model, r.served) for r in rows}  # the served name beside a requested one
    gw, mw, dw, lw = (
        max([len(head), *(len(shown[id(r)] if attr == "model" else getattr(r, attr)) for r in rows)]) + 2
        for head, attr in (("grid", "grid"), ("model", "model"), ("dataset", "dataset"), ("config", "label"))
    )
    lines = [
        f"{'grid':<{gw}}{'model':<{mw}}{'dataset':<{dw}}{'config':<{lw}}{'n':>4}{'acc%':>7}{'95% CI':>14}{'srch':>6}"
        f"{'tok out':>9}{'cost $':>10}"
    ]
    for r in rows:
        # a case that did not pass shows its mark where the accuracy would be, never a number
        acc = (
            f"{r.accuracy * 100:>7.1f}{f'{r.ci_lo * 100:.0f}-{r.ci_hi * 100:.0f}':>14}"
            if r.counts
            else f"{status_mark(r):>21}"
        )
        lines.append(
            f"{r.grid:<{gw}}{shown[id(r)]:<{mw}}{r.dataset:<{dw}}{r.label:<{lw}}{r.n:>4}{acc}"
            f"{r.mean_searches:>6.2f}{r.mean_tokens_out:>9.0f}"
            f"{'—' if r.cost_usd is None else f'{r.cost_usd:.4f}':>10}"  # unknown cost: no number, never 0
        )
    lines.extend(metric_lines(counting(rows)))  # evidence, abstention, pass@k / pass^k, cost-of-pass
    lines.extend(latency_lines(counting(rows)))  # p50/p95/p99, waits, throughput, where the time went
    lines.extend(method_lines(*summaries.methods))  # agent vs methods
    # a case that did not pass: "FAILED: grid/model/dataset/config: reason" (first among the notes)
    lines.extend(
        note if note.split(":", 1)[0] in MARKS.values() else f"note: {note}" for note in summaries.notes
    )  # each grid's metric, retrieval models
    if summaries.model_comparisons:
        lines.append(
            "models compared on the same items (exact McNemar or paired t on per-item means; Holm per grid x dataset):"
        )
        for c in summaries.model_comparisons:
            lines.append(
                f"  {c.grid}/{c.dataset}/{c.label}: {c.model} - {c.reference} = {c.diff * 100:+.1f} pts "
                f"[{c.ci_lo * 100:+.1f}, {c.ci_hi * 100:+.1f}] on {c.n_paired} items, p={c.p_value:.3g}, "
                f"Holm p={c.p_holm:.3g}: {c.verdict}"  # who is ahead, only when separated (bcas.report.verdict)
            )
    lines.extend(cache_lines(manifest, token))
    holm_failures: list[str] = gate.holm_failures if gate is not None else []
    lines.extend(stop_lines(stops))
    if records:
        lines.append(f"parquet: {parquet}" if parquet is not None else f"parquet: not written: {PYARROW_MISSING}")
    for prof in profiles:
        dec = prof.get("decision") or {}
        lines.append(
            f"RSC {prof.get('model_label')} / {prof.get('dataset')}: rho_hat={prof.get('rho_hat')} "
            f"rho*={prof.get('rho_star')} class={prof.get('classification')} -> {dec.get('mode')}"
        )
    lines.extend(routing_lines(routing))
    if repriced:
        lines.append(f"repriced: {repriced} record(s) priced under another sheet were priced under this run's sheet")
    return FinalResult(store.path, report, lines, holm_failures, gate, summaries)


def price_in_force(store: ResultStore, prices: Path | None, sheet_name: str | None = None) -> int:
    """Price every record of the run under the sheet in force (``--bcas-prices``); returns how many changed.

    A session that resumes a run under a new price sheet answers only its new items, so the
    resumed records still carry the old sheet's cost (or none).  The summaries are views of
    the records, so the records themselves are repriced: each one whose cost under the sheet
    in force differs is appended again with the new cost (as ``bcas reprice RUN`` does; the
    newest version of an answer wins), and every view agrees with records.jsonl.
    ``prices`` ``None`` (``--bcas-prices none``, a merge, a rebuild): nothing changes.
    """
    if prices is None:
        return 0
    from bcas.records import load_price_sheet, reprice_record

    sheet = load_price_sheet(prices, sheet_name)
    changed = [new for old in store.records() if (new := reprice_record(old, sheet)).to_dict() != old.to_dict()]
    store.extend(changed)
    return len(changed)


def cache_lines(manifest: dict[str, Any] | None, token: str) -> list[str]:
    """How many of this session's answers the generation cache gave (run.json's ``answers_from_cache``)."""
    sessions = (manifest or {}).get("sessions") or []
    entry = next((s for s in sessions if isinstance(s, dict) and s.get("session") == token), None)
    if not entry or not entry.get("records_written"):
        return []
    cached, written = int(entry.get("answers_from_cache") or 0), int(entry["records_written"])
    return [f"generation cache: {cached} of {written} answers written by this session came from the cache"]


def read_profiles(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((run_dir / "rsc").glob("*.json")):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except json.JSONDecodeError:
            continue
    return out
