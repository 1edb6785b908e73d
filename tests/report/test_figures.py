"""The figures as a reader and a paper's author get them: Vega-Lite specs that carry the run's own
numbers (checked against ``summary.json``), a sentence where there is nothing to draw,
``bcas figures RUN --format pdf|svg|png`` writing one valid file per figure, a page that loads
no script from the network, and no SVG written by hand anywhere in the package."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import altair as alt
import pytest
from altair.utils.schemapi import validate_jsonschema

from bcas.cli import main as bcas_main
from bcas.records import Record, ResultStore
from bcas.report.charts import cost_chart, distribution_chart, knee_chart, scaling_chart, shift_chart
from bcas.report.vega import LOADER, MARK, bundle, page_figures, page_scripts, script_hash
from tests.support.figures import marks, texts
from tests.support.reports import grid_records, render

PACKAGE = Path(__file__).resolve().parents[2] / "bcas"
TRICKY = ["a<b & c", 'say "hi"', "it's", "</script><script>x()</script>", 'x" onload="y()', "ح<ب>"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder (records.jsonl) of two models on the search-scaling and ablation grids, its views
    written by ``bcas report`` as a finished session writes them."""
    run_dir = tmp_path_factory.mktemp("figures") / "run"
    records = [{**r, "model_fingerprint": "gguf:sha256:aaaa"} for r in grid_records("search_scaling")]
    records += [{**r, "model_fingerprint": "gguf:sha256:aaaa"} for r in grid_records("ablation", seed=1)]
    qwen = grid_records("ablation", seed=2, model="qwen-2-7b")
    records += [{**r, "model_fingerprint": "gguf:sha256:bbbb"} for r in qwen]
    ResultStore(run_dir).extend(Record.from_dict(r) for r in records)
    assert bcas_main(["report", str(run_dir)]) == 0
    return run_dir


def _figures(run_dir: Path) -> dict[str, dict[str, Any]]:
    return dict(page_figures((run_dir / "index.html").read_text(encoding="utf-8")))


def test_the_scaling_and_shift_figures_carry_the_numbers_of_summary_json(run: Path) -> None:
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    figures = _figures(run)
    assert set(figures) == {
        "scaling-search_scaling-hotpotqa", "scaling-ablation-hotpotqa", "shift-ablation-hotpotqa",
        "cost-hotpotqa-correct_em-cost", "cop-hotpotqa-correct_em-cost_of_pass",
    }  # fmt: skip
    for grid in ("search_scaling", "ablation"):
        drawn = {
            (v["series"], v["config"]): (v["acc"], v["lo"], v["hi"])
            for v in figures[f"scaling-{grid}-hotpotqa"]["data"]["values"]
        }
        want = {
            (r["model"], r["label"]): (r["accuracy"] * 100, r["ci_lo"] * 100, r["ci_hi"] * 100)
            for r in summary["rows"]
            if r["grid"] == grid
        }
        assert drawn.keys() == want.keys()
        for key, values in want.items():
            assert drawn[key] == pytest.approx(values, abs=1e-3), key
    bars = {
        (v["series"], v["config"]): (v["diff"], v["lo"], v["hi"])
        for v in figures["shift-ablation-hotpotqa"]["data"]["values"]
    }
    comps = [c for c in summary["comparisons"] if c["grid"] == "ablation"]
    assert len(bars) == len(comps) == 10  # five configurations against the reference, two models side by side
    for c in comps:
        assert bars[(c["model"], c["label"])] == pytest.approx(
            (c["diff"] * 100, c["ci_lo"] * 100, c["ci_hi"] * 100), abs=1e-3
        )


def test_every_spec_is_valid_vega_lite_and_deterministic(run: Path) -> None:
    schema = alt.vegalite.v6.schema.load_schema()
    for name, spec in _figures(run).items():
        validate_jsonschema(spec, schema, raise_error=True)  # raises on a spec Vega-Lite would reject
        assert spec["$schema"].endswith(f"/vega-lite/{alt.SCHEMA_VERSION}.json"), name
    first = (run / "index.html").read_bytes()
    assert bcas_main(["report", str(run)]) == 0  # built again in this process: no counter, no random id
    assert (run / "index.html").read_bytes() == first


def test_the_page_names_every_figure_and_draws_each_from_its_spec(run: Path) -> None:
    html = (run / "index.html").read_text(encoding="utf-8")
    opened = re.findall(r'<figure class="bcas-figure[^"]*" data-figure="([^"]+)"[^>]*><div class="vega-chart"></div>'
                        r'<script type="application/json">', html)  # fmt: skip
    assert opened == list(_figures(run)) and len(set(opened)) == len(opened) == 5
    assert html.count('figure-empty"') == 0


def test_the_page_loads_no_script_from_anywhere(run: Path) -> None:
    html = (run / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script[^>]*\bsrc\s*=", html, flags=re.I) == []
    outside_scripts = re.sub(r"<script>.*?</script>", "", html, flags=re.S)
    assert re.findall(r"<(?:link|img|iframe)\b", outside_scripts, flags=re.I) == []
    [policy] = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["default-src"] == "'none'"  # so nothing else can be fetched either
    assert all(re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", s) for s in directives["script-src"].split())
    assert "http" not in directives["script-src"]


def test_the_vega_bundle_comes_once_and_only_with_a_figure_to_draw(run: Path) -> None:
    from bcas.report.templating import render as render_template

    empty = render_template("_figure_one.html", figure=shift_chart("s", "nothing", []))
    assert page_scripts(empty) == ("", [])  # a sentence needs no script
    drawn = render_template("_figure_one.html", figure=shift_chart("s", "one", [("m", "c", 0.1, 0.0, 0.2)]))
    scripts, hashes = page_scripts(empty, drawn)
    assert str(scripts) == f"<script>{bundle()}</script><script>{LOADER}</script>"
    assert hashes == [script_hash(bundle()), script_hash(LOADER)]
    html = (run / "index.html").read_text(encoding="utf-8")
    assert html.count(bundle()) == 1 and html.count(LOADER) == 1  # once for the page's five figures


def test_labels_stay_intact_and_cannot_close_the_spec_script() -> None:
    series = {name: [(0.5, 0.3, 0.7)] * len(TRICKY) for name in TRICKY[:3]}
    figure = scaling_chart("n", "title <b>&\"'", TRICKY[:3], TRICKY[3:], series)
    from bcas.report.templating import render as render_template

    html = str(render_template("_figure_one.html", figure=figure))
    assert html.count("<script") == 1 and html.count("</script>") == 1  # the label's </script> is \u003c/script\u003e
    [(name, spec)] = page_figures(html)
    assert spec == figure.spec and name == "n"
    drawn = texts(spec)
    for label in TRICKY:
        assert label in drawn  # each axis label and legend entry, intact
    assert "title <b>&\"'" in drawn


def test_a_figure_with_nothing_to_show_is_a_sentence() -> None:
    empty = [
        scaling_chart("a", "g — d", ["s1"], [], {"m": [None]}),
        shift_chart("b", "g — d: net shift", []),
        cost_chart("c", "d: accuracy against cost", "USD", [], money=True),
        distribution_chart("d", {"m · d · s1": []}),
        knee_chart("e", {"m · d · s1": [{"concurrency": 1, "items_per_min": 3.0, "latency_p95": 1.0, "n": 4}]}),
    ]
    assert all(f.spec is None and f.empty.endswith(".") for f in empty)
    assert "no point to plot" in empty[2].empty and "fewer than two concurrency levels" in empty[4].empty
    from bcas.report.templating import render as render_template

    html = str(render_template("figures.html", figures=empty))
    assert MARK not in html and html.count('<p class="figure-empty" data-figure=') == 5
    assert "g — d: no configuration has an accuracy to plot." in html


def test_nothing_correct_leaves_a_sentence_where_the_cost_of_a_correct_answer_would_be(tmp_path: Path) -> None:
    records = grid_records("search_scaling", n_items=4)
    for r in records:
        r["correct_em"] = False
        r["correct_squad_em"] = False
    path, _, _ = render(tmp_path / "run", records)
    html = path.read_text(encoding="utf-8")
    names = [n for n, _ in page_figures(html)]
    assert "cost-hotpotqa-correct_em-cost" in names  # accuracy 0 is a point on the cost axis
    assert not [n for n in names if n.startswith("cop-")]  # but no correct answer has a cost: no axes
    assert re.search(r'<p class="figure-empty" data-figure="cop-hotpotqa[^"]*"[^>]*>[^<]*no point to plot', html)


@pytest.mark.parametrize("fmt", ["pdf", "svg", "png"])
def test_bcas_figures_writes_one_file_per_figure(run: Path, tmp_path: Path, fmt: str, capsys: Any) -> None:
    out = tmp_path / fmt
    assert bcas_main(["figures", str(run), "--format", fmt, "--out", str(out)]) == 0
    written = sorted(out.iterdir())
    assert [p.name for p in written] == sorted(f"{name}.{fmt}" for name in _figures(run))
    for path in written:
        data = path.read_bytes()
        if fmt == "pdf":
            assert data.startswith(b"%PDF-") and b"%%EOF" in data[-1024:]
        elif fmt == "png":
            assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000
        else:
            root = ET.fromstring(data)
            assert root.tag == "{http://www.w3.org/2000/svg}svg" and len(list(root.iter())) > 50
    assert capsys.readouterr().out.strip().endswith(f"5 figures written ({fmt})")


def test_bcas_figures_defaults_to_the_runs_figures_folder_and_reads_a_compare_page(tmp_path: Path, run: Path) -> None:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    assert bcas_main(["figures", str(copy), "--format", "pdf"]) == 0
    assert len(list((copy / "figures").glob("*.pdf"))) == 5
    page = tmp_path / "cmp.html"
    assert bcas_main(["compare", str(run), str(copy), "--html", str(page)]) == 0
    assert [n for n, _ in page_figures(page.read_text(encoding="utf-8"))] == ["compare-shift"]
    assert bcas_main(["figures", str(page), "--format", "svg"]) == 0
    assert (tmp_path / "figures" / "compare-shift.svg").is_file()


def test_bcas_figures_refuses_what_it_cannot_export(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "bare").mkdir()
    assert bcas_main(["figures", str(tmp_path / "bare")]) == 2
    assert "no index.html (write the report first: bcas report" in capsys.readouterr().err
    assert bcas_main(["figures", str(tmp_path / "missing.html")]) == 2
    assert "no such run folder or page" in capsys.readouterr().err
    page = tmp_path / "empty.html"
    page.write_text("<html><body><p class='figure-empty'>nothing</p></body></html>", encoding="utf-8")
    assert bcas_main(["figures", str(page)]) == 2
    assert "no figure to export" in capsys.readouterr().err
    assert bcas_main(["figures", str(page), "--format", "gif"]) == 2


def test_the_knee_and_distribution_figures_draw_every_level_and_item() -> None:
    curve = [{"concurrency": c, "items_per_min": 10.0 * c, "latency_p95": 0.5 + c, "n": 4} for c in (1, 2, 4)]
    drawn = marks(knee_chart("k", {"m · d · s1": curve, "m · d · s2": curve[:2]}).spec)
    assert sorted(len(line) for line in drawn["line"]) == [2, 3]
    times = {"m · d · s1": [0.1, 0.2, 0.3, 0.4], "m · d · s2": [1.0, 2.0]}
    dist = distribution_chart("t", times).spec
    ticks = [item for group in marks(dist)["rect"] for item in group]
    assert len(ticks) == 6 + 2 * 2  # a tick per item, and the p95 and p99 bars of each configuration
    assert "m · d · s1" in texts(dist) and "p50" in texts(dist)  # the configuration names, whole; the legend


def test_no_module_under_bcas_writes_svg_by_hand() -> None:
    sources = [p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".html", ".j2", ".js", ".css")]
    assert len(sources) > 50
    pattern = re.compile(r"<svg|polyline|viewBox|svg_|<circle|<rect ", re.I)
    hits = [f"{p.relative_to(PACKAGE)}:{m.group()}" for p in sources for m in pattern.finditer(p.read_text("utf-8"))]
    assert hits == []


def test_the_bundle_is_read_from_the_cache_and_built_again_when_the_file_was_altered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    import vl_convert

    from bcas.report import vega

    real = bundle()
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path))
    cached = vega._cache_file(vl_convert.__version__)
    assert cached.parent == tmp_path
    stamped = "window.fromTheCache=1;"
    cached.write_text(hashlib.sha256(stamped.encode()).hexdigest() + "\n" + stamped, encoding="utf-8")
    vega.bundle.cache_clear()
    try:
        assert vega.bundle() == stamped  # read, not built
        cached.write_text(hashlib.sha256(stamped.encode()).hexdigest() + "\nwindow.altered=1;", encoding="utf-8")
        vega.bundle.cache_clear()
        assert vega.bundle() == real  # the stamp no longer matches: built again, and the file repaired
        assert cached.read_text(encoding="utf-8").endswith("\n" + real)
    finally:
        vega.bundle.cache_clear()


def test_a_long_title_is_wrapped_into_lines_of_at_most_72_characters_and_a_short_one_is_kept() -> None:
    import altair as alt

    from bcas.report.charts import _spec

    chart = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
    long = "Accuracy against the search budget per model " * 4 + "with per-item 95% Wilson intervals"
    lines = _spec(chart, long)["title"]
    assert isinstance(lines, list) and len(lines) == 3
    assert all(len(line) <= 72 for line in lines) and " ".join(lines) == " ".join(long.split())
    assert all(len(a) + 1 + len(b.split()[0]) > 72 for a, b in zip(lines, lines[1:], strict=False))  # filled greedily
    assert _spec(chart, "Short title")["title"] == "Short title"
