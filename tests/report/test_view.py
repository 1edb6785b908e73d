"""``bcas view``: one leaderboard over many run folders, read from their records.

Five real runs on the ``mock`` backend (BM25 over a four-item file), built once for the
module: three models (``mock:gold``, ``mock:random``, ``mock:verbose``) on grid ``view_a``,
two on grid ``view_b``, the second of them run as two shards and joined by ``bcas merge``.
The view's numbers must be each run's ``summary.json`` (the page and ``view.json``), its
paired differences those ``bcas compare`` works out for the same two runs, its flipped
items those the records say, and rows that differ in more than the model are refused as
``bcas compare`` refuses them.  The Chromium test opens the site as a user does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from bcas.cli import main
from bcas.grids import GRIDS
from bcas.testing.project import budget_grid, codename_items, read_records, write_jsonl
from tests.support.chromium import launch_args
from tests.support.skips import skip_if_no_chromium

REPO = Path(__file__).resolve().parents[2]
RUNS = {  # folder -> (grid, model)
    "gold-a": ("view_a", "mock:gold"),
    "random-a": ("view_a", "mock:random"),
    "verbose-a": ("view_a", "mock:verbose"),
    "gold-b": ("view_b", "mock:gold"),
}
MERGED = "random-b"  # view_b x mock:random, run as shards 1/2 and 2/2, then bcas merge


@dataclass
class Runs:
    root: Path  # holds runs/ (the five run folders), shards/ and the dataset
    site: Path  # bcas view runs/ --out site


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    import bcas

    root = tmp_path_factory.mktemp("view")
    snapshot = GRIDS.snapshot()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BCAS_CACHE_DIR", str(root / "cache"))
        rows = codename_items(4)
        for row in rows[::2]:  # two items answered beta, two alpha
            row["answers"] = ["beta"]
            row["documents"][0]["text"] = row["documents"][0]["text"].replace("alpha", "beta")
        data = write_jsonl(root / "codes.jsonl", rows)
        exec(budget_grid("view_a", [data], (1, 2)), {})
        exec(budget_grid("view_b", [data], (1, 3)), {})
        for name, (grid, model) in RUNS.items():
            bcas.evaluate(grids=grid, models=model, out=root / "runs" / name)
        shards = [root / "shards" / f"shard-{k}-of-2" for k in (1, 2)]
        for k, folder in enumerate(shards, 1):
            bcas.evaluate(grids="view_b", models="mock:random", out=folder, shard=f"{k}/2")
        assert main(["merge", *map(str, shards), "--out", str(root / "runs" / MERGED)]) == 0
        assert main(["view", str(root / "runs"), "--out", str(root / "site")]) == 0
        yield Runs(root, root / "site")
    GRIDS.restore(snapshot)


def _view(runs: Runs) -> dict[str, Any]:
    return json.loads((runs.site / "view.json").read_text(encoding="utf-8"))


def _summary_of(run_dir: Path) -> list[dict[str, Any]]:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["rows"]


def _summary(runs: Runs, name: str) -> list[dict[str, Any]]:
    return _summary_of(runs.root / "runs" / name)


def _key(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return (row["grid"], row["model"], row["dataset"], row["label"])


class _Leaderboard(HTMLParser):
    """The leaderboard rows of index.html: each ``tr.fr``'s data attributes and cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str], list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "tr" and "fr" in found.get("class", "").split():
            self.rows.append((found, []))
        elif tag == "td" and self.rows and self._cell is None:
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None


HEADERS = ("#", "model", "run", "date", "n", "right", "accuracy %", "95% CI")  # the first columns


def _expected_cells(row: dict[str, Any]) -> dict[str, str]:
    """What the page must show for a summary.json row."""
    return {
        "n": str(row["n"]),
        "right": str(row["correct"]),
        "accuracy %": f"{row['accuracy'] * 100:.1f}",
        "95% CI": f"{row['ci_lo'] * 100:.1f} – {row['ci_hi'] * 100:.1f}",
    }


def test_every_number_of_the_leaderboard_is_the_runs_summary_json(runs: Runs) -> None:
    view = _view(runs)
    shown = {(r["run"], _key(r)): r for t in view["tables"] for r in t["rows"]}
    page = _Leaderboard()
    page.feed((runs.site / "index.html").read_text(encoding="utf-8"))
    cells = {
        (attrs["data-run"], attrs["data-grid"], attrs["data-model"], attrs["data-dataset"], attrs["data-config"]): texts
        for attrs, texts in page.rows
    }
    expected = 0
    for name in [*RUNS, MERGED]:
        rows = _summary(runs, name)
        assert len(rows) == 2, name  # two configurations per grid
        for row in rows:
            expected += 1
            mine = shown[(name, _key(row))]
            for field in ("n", "correct", "accuracy", "ci_lo", "ci_hi", "interval", "metric", "status", "epochs"):
                assert mine[field] == row[field], (name, _key(row), field)
            texts = dict(zip(HEADERS, cells[(name, *_key(row))], strict=False))
            assert {k: texts[k] for k in _expected_cells(row)} == _expected_cells(row), (name, _key(row))
    assert len(shown) == expected == 10 and len(page.rows) == 10


def test_the_merged_run_is_one_run_beside_the_others(runs: Runs) -> None:
    view = _view(runs)
    assert sorted(r["name"] for r in view["runs"]) == sorted([*RUNS, MERGED])
    merged = [r for t in view["tables"] for r in t["rows"] if r["run"] == MERGED]
    assert [r["n"] for r in merged] == [4, 4]  # both shards' items, as the merged summary.json says
    assert len(read_records(runs.root / "runs" / MERGED)) == 8


def test_each_rows_difference_from_its_leader_is_bcas_compares(runs: Runs) -> None:
    """The leaderboard's paired difference on overlapping items (Newcombe, exact McNemar) is the one
    ``bcas compare LEADER RUN`` works out for the same group."""
    from bcas.report.compare import compare_runs, load_run

    view = _view(runs)
    checked = 0
    for table in view["tables"]:
        leader, *others = table["rows"]
        assert leader["vs_leader"] is None and leader["accuracy"] == max(r["accuracy"] for r in table["rows"])
        for row in others:
            comps, _ = compare_runs(
                load_run(runs.root / "runs" / leader["run"]), load_run(runs.root / "runs" / row["run"])
            )
            (comp,) = [c for c in comps if c.label == table["label"]]
            diff = row["vs_leader"]
            assert diff["n_paired"] == comp.n == 4
            assert (diff["diff"], diff["ci_lo"], diff["ci_hi"], diff["p_value"]) == pytest.approx(
                (comp.diff, comp.ci_lo, comp.ci_hi, comp.p_value), abs=1e-12
            )
            checked += 1
    assert checked == 6  # (2 + 2) rows under gold-a, (1 + 1) under gold-b


def _outcomes(runs: Runs, name: str, label: str) -> dict[str, bool]:
    return {r["item_id"]: bool(r["correct_em"]) for r in read_records(runs.root / "runs" / name) if r["label"] == label}


def test_a_pair_page_lists_the_flipped_items_with_both_trajectories(runs: Runs) -> None:
    view = _view(runs)
    (pair,) = [
        p for p in view["pairs"]
        if (p["a"]["run"], p["b"]["run"], p["table"]["label"]) == ("gold-a", "random-a", "bm25/s1/t2k")
    ]  # fmt: skip
    gold, rand = _outcomes(runs, "gold-a", "bm25/s1/t2k"), _outcomes(runs, "random-a", "bm25/s1/t2k")
    assert pair["a_only"] == sorted(i for i in gold if gold[i] and not rand[i]) and pair["a_only"]
    assert pair["b_only"] == sorted(i for i in gold if rand[i] and not gold[i])
    page = (runs.site / pair["page"]).read_text(encoding="utf-8")
    assert page.count('class="flip"') == len(pair["a_only"]) + len(pair["b_only"])
    assert page.count('<div class="side">') == 2 * page.count('class="flip"')  # both trajectories, side by side
    predictions = {
        r["item_id"]: r["prediction"]
        for r in read_records(runs.root / "runs" / "random-a")
        if r["label"] == "bm25/s1/t2k"
    }
    for item in pair["a_only"]:
        assert f'data-item="{item}"' in page
        assert predictions[item].split()[0] in page  # the wrong side's own answer is shown
    assert 'href="../../runs/gold-a/index.html"' in page  # each run's own report


def test_every_run_links_to_its_own_report(runs: Runs) -> None:
    index = (runs.site / "index.html").read_text(encoding="utf-8")
    for name in [*RUNS, MERGED]:
        assert f'href="../runs/{name}/index.html"' in index
        assert (runs.site / "../runs" / name / "index.html").resolve().is_file()


def test_a_case_that_did_not_pass_shows_its_mark_as_its_summary_json_does(runs: Runs, tmp_path: Path) -> None:
    """A case whose status (cases.jsonl) is failed has no accuracy in summary.json: nor in the view."""
    from dataclasses import replace

    from bcas.records.case_status import append_case_status, read_case_statuses

    run = tmp_path / "gold-a"
    shutil.copytree(runs.root / "runs" / "gold-a", run)
    (case,) = [c for c in read_case_statuses(run) if c.label == "bm25/s2/t2k"]
    append_case_status(run, replace(case, status="failed", reason="an invariant broke"))
    assert main(["report", str(run)]) == 0  # summary.json rebuilt from the records and the statuses
    summary = {r["label"]: r for r in _summary_of(run)}
    assert summary["bm25/s2/t2k"]["accuracy"] is None and summary["bm25/s1/t2k"]["accuracy"] == 1.0
    assert main(["view", str(run), "--out", str(tmp_path / "site")]) == 0
    view = json.loads((tmp_path / "site" / "view.json").read_text(encoding="utf-8"))
    for table in view["tables"]:
        (row,) = table["rows"]
        want = summary[table["label"]]
        assert (row["status"], row["accuracy"], row["ci_lo"], row["correct"]) == (
            want["status"], want["accuracy"], want["ci_lo"], want["correct"]
        )  # fmt: skip
    page = _Leaderboard()
    page.feed((tmp_path / "site" / "index.html").read_text(encoding="utf-8"))
    shown = {attrs["data-config"]: dict(zip(HEADERS, texts, strict=False)) for attrs, texts in page.rows}
    assert shown["bm25/s2/t2k"]["accuracy %"] == "FAILED" and shown["bm25/s2/t2k"]["95% CI"] == "an invariant broke"
    assert shown["bm25/s1/t2k"]["accuracy %"] == "100.0"


def test_rows_that_differ_in_more_than_the_model_are_refused(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another seed is another configuration id: refused in one line naming it, as ``bcas compare`` does."""
    import bcas

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BCAS_CACHE_DIR", str(runs.root / "cache"))
        bcas.evaluate(grids="view_a", models="mock:gold", seed=5, out=tmp_path / "seed5")
    out = tmp_path / "site"
    capsys.readouterr()
    assert main(["view", str(runs.root / "runs" / "gold-a"), str(tmp_path / "seed5"), "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: not comparable (only the model may differ): codes / view_a / bm25/s1/t2k")
    assert "configuration id differs" in line and "--allow-mismatch" in line
    assert not out.exists()
    allowed = [str(runs.root / "runs" / "gold-a"), str(tmp_path / "seed5"), "--out", str(out), "--allow-mismatch"]
    assert main(["view", *allowed]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert 'id="override"' in page and "configuration id differs" in page


def test_a_folder_is_searched_and_shards_merged_into_a_found_run_are_left_out(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(runs.root), "--out", str(tmp_path / "site")]) == 0
    said = capsys.readouterr().out
    names = sorted(r["name"] for r in json.loads((tmp_path / "site" / "view.json").read_text())["runs"])
    assert names == sorted([*RUNS, MERGED])  # not the two shards beside them, which random-b holds
    assert said.count("left out, merged into") == 2 and "5 runs, 4 tables" in said


def test_max_pairs_bounds_the_pages_and_the_page_says_so(runs: Runs, tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert main(["view", str(runs.root / "runs"), "--out", str(site), "--max-pairs", "2"]) == 0
    assert sorted(p.name for p in (site / "pairs").iterdir()) == ["p1.html", "p2.html"]
    view = json.loads((site / "view.json").read_text())
    assert view["pairs_left_out"] == len(_view(runs)["pairs"]) - 2 > 0
    assert f"{view['pairs_left_out']} more pairs share items" in (site / "index.html").read_text(encoding="utf-8")
    # every row still shows its difference from the leader, paged or not
    assert all(r["vs_leader"] for t in view["tables"] for r in t["rows"][1:])


def test_serve_answers_on_loopback_with_the_view_and_the_run_reports_only(runs: Runs, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bcas", "view", str(runs.root / "runs"), "--out", str(tmp_path / "site")]
    proc = subprocess.Popen(
        [*command, "--serve", "--serve-seconds", "60"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = next(line for line in proc.stdout if line.startswith("serving "))
        url = line.split()[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/index.html")
        with urllib.request.urlopen(url, timeout=10) as reply:
            index = reply.read().decode()
        assert "bcas view — 5 runs" in index
        (link,) = re.findall(r'<a href="([^"]+/gold-a/index\.html)">gold-a</a>', index.split("<h2>Leaderboard")[0])
        report = urllib.parse.urljoin(url, link)
        with urllib.request.urlopen(report, timeout=10) as reply:
            assert reply.status == 200 and "<html" in reply.read().decode()
        for outside in ("../../codes.jsonl", "../", "../../cache/"):  # beside the runs; a folder listing
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(urllib.parse.urljoin(report, outside), timeout=10)
            assert info.value.code == 404, outside
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- in Chromium ---------------------------------------------------------------------------------


def _local_only(route: Any, remote: list[str]) -> None:
    """Let a request for a file through; note and abort any other (nothing may leave the machine)."""
    if route.request.url.startswith("file:"):
        route.continue_()
    else:
        remote.append(route.request.url)
        route.abort()


@pytest.mark.browser
@skip_if_no_chromium
def test_the_view_in_chromium_shows_the_leaderboard_filters_and_a_flipped_items_page(runs: Runs) -> None:
    from playwright.sync_api import sync_playwright

    expected = {
        (name, row["model"], row["grid"], row["label"]): _expected_cells(row)
        for name in [*RUNS, MERGED]
        for row in _summary(runs, name)
    }
    errors: list[str] = []
    remote: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**launch_args())
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route("**/*", lambda route: _local_only(route, remote))
            page.goto((runs.site / "index.html").as_uri())
            page.wait_for_selector("body[data-ready='1']")
            shown = page.evaluate(
                """() => Array.from(document.querySelectorAll('section.cell')).flatMap((sec) =>
                  Array.from(sec.querySelectorAll('tr.fr')).map((tr) => ({
                    run: tr.dataset.run, model: tr.dataset.model, grid: tr.dataset.grid, label: sec.dataset.config,
                    cells: Array.from(tr.cells).map((c) => c.textContent.trim())})))"""
            )
            assert len(shown) == len(expected) == 10
            for row in shown:
                cells = dict(zip(HEADERS, row["cells"], strict=False))
                want = expected[(row["run"], row["model"], row["grid"], row["label"])]
                assert {k: cells[k] for k in want} == want, row
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280

            page.select_option("#filter-model", "mock-random")
            visible = page.eval_on_selector_all(
                "tr.fr", "rows => rows.filter((r) => !r.hidden).map((r) => r.dataset.run)"
            )
            assert sorted(visible) == ["random-a", "random-a", "random-b", "random-b"]
            page.select_option("#filter-model", "")
            page.fill("#from", (date.today() + timedelta(days=2)).isoformat())
            page.dispatch_event("#from", "change")
            assert page.eval_on_selector_all("tr.fr", "rows => rows.filter((r) => !r.hidden).length") == 0
            assert page.text_content("#shown") == "0 of 10 rows shown"
            page.fill("#from", "")
            page.dispatch_event("#from", "change")

            page.select_option("#pick-a", "gold-a")
            page.select_option("#pick-b", "random-a")
            links = page.eval_on_selector_all("li.pairlink", "lis => lis.filter((l) => !l.hidden).length")
            assert links == 2  # the two configurations both runs hold

            page.click("tr.fr[data-run='random-a'] a.flipped")
            page.wait_for_selector("details.flip[open]")
            sides = page.eval_on_selector_all("details.flip[open] .side h4", "hs => hs.map((h) => h.textContent)")
            assert [s.split(":")[0] for s in sides] == ["A", "B"] and "gold-a" in sides[0] and "random-a" in sides[1]
            boxes = page.eval_on_selector_all(
                "details.flip[open] .side", "els => els.map((e) => e.getBoundingClientRect().top)"
            )
            assert len(boxes) == 2 and abs(boxes[0] - boxes[1]) < 1  # side by side
            assert page.text_content("h1").startswith("codes / view_a /")
        finally:
            browser.close()
    assert errors == [] and remote == []
