"""Escaping by construction: a run in which every string of every record, of the manifest,
of the RSC profiles (and so of every summary row and comparison built from them) is
hostile renders a page with no live markup from the data.

The page is parsed with :mod:`html.parser`; the only elements allowed are those the
report itself writes, the only script is the page's own, and no attribute is an event
handler.  Each string is made unique so a field that reached the page unescaped would
show up as an element of its own.
"""

from __future__ import annotations

import itertools
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from bcas.report.html import render_report
from bcas.report.summary import write_summaries
from bcas.report.vega import page_figures
from tests.support.reports import HOSTILE, grid_records

# What the report writes itself (the page and its sections; a figure is a spec that Vega draws in the browser).
PAGE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "code", "div", "span", "b", "ul", "ol",
    "li", "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "pre", "label", "select", "option",
    "input", "script", "figure",
}  # fmt: skip


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


_counter = itertools.count()


def _hostile(_: str) -> str:
    """Every payload at once (element, handler and attribute break-outs), numbered to stay unique."""
    return " ".join(HOSTILE) + str(next(_counter))


def hostile(value: Any, keep: frozenset[str] = frozenset()) -> Any:
    """``value`` with every string (keys in ``keep`` aside) replaced by a unique hostile one."""
    if isinstance(value, str):
        return _hostile(value)
    if isinstance(value, list):
        return [hostile(v) for v in value]
    if isinstance(value, dict):
        return {k: (v if k in keep else hostile(v)) for k, v in value.items()}
    return value


def _records() -> list[dict[str, Any]]:
    recs = grid_records("ablation", n_items=4)
    for r in recs[:3]:
        r["error"] = "server said no"
        r["judge_verdict"] = True
        r["method"] = "madara"
        r["extra"] = {
            **(r.get("extra") or {}),
            "routing": {"mode": "SDA", "reason": "low"},
            "doc_ids": ["d1", "d2"],
            "recall_at_step": [0.5],
            "gold_hits": [["d1"]],
            "price_missing": {"model": "m", "sheet": "s"},
        }
    # Records keep their numbers and their grouping (configuration and item ids stay distinct),
    # every text becomes hostile.
    return [hostile(r) for r in recs]


def _manifest() -> dict[str, Any]:
    session = {
        "session": "s1",
        "started_at": "t0",
        "ended_at": "t1",
        "status": "interrupted",
        "exit_status": "0",
        "bcas": {"version": "0", "git_commit": "abc", "git_dirty": True},
        "host": {"cpu": "cpu", "cpu_features": ["avx"], "gpus": ["gpu"]},
        "python": "3.11",
        "packages": {"jinja2": "3"},
        "seed": "0",
        "epochs": "1",
        "price_sheet": {"path": "p", "sha256": "0123456789abcdef0"},
        "models": {"m": {"backend": "embedded", "model": "x", "fingerprint": "f", "recorded_fingerprints": ["g"]}},
        "judge": {"spec": "j", "grade_id": "g"},
        "datasets": {"d": ["h"]},
        "options": {"grid": {"value": "smoke", "source": "flag"}},
    }
    return {"sessions": [hostile(session), hostile(session)]}


def render_hostile(run_dir: Path) -> str:
    records = _records()
    summaries = write_summaries(run_dir, records)
    profiles = [
        hostile(
            {
                "model": "m",
                "dataset": "d",
                "n_queries": "3",
                "rho_hat": [0.1],
                "rho_star": "1",
                "rho_bar": 0.2,
                "classification": "c",
                "em_nf": "e",
                "decision": {"mode": "SDA", "reason": "r"},
            },
            keep=frozenset({"rho_hat", "rho_bar"}),
        )
    ]
    stops = [hostile({"case_id": "c", "recorded": 1, "total": 2, "cap_usd": 0.1, "spent_usd": 0.2})]
    path = render_report(
        run_dir,
        records,
        summaries.rows,
        summaries.comparisons,
        title=_hostile("title"),
        profiles=profiles,
        manifest=_manifest(),
        stops=stops,
        model_comparisons=summaries.model_comparisons,
        matrix=summaries.matrix,
    )
    return path.read_text(encoding="utf-8")


def test_a_run_hostile_in_every_string_renders_no_live_markup(tmp_path: Path) -> None:
    page = render_hostile(tmp_path)
    parser = Tags()
    parser.feed(page)
    parser.close()
    tags = [t for t, _ in parser.tags]
    assert set(tags) <= PAGE_TAGS, f"elements the report does not write: {set(tags) - PAGE_TAGS}"
    assert "img" not in tags
    handlers = [(t, name) for t, attrs in parser.tags for name, _ in attrs if name.lower().startswith("on")]
    assert handlers == []
    scripts = [dict(a) for t, a in parser.tags if t == "script"]
    code = [a for a in scripts if a != {"type": "application/json"}]
    assert code == [{}, {}, {}], "the page's own script, the Vega bundle and the figure loader: inline, with no src"
    assert len(scripts) - len(code) == tags.count("figure") > 0  # one spec (data) per figure
    specs = [spec for _, spec in page_figures(page)]
    labels = {str(row.get("config")) for spec in specs for row in spec.get("data", {}).get("values", [])}
    assert labels and all(label.startswith(HOSTILE[0]) for label in labels)  # the hostile names, intact in the data
    # The hostile text is on the page as text, in every section the data reaches.
    for section in ('id="summary"', 'id="beyond"', 'id="comparisons"', 'id="manifest"', 'id="rsc"', 'id="cost-stop"'):
        assert section in page
    assert page.count("&lt;script&gt;") > 50
