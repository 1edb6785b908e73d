"""The MADARA grid through the plugin (pytester, ``mock`` backend, real BM25 over the collection).

Checks what only a whole run shows: the router's calibration items (RSC probe and EM_NF)
are never evaluated items; the report's routing-decision column shows the routed
treatment; the MADARA table lists MADARA rows only; the summary states each grid's
metric (strict EM for MADARA grids, with strict token F1 beside it).
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from bcas.testing.project import grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

CALIBRATION_N = 12

CONFTEST = f"""
from bcas.config import AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.grids import Grid, GridEntry, MADARA_RETRIEVAL, register_grid

def _madara(method, **kw):
    return RunConfig(retrieval=MADARA_RETRIEVAL,
                     assess=AssessConfig(method=method, calibration_n={CALIBRATION_N}, doc_source="retrieval"))

register_grid(Grid(
    "routed",
    (GridEntry("madara", _madara("nf"), reference=True),
     GridEntry("madara", _madara("madara"), compare=(("madara/nf", "routed vs NF"),)),
     GridEntry("rsc", _madara("madara")),
     GridEntry("bcas", RunConfig(budget=Budget(max_searches=1, max_total_tokens=2000),
                                 retrieval=RetrievalConfig(mode="bm25")))),
    datasets=("conflictqa",), primary_metric="strict_em", holm_scope="cell", holdout={CALIBRATION_N},
))
"""


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(pytester.path, CONFTEST)
    run_dir = pytester.path / "run"
    result = pytester.runpytest_inprocess(
        "--bcas-model",
        "mock:gold",
        "--bcas-grid",
        "routed",
        "--bcas-limit",
        "4",
        "--bcas-report",
        str(run_dir),
        "-p",
        "no:cacheprovider",
        "-q",
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    return run_dir


def _calibration_items_are_never_evaluated(run: Path) -> None:
    (profile_path,) = (run / "rsc").glob("*.json")
    profile = json.loads(profile_path.read_text())
    calibration = set(profile["item_ids"])
    assert len(calibration) == CALIBRATION_N and profile["n_queries"] == CALIBRATION_N
    madara = [r for r in read_records(run) if r["method"] == "madara"]
    evaluated = {r["item_id"] for r in madara}
    assert len(evaluated) == 4 and not calibration & evaluated
    routed = [r for r in madara if r["extra"]["assess_method"] == "madara"]
    # The router used the same calibration probe (same items, same settings: the same profile id).
    assert {r["extra"]["rsc_profile_id"] for r in routed} == {profile["id"]}
    assert {r["extra"]["routing"]["mode"] for r in routed} == {profile["decision"]["mode"]}


def _report_routing_column_and_madara_table(run: Path) -> None:
    html = (run / "index.html").read_text()
    table = re.search(r'<table class="sortable" id="madara">(.*?)</table>', html, re.S)
    assert table is not None
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)[1:]  # without the header row
    cells = [[unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]
    assert sorted(c[3] for c in cells) == ["madara/madara", "madara/nf"]  # no BCAS row
    profile = json.loads(next((run / "rsc").glob("*.json")).read_text())
    routed = next(c for c in cells if c[3] == "madara/madara")
    assert routed[-1].startswith(profile["decision"]["mode"] + ": EM_NF=")
    nf = next(c for c in cells if c[3] == "madara/nf")
    assert nf[-1] == ""
    # the RSC table names the treatment the profile routes to
    rsc = re.search(r'id="rsc">(.*?)</table>', html, re.S).group(1)
    assert f"<td>{profile['decision']['mode']}</td>" in rsc


def _summary_states_the_metric_and_families(run: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    metrics = {(r["grid"], r["label"]): r["metric"] for r in summary["rows"]}
    assert metrics[("routed", "madara/nf")] == "strict_em"
    assert any("routed: accuracy is strict EM (MADARA §5.4)" in n for n in summary["notes"])
    comps = {c["label"]: c for c in summary["comparisons"]}
    assert "rsc" not in comps and "rsc" not in {r["label"] for r in summary["rows"]}  # a probe has no records
    comp = comps["madara/madara"]
    assert (comp["reference"], comp["family"], comp["metric"]) == ("madara/nf", "routed vs NF", "strict_em")
    # an entry without its own comparisons meets the reference in the grid's default family
    assert (comps["bm25/s1/t2k"]["reference"], comps["bm25/s1/t2k"]["family"]) == ("madara/nf", "")


def test_routed_madara_run_end_to_end(run: Path) -> None:
    """One run (a probe is the slow part), three promises."""
    _calibration_items_are_never_evaluated(run)
    _report_routing_column_and_madara_table(run)
    _summary_states_the_metric_and_families(run)
