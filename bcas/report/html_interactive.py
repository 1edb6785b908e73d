"""The report page's one script and what it works on: sorting, filtering, flips, cost bands.

The page admits exactly this script, by its hash (``SCRIPT_HASH`` in the page's
Content-Security-Policy), and no other.  It reads cell text and ``data-*`` attributes,
compares and hides rows; it never evaluates, parses as HTML or inserts record content
(it writes only ``textContent``).

- Sorting: a click on a header of a ``table.sortable`` sorts by that column (numbers as
  numbers), a second click reverses.
- Filtering: the selects of ``#filters`` (model, dataset, grid, configuration) hide every
  element of class ``fr`` whose ``data-<key>`` (or ``data-<key>-b``, the second model of a
  pair) differs from the chosen value; an element without the attribute is not filtered
  by that key.
- Flips (:mod:`bcas.report.html_items`): in a per-item table, two chosen columns and a mode
  (all items, outcome differs, only A right, only B right) hide the other rows; the chosen
  columns are the ones shown until "all columns" is ticked (:mod:`bcas.report.columns`).
- Cost bands (:mod:`bcas.report.html_cost`): "the cheapest configuration within X points of
  the highest observed accuracy" (with its paired verdict against that point), recomputed from the panel's points whenever X changes, with the same rule
  and tie-breaks as :func:`bcas.report.pareto.cheapest_within`.
- Sticky columns: the first columns of a wide table (as many as its box's ``data-sticky``)
  stay in view while the table scrolls inside its own box (each column's offset is the widths of those before it).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from markupsafe import Markup

from bcas.report.templating import render

if TYPE_CHECKING:
    from bcas.report.summary import SummaryRow

CSS = """
#filters{position:sticky;top:0;background:#fff;padding:4px 0;border-bottom:1px solid #ddd;z-index:1}
#filters label{margin-right:1em} .scroll{overflow-x:auto;max-width:100%}
td.ok{background:#eef8ee} td.bad{background:#fbeeee} td.none{color:#999}
.flip label,.within label{margin-right:1em} .count{color:#555} .answer{font-weight:bold}
td .cell{max-width:16em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.stick{position:sticky;z-index:1;background:#fff} th.stick{background:#f3f3f3} .stick-last{box-shadow:2px 0 0 #ccc}
.banner{background:#fff4d6;border:1px solid #e0b84c;padding:6px 10px;margin:0.5em 0;font-weight:bold}
.more{display:none} .cols-all:checked ~ .scroll .more{display:table-cell}
input.cols-all{margin:0 4px 0 0;vertical-align:middle} label.cols-all{font-size:12px;color:#555;cursor:pointer}
tr.gate-fail td{background:#fdecea} .gate-mark{color:#b3261e;font-weight:bold}
"""

SCRIPT = """
(function(){
  function cmp(a, b){ return a < b ? -1 : (a > b ? 1 : 0); }
  document.querySelectorAll('table.sortable').forEach(function(table){
    table.querySelectorAll('thead th').forEach(function(th){
      th.addEventListener('click', function(){
        var col = th.cellIndex, body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.dataset.asc !== '1'; th.dataset.asc = asc ? '1' : '0';
        rows.sort(function(a, b){
          var x = a.cells[col] ? a.cells[col].textContent : '', y = b.cells[col] ? b.cells[col].textContent : '';
          var nx = parseFloat(x), ny = parseFloat(y);
          var r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
          return asc ? r : -r;
        });
        rows.forEach(function(r){ body.appendChild(r); });
      });
    });
  });
  function show(el){ el.hidden = el.dataset.byFilter === '1' || el.dataset.byFlip === '1'; }
  var chosen = {};
  function applyFilters(){
    document.querySelectorAll('.fr').forEach(function(el){
      var keep = true;
      Object.keys(chosen).forEach(function(key){
        var want = chosen[key];
        if (!want) return;
        var a = el.getAttribute('data-' + key), b = el.getAttribute('data-' + key + '-b');
        if (a === null && b === null) return;
        if (a !== want && b !== want) keep = false;
      });
      el.dataset.byFilter = keep ? '0' : '1';
      show(el);
    });
    document.querySelectorAll('.flip').forEach(applyFlip);
  }
  document.querySelectorAll('#filters select').forEach(function(sel){
    sel.addEventListener('change', function(){ chosen[sel.dataset.key] = sel.value; applyFilters(); });
  });
  function applyFlip(box){
    var table = document.getElementById(box.dataset.table);
    if (!table) return;
    var a = box.querySelector('select.flip-a').value, b = box.querySelector('select.flip-b').value;
    var mode = box.querySelector('select.flip-mode').value, shown = 0, total = 0;
    var head = table.tHead.rows[0].cells;
    for (var i = 2; i < head.length; i++) head[i].classList.toggle('more', String(i - 2) !== a && String(i - 2) !== b);
    Array.prototype.forEach.call(table.tBodies[0].rows, function(row){
      row.querySelectorAll('td[data-col]').forEach(function(td){
        td.classList.toggle('more', td.dataset.col !== a && td.dataset.col !== b);
      });
      var ca = row.querySelector('td[data-col="' + a + '"]'), cb = row.querySelector('td[data-col="' + b + '"]');
      var oa = ca ? ca.dataset.ok : '', ob = cb ? cb.dataset.ok : '';
      var keep = mode === 'all' || (oa !== '' && ob !== '' && (
        (mode === 'flip' && oa !== ob) || (mode === 'a' && oa === '1' && ob === '0') ||
        (mode === 'b' && oa === '0' && ob === '1')));
      row.dataset.byFlip = keep ? '0' : '1';
      show(row);
      if (row.dataset.byFilter !== '1') { total += 1; if (keep) shown += 1; }
    });
    box.querySelector('.count').textContent = shown + ' of ' + total + ' items shown';
  }
  document.querySelectorAll('.flip').forEach(function(box){
    box.querySelectorAll('select').forEach(function(sel){
      sel.addEventListener('change', function(){ applyFlip(box); });
    });
    applyFlip(box);
  });
  function applyWithin(box){
    var pts = Array.prototype.slice.call(document.querySelectorAll('tr.pt[data-panel="' + box.dataset.panel + '"]'));
    var x = parseFloat(box.querySelector('input').value), out = box.querySelector('.answer');
    if (isNaN(x) || x < 0 || !pts.length) { out.textContent = ''; return; }
    var top = Math.max.apply(null, pts.map(function(p){ return parseFloat(p.dataset.acc); }));
    var ok = pts.filter(function(p){ return parseFloat(p.dataset.acc) >= top - x / 100 - 1e-12; });
    ok.sort(function(p, q){
      return (parseFloat(p.dataset.x) - parseFloat(q.dataset.x)) ||
        (parseFloat(q.dataset.acc) - parseFloat(p.dataset.acc)) ||
        cmp(p.dataset.model, q.dataset.model) || cmp(p.dataset.config, q.dataset.config);
    });
    out.textContent = ok[0].dataset.model + ' · ' + ok[0].dataset.config + ': ' +
      (parseFloat(ok[0].dataset.acc) * 100).toFixed(1) + '% at ' + ok[0].dataset.shown +
      (ok[0].dataset.verdict ? '; ' + ok[0].dataset.verdict : '');
  }
  document.querySelectorAll('.within').forEach(function(box){
    box.querySelector('input').addEventListener('input', function(){ applyWithin(box); });
    applyWithin(box);
  });
  // The first columns of a wide table (its box's data-sticky: how many) stay in view while the box scrolls.
  function stick(table){
    var n = parseInt(table.parentElement.dataset.sticky || '0', 10), head = table.tHead && table.tHead.rows[0];
    if (!n || !head) return;
    var left = 0;
    for (var i = 0; i < n && i < head.cells.length; i++) {
      table.querySelectorAll('tr > :nth-child(' + (i + 1) + ')').forEach(function(c){
        c.style.left = left + 'px'; c.classList.add('stick'); if (i === n - 1) c.classList.add('stick-last');
      });
      left += head.cells[i].getBoundingClientRect().width;
    }
  }
  document.querySelectorAll('.scroll[data-sticky] > table').forEach(stick);
  function restick(){ document.querySelectorAll('.scroll[data-sticky] > table').forEach(stick); }
  window.addEventListener('resize', restick);
  document.querySelectorAll('input.cols-all').forEach(function(box){ box.addEventListener('change', restick); });
  document.body.dataset.ready = '1';
})();
"""

# The page's policy admits exactly this script (by hash) and no other, so even text
# that escaped escaping could not run.
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()

FILTER_KEYS = (
    ("model", "all models"),
    ("dataset", "all datasets"),
    ("grid", "all grids"),
    ("config", "all configurations"),
)


def fr_data(**values: str | None) -> dict[str, str]:
    """The filter keys of a filterable element, for the templates' ``data_attrs``
    (``model_b`` -> ``data-model-b``); a ``None`` value is left out."""
    return {k.replace("_", "-"): str(v) for k, v in values.items() if v is not None}


def filter_bar(rows: Iterable[SummaryRow]) -> Markup:
    """The select boxes over every model, dataset, grid and configuration of the summary rows."""
    values: dict[str, set[str]] = {key: set() for key, _ in FILTER_KEYS}
    for r in rows:
        values["model"].add(str(r.model))
        values["dataset"].add(str(r.dataset))
        values["grid"].add(str(r.grid))
        values["config"].add(str(r.label))
    boxes = [{"key": key, "everything": everything, "options": sorted(values[key])} for key, everything in FILTER_KEYS]
    return render("filters.html", boxes=boxes)
