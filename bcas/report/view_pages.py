"""The pages of ``bcas view`` (:mod:`bcas.report.view`): ``OUT/index.html``, ``OUT/view.json`` and
one page per pair of runs under ``OUT/pairs/``.

* ``index.html``: the runs (each linked to its own report), the leaderboard of every dataset ×
  grid × configuration and the list of pair pages.  Its one script (admitted by its hash in
  the page's Content-Security-Policy, as the report's) filters the leaderboard by model,
  dataset, grid and date and the pair list by two chosen runs; it only hides and shows rows and
  writes counts with ``textContent``, never record content.  Nothing is fetched: the page works
  opened as a file.
* ``pairs/pN.html``: two rows of one table on the items both hold (the numbers of the
  leaderboard's difference) and each flipped item, both ways, with the two trajectories side
  by side (``templates/_trajectory.html``, as ``bcas compare --html``); no script.
* ``view.json``: the same numbers for a program (each row's summary fields, each pair's paired
  result and flipped items).

Pair pages are written ahead, not computed in the browser: the trajectories stay in templates
with autoescaping and out of any script, every page reads without JavaScript, and the number of
pages is bounded (``--max-pairs``; the page says how many pairs were left out).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from markupsafe import Markup

from bcas.grading.outcomes import METRIC_NAMES
from bcas.report.compare import CSS as COMPARE_CSS
from bcas.report.compare import side_of
from bcas.report.paired import PairedResult
from bcas.report.status import mark, row_fields
from bcas.report.summary import served_beside
from bcas.report.templating import render
from bcas.report.view import Entry, Pair, View

PAIRS_DIR = "pairs"

CSS = (
    COMPARE_CSS
    + """
#filters{position:sticky;top:0;background:#fff;padding:4px 0;border-bottom:1px solid #ddd;z-index:1}
#filters label{margin-right:1em} .count{color:#555} .scroll{overflow-x:auto;max-width:100%}
td.t,th{white-space:nowrap} section.cell h3{margin-bottom:0} .metric{color:#555;font-size:13px}
ul.pairs li{margin:2px 0} .lead{font-weight:bold} .n-note{color:#555;font-weight:normal}
"""
)

SCRIPT = """
(function(){
  var chosen = {};
  function dates(){
    return [document.getElementById('from').value, document.getElementById('to').value];
  }
  function applyFilters(){
    var span = dates(), shown = 0, total = 0;
    document.querySelectorAll('tr.fr').forEach(function(tr){
      var keep = true, d = tr.dataset.date || '';
      Object.keys(chosen).forEach(function(key){
        if (chosen[key] && tr.getAttribute('data-' + key) !== chosen[key]) keep = false;
      });
      if (span[0] && (!d || d < span[0])) keep = false;
      if (span[1] && (!d || d > span[1])) keep = false;
      tr.hidden = !keep; total += 1; if (keep) shown += 1;
    });
    document.querySelectorAll('section.cell').forEach(function(sec){
      sec.hidden = sec.querySelectorAll('tr.fr:not([hidden])').length === 0;
    });
    document.getElementById('shown').textContent = shown + ' of ' + total + ' rows shown';
  }
  document.querySelectorAll('#filters select').forEach(function(sel){
    sel.addEventListener('change', function(){ chosen[sel.dataset.key] = sel.value; applyFilters(); });
  });
  ['from', 'to'].forEach(function(id){
    document.getElementById(id).addEventListener('change', applyFilters);
  });
  function applyPick(){
    var a = document.getElementById('pick-a').value, b = document.getElementById('pick-b').value, n = 0;
    document.querySelectorAll('li.pairlink').forEach(function(li){
      var runs = [li.dataset.a, li.dataset.b];
      var keep = (!a || runs.indexOf(a) >= 0) && (!b || runs.indexOf(b) >= 0) && !(a && a === b && li.dataset.a !== li.dataset.b);
      li.hidden = !keep; if (keep) n += 1;
    });
    document.getElementById('picked').textContent = n + ' pair pages';
  }
  ['pick-a', 'pick-b'].forEach(function(id){
    document.getElementById(id).addEventListener('change', applyPick);
  });
  applyFilters(); applyPick();
  document.body.dataset.ready = '1';
})();
"""

# The index admits exactly this script (by hash) and no other.
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()

_HEADERS = (
    "#",
    "model",
    "run",
    "date",
    "n",
    "right",
    "accuracy %",
    "95% CI",
    "Δ vs leader pts",
    "95% CI (Newcombe)",
    "p",
    "paired",
    "flipped",
)


def _pts(x: float, signed: bool = False) -> str:
    return f"{x * 100:+.1f}" if signed else f"{x * 100:.1f}"


def _link(target: Path | None, page_dir: Path) -> str | None:
    """``target`` relative to the folder of the page that links to it (None: no such file)."""
    return None if target is None else Path(os.path.relpath(target.resolve(), page_dir.resolve())).as_posix()


def _row(i: int, entry: Entry, out: Path) -> dict[str, Any]:
    row, diff = entry.row, entry.vs_leader
    counts = row.counts
    paired_cells: list[Any] = ["", "", "", ""]
    if diff is not None:
        test = "exact McNemar" if diff.test == "mcnemar-exact" else "paired t on per-item means"
        paired_cells = [
            _pts(diff.diff, True),
            f"{_pts(diff.ci_lo, True)} – {_pts(diff.ci_hi, True)}",
            {"text": f"{diff.p_value:.4f}", "title": test},
            diff.n_paired,
        ]
    interval = "Wilson" if row.interval == "wilson" else "item-clustered t"
    return {
        "rank": i,
        "model": served_beside(row.model, row.served),
        "run": entry.run.name,
        "report": _link(entry.run.report, out),
        "date": entry.run.date,
        "n": row.n,
        "n_note": row.items_note,  # "20 of 50 items; 30 held for calibration" when the file holds more
        "right": row.correct if counts else "",
        "accuracy": _pts(row.accuracy) if counts else mark(row),
        "ci": {"text": f"{_pts(row.ci_lo)} – {_pts(row.ci_hi)}", "title": interval} if counts else row.reason,
        "paired": paired_cells,
        "pair": f"{PAIRS_DIR}/{entry.pair}.html" if entry.pair else None,
        "leader": i == 1 and counts,
        "data": {
            "model": row.model,
            "dataset": row.dataset,
            "grid": row.grid,
            "config": row.label,
            "run": entry.run.name,
        },
    }


def _filters(view: View) -> list[dict[str, Any]]:
    values: dict[str, set[str]] = {"model": set(), "dataset": set(), "grid": set()}
    for table in view.tables:
        for e in table.entries:
            values["model"].add(e.row.model)
            values["dataset"].add(e.row.dataset)
            values["grid"].add(e.row.grid)
    return [{"key": k, "options": sorted(v)} for k, v in values.items()]


def _pair_item(pair: Pair) -> dict[str, Any]:
    r = pair.result
    return {
        "page": f"{PAIRS_DIR}/{pair.id}.html",
        "table": pair.table.key,
        "a": pair.a.run.name,
        "b": pair.b.run.name,
        "title": f"{pair.a.run.name} · {pair.a.row.model} vs {pair.b.run.name} · {pair.b.row.model}",
        "summary": f"{len(pair.a_only)} right in A only, {len(pair.b_only)} right in B only, "
        f"B − A {_pts(r.diff, True)} pts on {r.n_paired} items",
    }


def render_index(view: View, out: Path) -> str:
    """``index.html``: runs, filters, the leaderboard tables and the pair pages (autoescaped)."""
    tables = [
        {
            "key": t.key,
            "dataset": t.dataset,
            "grid": t.grid,
            "label": t.label,
            "metric": METRIC_NAMES.get(t.metric, t.metric),
            "rows": [_row(i, e, out) for i, e in enumerate(t.entries, 1)],
        }
        for t in view.tables
    ]
    runs = [
        {
            "name": r.name,
            "report": _link(r.report, out),
            "path": str(r.path),
            "date": r.date,
            "records": len(r.records),
            "models": ", ".join(sorted({row.model for row in r.summaries.rows})),
            "grids": ", ".join(sorted({row.grid for row in r.summaries.rows})),
        }
        for r in view.runs
    ]
    return str(
        render(
            "view.html",
            title=f"bcas view — {len(view.runs)} runs",
            css=Markup(CSS),  # the page's own stylesheet, a constant
            script=Markup(SCRIPT),  # the page's one script, a constant admitted by its hash
            script_hash=SCRIPT_HASH,
            runs=runs,
            filters=_filters(view),
            headers=_HEADERS,
            tables=tables,
            pairs=[_pair_item(p) for p in view.pairs],
            pairs_left_out=view.pairs_left_out,
            mismatches=view.mismatches,
            notes=view.notes,
        )
    )


def _first(entry: Entry, item: str) -> Any:
    """The record of ``item`` that a pair page shows for ``entry`` (its first epoch)."""
    recs = sorted((r for r in entry.records if str(r.get("item_id")) == item), key=lambda r: int(r.get("epoch") or 0))
    return entry.run.by_dict[id(recs[0])]


def render_pair(pair: Pair, out: Path) -> str:
    """A pair page: the paired numbers and each flipped item's two trajectories side by side."""
    r, metric = pair.result, pair.table.metric
    flips = []
    for tag, items in (("A right, B wrong", pair.a_only), ("A wrong, B right", pair.b_only)):
        shown = []
        for item in items:
            ra, rb = _first(pair.a, item), _first(pair.b, item)
            shown.append(
                {
                    "item": item,
                    "question": ra.question[:200],
                    "gold": " | ".join(ra.answers),
                    "a": side_of("A", pair.a.run.name, ra, metric),
                    "b": side_of("B", pair.b.run.name, rb, metric),
                }
            )
        flips.append({"tag": tag, "flipped": shown})
    here = out / PAIRS_DIR
    sides = [
        {"tag": tag, "run": e.run.name, "model": e.row.model, "report": _link(e.run.report, here)}
        for tag, e in (("A", pair.a), ("B", pair.b))
    ]
    test = "exact McNemar" if r.test == "mcnemar-exact" else "paired t on per-item means"
    return str(
        render(
            "view_pair.html",
            title=f"{pair.table.key}: {pair.a.run.name} vs {pair.b.run.name}",
            css=Markup(CSS),
            index="../index.html",
            sides=sides,
            metric=METRIC_NAMES.get(metric, metric),
            numbers=[
                ("items both hold", r.n_paired),
                ("both right", r.a),
                ("B right, A wrong", r.b),
                ("A right, B wrong", r.c),
                ("neither", r.d),
                ("B − A (pts)", _pts(r.diff, True)),
                (
                    "95% CI (Newcombe)" if r.test == "mcnemar-exact" else "95% CI (t)",
                    f"{_pts(r.ci_lo, True)} – {_pts(r.ci_hi, True)}",
                ),
                (f"p ({test})", f"{r.p_value:.4f}"),
            ],
            flips=flips,
        )
    )


def _result(r: PairedResult | None) -> dict[str, Any] | None:
    return None if r is None else asdict(r)


def payload(view: View) -> dict[str, Any]:
    """``view.json``: every run, every leaderboard row (its summary fields, as summary.json writes
    them), each row's difference from its leader and each pair's flipped items."""
    return {
        "runs": [{"name": r.name, "path": str(r.path), "date": r.date, "records": len(r.records)} for r in view.runs],
        "tables": [
            {
                "dataset": t.dataset,
                "grid": t.grid,
                "label": t.label,
                "metric": t.metric,
                "rows": [
                    {"run": e.run.name, **row_fields(e.row), "vs_leader": _result(e.vs_leader), "pair": e.pair}
                    for e in t.entries
                ],
            }
            for t in view.tables
        ],
        "pairs": [
            {
                "id": p.id,
                "page": f"{PAIRS_DIR}/{p.id}.html",
                "table": {"dataset": p.table.dataset, "grid": p.table.grid, "label": p.table.label},
                "a": {"run": p.a.run.name, "model": p.a.row.model},
                "b": {"run": p.b.run.name, "model": p.b.row.model},
                "b_minus_a": asdict(p.result),
                "a_only": p.a_only,
                "b_only": p.b_only,
            }
            for p in view.pairs
        ],
        "pairs_left_out": view.pairs_left_out,
        "mismatches": view.mismatches,
        "notes": view.notes,
    }


def write_view(view: View, out: str | os.PathLike[str]) -> Path:
    """Write ``index.html``, ``view.json`` and the pair pages into ``out``; returns ``index.html``'s path.

    Pair pages of an earlier view in ``out`` are removed first, so every page there is this view's.
    """
    folder = Path(out)
    pages = folder / PAIRS_DIR
    pages.mkdir(parents=True, exist_ok=True)
    for old in pages.glob("p*.html"):
        old.unlink()
    for pair in view.pairs:
        (pages / f"{pair.id}.html").write_text(render_pair(pair, folder), encoding="utf-8")
    (folder / "view.json").write_text(json.dumps(payload(view), indent=1, sort_keys=True), encoding="utf-8")
    index = folder / "index.html"
    index.write_text(render_index(view, folder), encoding="utf-8")
    return index


__all__ = ["PAIRS_DIR", "SCRIPT", "SCRIPT_HASH", "payload", "render_index", "render_pair", "write_view"]
