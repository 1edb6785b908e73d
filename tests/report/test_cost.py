"""``--bcas-max-cost`` and ``--bcas-estimate`` on real runs of the mock backend with a price sheet.

The sheet (tests/support/mockruns.py) prices the mock models, which the installed sheet
prices at 0.  Spend is read back from the records the runs wrote (``cost_usd``), never
from the code under test.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bcas.records.case_status import read_case_statuses
from bcas.testing.project import preload
from tests.support.mockruns import make_project

preload()

pytest_plugins = ["pytester"]

GOLD = ["--bcas-model", "mock:gold", "--bcas-grid", "pages", "--bcas-prices", "prices.toml", "--bcas-concurrency", "1"]
PACED = ["--bcas-backend", "paced", "--bcas-grid", "brief", "--bcas-prices", "prices.toml"]
TOTAL = re.compile(
    r"^total: (\d+) items, ([\d,]+) calls, ([\d,]+) tokens in, ([\d,]+) tokens out, cost \$([\d.]+)"
    r"( \+ (\d+) case\(s\) of unknown cost)?, wall .*$",
    re.M,
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("cost"))


@pytest.fixture
def here(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The grids' project in this test's folder, run in this process (a fresh interpreter per run
    costs seconds each), with its own generation cache."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(pytester.path / "cache"))
    make_project(pytester.path)
    return pytester


def run(here: pytest.Pytester, *args: str) -> pytest.RunResult:
    return here.runpytest("test_grids.py", "-p", "no:cacheprovider", *args)


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines() if line]


def spend(recs: list[dict[str, Any]]) -> float:
    assert all(r["cost_usd"] is not None for r in recs)
    return sum(float(r["cost_usd"]) for r in recs)


def test_max_cost_stops_within_one_item_of_the_cap_and_resumes(here: pytest.Pytester) -> None:
    full = run(here, *GOLD, "--bcas-report", "full", "-q")
    assert full.ret == 0, full.stdout.str()[-3000:]
    full_run = records(here.path / "full")
    assert len(full_run) == 7 * 12 and spend(full_run) > 0
    total = spend(full_run)
    cap = 0.4 * total
    biggest = max(float(r["cost_usd"]) for r in full_run)
    capped = run(
        here, *GOLD, "--bcas-report", "capped", "--bcas-max-cost", f"{cap:.6f}", "-rs", "--junitxml", "capped.xml"
    )
    assert capped.ret == 0, capped.stdout.str()[-3000:]
    out = capped.stdout.str()
    assert re.search(r"\d+ passed, \d+ skipped", out), out[-2000:]
    assert "--bcas-max-cost" in out and "run the same command again to resume" in out
    recs = records(here.path / "capped")
    spent = spend(recs)
    assert cap - biggest <= spent <= cap + biggest, (cap, spent, biggest)
    assert len(recs) < len(full_run)
    # The stop is in the run folder and the report.
    stops = [json.loads(line) for line in (here.path / "capped" / "stops.jsonl").read_text().splitlines()]
    assert stops and all(s["cap_usd"] == pytest.approx(cap) for s in stops)
    assert 'id="cost-stop"' in (here.path / "capped" / "index.html").read_text(encoding="utf-8")
    # The JUnit XML says of each case what cases.jsonl says: a case the cap cut short is incomplete, no accuracy.
    ended = {c.case_id: c for c in read_case_statuses(here.path / "capped")}
    statuses = {k: c.status for k, c in ended.items()}
    junit = {}
    for case in ET.parse(here.path / "capped.xml").getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if props.get("bcas_case"):
            junit[props["bcas_case"]] = props
    assert junit and {k: p["bcas_status"] for k, p in junit.items()} == {k: statuses[k] for k in junit}
    assert {p["bcas_status"] for p in junit.values()} == {"incomplete", "passed"}
    for key, props in junit.items():
        assert ("bcas_accuracy" in props) == (props["bcas_status"] == "passed"), props
        # ... and gives the same reason: the cap's own message, with what it spent and how many items it recorded.
        assert props.get("bcas_reason", "") == ended[key].reason, (props, ended[key])
    # Rerunning without the cap resumes: the missing items run, none twice, and all of them match the full run.
    resumed = run(here, *GOLD, "--bcas-report", "capped", "-q")
    assert resumed.ret == 0, resumed.stdout.str()[-3000:]
    recs = records(here.path / "capped")
    keys = [(r["config_id"], r["item_id"], r["epoch"]) for r in recs]
    assert len(keys) == len(set(keys)) == len(full_run)
    assert spend(recs) == pytest.approx(total)


def test_cost_options_are_checked_before_anything_runs(here: pytest.Pytester) -> None:
    off = run(here, "--bcas-model", "mock:gold", "--bcas-grid", "brief", "--bcas-prices", "none",
              "--bcas-max-cost", "1", "--bcas-report", "refused")  # fmt: skip
    assert off.ret == pytest.ExitCode.USAGE_ERROR and "pricing is off" in off.stderr.str()
    zero = run(here, *GOLD, "--bcas-max-cost", "0", "--bcas-report", "refused")
    assert zero.ret == pytest.ExitCode.USAGE_ERROR and "above 0" in zero.stderr.str()
    workers = run(here, *GOLD, "--bcas-estimate", "-n", "2", "--bcas-report", "refused")
    assert workers.ret == pytest.ExitCode.USAGE_ERROR and "one process" in workers.stderr.str()
    assert not (here.path / "refused").exists()


def estimate_total(stdout: str) -> tuple[int, int, float, int]:
    m = TOTAL.search(stdout)
    assert m, stdout[-3000:]
    return int(m.group(1)), int(m.group(2).replace(",", "")), float(m.group(5)), int(m.group(7) or 0)


def test_estimate_holds_the_spend_of_the_run_on_mock(here: pytest.Pytester) -> None:
    est = run(here, *GOLD, "--bcas-report", "estimated", "--bcas-estimate")
    assert est.ret == 0, est.stdout.str()[-3000:]
    items, calls, cost, unknown = estimate_total(est.stdout.str())
    assert not (here.path / "estimated").exists(), "the estimate wrote into the run folder"
    assert "bcas summary" not in est.stdout.str()
    done = run(here, *GOLD, "--bcas-report", "estimated", "-q")
    assert done.ret == 0
    recs = records(here.path / "estimated")
    assert items == len(recs) and unknown == 0 and cost > 0
    # the budgets' bound: no case makes more calls than its structure allows
    assert calls >= sum(int(r["llm_calls"]) for r in recs)
    # Everything is recorded now: nothing left to spend.
    again = run(here, *GOLD, "--bcas-report", "estimated", "--bcas-estimate")
    assert estimate_total(again.stdout.str())[:3] == (0, 0, 0.0)


def test_an_estimate_takes_the_recorded_items_of_its_cases_as_basis(here: pytest.Pytester) -> None:
    """A case's recorded items say where its model stops (calls) and what it spends (tokens, cost):
    the estimate of more items of the same cases prices them at those means, and says so."""
    warm = run(here, *PACED, "--bcas-report", "paced-a", "-q")
    assert warm.ret == 0, warm.stdout.str()[-3000:]
    recs = records(here.path / "paced-a")
    per_item = sum(int(r["llm_calls"]) for r in recs) / len(recs)
    more = run(here, *PACED, "--bcas-report", "paced-a", "--bcas-limit", "10", "--bcas-estimate")
    items, calls, cost, unknown = estimate_total(more.stdout.str())
    assert items > 0
    assert calls == pytest.approx(items * per_item, abs=1) and unknown == 0 and cost > 0
    assert "recorded item(s) of the case" in more.stdout.str()


def test_max_cost_reserves_what_items_in_flight_will_cost(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    """Concurrent items: each admitted item reserves its expected cost, so items in flight
    cannot all be admitted against the same unspent money and overshoot the cap together.

    Admitting item k needs spent + reserved + expected <= cap, and every term is at
    least the cheapest item's cost, so at most floor(cap / cheapest) items start.
    (In-process runs: seconds, where a fresh interpreter per run costs half a minute.)
    """
    monkeypatch.setenv("BCAS_CACHE_DIR", str(project / "cache"))  # the module's retrieval index (no answers cached)
    make_project(pytester.path)
    one_case = [*PACED, "-k", "s1", "--bcas-limit", "8", "--bcas-no-cache", "-p", "no:cacheprovider"]
    pytester.runpytest(*one_case, "--bcas-report", "full").assert_outcomes(passed=1)
    costs = [float(r["cost_usd"]) for r in records(pytester.path / "full")]
    assert len(costs) == 8 and min(costs) > 0
    cap = 2.5 * max(costs)
    assert cap / min(costs) < 7  # room to see an overshoot
    monkeypatch.setenv("BCAS_PACED_DELAY", "0.2")  # the items overlap in flight
    capped = pytester.runpytest(
        *one_case, "--bcas-report", "capped", "--bcas-concurrency", "8", "--bcas-max-cost", f"{cap:.8f}"
    )
    capped.assert_outcomes(skipped=1)  # the case stopped at the cap
    recs = records(pytester.path / "capped")
    assert 2 <= len(recs) <= int(cap / min(costs)), (len(recs), cap, costs)
    assert spend(recs) <= cap + max(costs)
    assert (pytester.path / "capped" / "stops.jsonl").is_file()


def test_an_estimate_of_cases_never_run_builds_no_index_and_counts_their_structure(
    here: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An estimate of cases never run (nothing of them recorded or cached) builds no index and
    counts each item's calls from its case's structure: the planning case, plan + 3 searches + answer."""
    planned = ["--bcas-backend", "paced", "--bcas-grid", "pages", "-k", "hotpotqa and plan", "--bcas-prices",
               "prices.toml", "--bcas-estimate", "--bcas-report", "never-run"]  # fmt: skip
    indexes = here.path / "fresh-indexes"
    monkeypatch.setenv("BCAS_INDEX_DIR", str(indexes))
    est = run(here, *planned)
    assert est.ret == 0, est.stdout.str()[-3000:]
    items, calls, cost, unknown = estimate_total(est.stdout.str())
    assert items == 12 and calls == 12 * 5 and cost > 0 and unknown == 0
    assert "the model's ready_to_answer ends it early (expected: budgets' bound)" in est.stdout.str()
    assert not indexes.exists() or not any(indexes.rglob("*")), "the estimate built an index"


def test_the_judges_spend_counts_toward_the_cap(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    """A run graded by a priced judge: the session's total spend (each item's answer and its
    judge's, read from the records) stops at the cap, not at the cap plus the judge's share.
    The judge here costs more than the answers, so a cap that counted the answers alone would
    let every item run."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(project / "cache"))
    make_project(pytester.path)
    sheet = pytester.path / "prices.toml"  # the judge's calls are recorded under the mock's model id
    sheet.write_text(sheet.read_text().replace('models."mock-gold"]', 'models."mock-gold"]\naliases = ["mock:gold"]'))
    one_case = [*PACED, "-k", "s1", "--bcas-limit", "8", "--bcas-no-cache", "-p", "no:cacheprovider"]
    judged = [*one_case, "--bcas-judge", "mock:gold", "--bcas-concurrency", "1"]
    pytester.runpytest(*judged, "--bcas-report", "full").assert_outcomes(passed=1)
    full = records(pytester.path / "full")
    totals = [float(r["cost_usd"]) + float(r["judge"]["cost_usd"]) for r in full]
    answers = [float(r["cost_usd"]) for r in full]
    assert len(totals) == 8 and min(answers) > 0
    assert sum(totals) - sum(answers) > sum(answers)  # the judge is most of the spend
    cap = 1.05 * sum(answers)
    assert cap < sum(totals) - max(totals)  # answers alone fit; the whole spend does not
    capped = pytester.runpytest(*judged, "--bcas-report", "capped", "--bcas-max-cost", f"{cap:.8f}")
    capped.assert_outcomes(skipped=1)  # the case stopped at the cap
    recs = records(pytester.path / "capped")
    spent = sum(float(r["cost_usd"]) + float(r["judge"]["cost_usd"]) for r in recs)
    assert 2 <= len(recs) < 8 and spent <= cap + max(totals), (len(recs), spent, cap)


def test_a_cases_own_recorded_items_measure_its_speed(here: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cases of one model in one run folder, one paced at 1 s a call, one at none: the
    estimate of more items of the fast case times them by its own calls, not the folder's (its
    range starts under one slow call an item); the slow case's range starts above it."""
    monkeypatch.setenv("BCAS_PACED_DELAY", "1.0")
    slow = run(here, *PACED, "-k", "s1", "--bcas-report", "mixed", "--bcas-limit", "2", "-q")
    assert slow.ret == 0, slow.stdout.str()[-3000:]
    monkeypatch.setenv("BCAS_PACED_DELAY", "0")
    fast = run(here, *PACED, "-k", "s2", "--bcas-report", "mixed", "--bcas-limit", "2", "-q")
    assert fast.ret == 0, fast.stdout.str()[-3000:]
    est = run(here, *PACED, "--bcas-report", "mixed", "--bcas-limit", "4", "--bcas-concurrency", "1", "--bcas-estimate")
    assert est.ret == 0, est.stdout.str()[-3000:]
    walls: dict[str, tuple[float, float]] = {}
    for line in est.stdout.lines:
        found = re.search(r"-bm25/(s[12])/\S*\s+(\d+)\s.*\s([\d.]+) s-([\d.]+) s\s", line)
        if found:
            walls[found.group(1)] = (float(found.group(3)), float(found.group(4)))
            assert found.group(2) == "4", line  # the items left to run: the four the estimate times
    assert set(walls) == {"s1", "s2"}, est.stdout.str()[-3000:]
    # 4 items one at a time, 2 calls each at the least: the slow case's calls take 0.5 s at the
    # least (half the fastest of fewer than 20), so it starts at 4 s; the fast case's at none.  Timed
    # by the folder's calls, the fast case's 3 calls an item would reach 2 s each (twice the slowest):
    # 24 s at the most; by its own, only its harness time (under 3 s an item even on a loaded machine)
    assert walls["s1"][0] >= 3.9 and walls["s2"][0] < 0.05, walls
    assert walls["s2"][1] < 12 < walls["s1"][1], walls
