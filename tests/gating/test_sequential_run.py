"""The sequential gate on real runs of test doubles: mock:gold as the baseline, a double wrong on
a known share of items (bcas.testing.wrong_share) as the current run.  What the user sees: the
case stops before N, the verdict says after how many items and why, everywhere it is shown; and a
run killed with SIGKILL mid-gate resumes to the same verdict at the same item."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ITEMS = 80

SCRIPT = """
import json, sys
from pathlib import Path
from bcas.llm import register_backend
from bcas.testing.project import budget_grid, codename_items
register_backend("wrong_share", "bcas.testing.wrong_share:create")
items = Path(sys.argv[1])
if not items.exists():
    items.write_text("".join(json.dumps(r) + "\\n" for r in codename_items(int(sys.argv[2]))))
exec(budget_grid("seqgate", [str(items)], (1,)))
import bcas
model, out, baseline = sys.argv[3], sys.argv[4], sys.argv[5]
options = dict(baseline=baseline, gate_sequential=True, gate_new_model=True) if baseline != "-" else {}
if len(sys.argv) > 6:
    options["max_drop"] = float(sys.argv[6])
r = bcas.evaluate("seqgate", model, limit=int(sys.argv[2]), out=out, no_cache=True, concurrency=2, **options)
if r.gate is not None:
    print(json.dumps([{"case": row.case_id, "verdict": row.verdict, "how": row.how, "used": row.items_used}
                      for row in r.gate.rows]))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _run(tmp: Path, model: str, out: Path, baseline: Path | None, *extra: str) -> subprocess.CompletedProcess[str]:
    script = tmp / "run_gate.py"
    script.write_text(SCRIPT, encoding="utf-8")
    argv = [sys.executable, str(script), str(tmp / "items.jsonl"), str(ITEMS), model, str(out)]
    argv += [str(baseline) if baseline else "-", *extra]
    return subprocess.run(argv, cwd=tmp, env=_env(), capture_output=True, text=True, timeout=600)


def _rows(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _records(run: Path) -> int:
    return sum(1 for line in (run / "records.jsonl").read_text().splitlines() if line.strip())


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("seqgate")
    done = _run(tmp, "mock:gold", tmp / "base", None)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "base"


@pytest.fixture(scope="module")
def wrong40(baseline: Path) -> tuple[Path, dict[str, object]]:
    run = baseline.parent / "wrong40"
    (row,) = _rows(_run(baseline.parent, "wrong_share:40", run, baseline))
    return run, row


def test_a_regression_stops_the_case_early_and_the_verdict_says_how(wrong40: tuple[Path, dict[str, object]]) -> None:
    run, row = wrong40
    used = int(str(row["used"]))
    assert row["verdict"] == "FAIL" and used < ITEMS
    assert str(row["how"]).startswith(f"stopped after {used} of {ITEMS} items: regression shown (e = ")
    assert _records(run) < ITEMS  # the remaining items were never run
    report = json.loads((run / "gate-report.json").read_text())
    assert report["rows"][0]["how"] == row["how"] and report["rows"][0]["case_status"] == "passed"
    assert f"stopped after {used} of {ITEMS} items" in (run / "index.html").read_text()


@pytest.mark.slow  # a new MLflow SQLite store runs its schema migrations (about 20 s on 2 busy cores)
def test_mlflow_gets_the_verdict_and_how_it_was_reached(
    wrong40: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from bcas.tracking.mlflow_sink import MlflowSink

    run, row = wrong40
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    MlflowSink(uri, "bcas-seq").publish(run)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("bcas-seq")
    runs = client.search_runs([experiment.experiment_id])
    (child,) = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert child.data.tags["bcas.gate"] == "FAIL" and child.data.tags["bcas.gate_how"] == row["how"]
    assert child.data.tags["bcas.gate_items_used"] == str(row["used"])
    assert parent.data.tags["bcas.gate"].startswith("FAIL")


def test_a_run_within_the_tolerance_passes_early(baseline: Path) -> None:
    tmp = baseline.parent
    (row,) = _rows(_run(tmp, "mock:gold", tmp / "same", baseline, "10"))
    assert row["verdict"] == "pass"
    assert str(row["how"]).startswith(f"passed after {row['used']} of {ITEMS} items: drop <= 10 pts shown")
    assert int(str(row["used"])) < ITEMS and _records(tmp / "same") < ITEMS


@pytest.mark.proof_stage  # three runs, one killed: about half a minute on a loaded machine
def test_sigkill_mid_gate_then_resume_reaches_the_same_verdict_at_the_same_item(baseline: Path) -> None:
    tmp = baseline.parent
    reference = _rows(_run(tmp, "wrong_share:25@0.02", tmp / "reference", baseline))
    script = tmp / "run_gate.py"
    run = tmp / "killed"
    argv = [sys.executable, str(script), str(tmp / "items.jsonl"), str(ITEMS), "wrong_share:25@0.02", str(run)]
    proc = subprocess.Popen([*argv, str(baseline)], cwd=tmp, env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 300
    try:
        while not (run / "records.jsonl").exists() or _records(run) < 4:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no records within 5 minutes"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    killed_at = _records(run)
    assert killed_at < int(str(reference[0]["used"]))  # killed before the reference decided
    resumed = _rows(_run(tmp, "wrong_share:25@0.02", run, baseline))
    assert resumed == reference


def _plan(share: float | None = None):  # type: ignore[no-untyped-def]
    from bcas.gating import GateOptions, GatePlan
    from bcas.gating.plan import CasePlan

    base = {f"q{i}": True for i in range(40)}
    cp = CasePlan("c1", "smoke", "correct_em", "k", n_paired=40, family="session", family_size=1, threshold=0.05)
    options = GateOptions.parse(sequential=True, fallback_share=share)
    return GatePlan("base", options, {"c1": cp}, {"c1": base}, 0), cp, base


@pytest.mark.parametrize(
    ("share", "stops", "level"),
    [
        (None, 6, "the exact boundary at 0.05 x 0.8 over 40 items"),
        (0.5, 6, "the exact boundary at 0.05 x 0.5 over 40 items"),
    ],
)
def test_the_verdict_reaches_the_terminal_table_and_the_junit_properties(
    share: float | None, stops: int, level: str
) -> None:
    """The terminal summary and the JUnit XML properties carry how a sequential verdict was reached;
    nine straight losses stop the case after six (e = 28.7; over 40 items the exact boundary is
    16.2 at the default share 0.2, 25.0 with ``--bcas-gate-fallback-share 0.5``)."""
    from bcas.gating.report import build_report, junit_properties
    from bcas.gating.sequential import sequence_order, sequential_result

    plan, cp, base = _plan(share)
    wrong = set(sequence_order(base, 0, "c1")[:9])
    records = [{"item_id": i, "correct_em": i not in wrong} for i in base]
    result = sequential_result(plan, "c1", records)
    assert result is not None and result.failed_now and result.stopped_at == stops
    how = f"stopped after {stops} of 40 items: regression shown (e = "
    assert result.how.startswith(how) and result.how.endswith(f" = {level})")
    assert any(line.startswith("c1: sequential gate: " + how) for line in build_report(plan, [result]).lines())
    props = dict(junit_properties(result, cp))
    assert props["bcas_gate"] == "FAIL" and props["bcas_gate_sequential"].startswith(how)
    assert props["bcas_gate_items_used"] == str(stops)
    from bcas.gating.sequential import thresholds

    fail_at = thresholds(0.05, 1, plan.options.fallback_share, 40)[0]
    assert float(props["bcas_gate_e_value"]) >= fail_at and f"threshold {fail_at:.4g} = {level})" in result.how


@pytest.mark.parametrize(
    ("share", "lost", "failed", "verdict"),
    [
        (
            0.9,
            6,
            True,
            "the fixed-n verdict applies at alpha x 0.9: one-sided exact McNemar p = 0.01562 <= 0.045: FAIL",
        ),
        (0.5, 4, False, "the fixed-n verdict applies at alpha x 0.5: one-sided exact McNemar p = 0.0625 > 0.025: pass"),
        (
            None,
            5,
            False,
            "the fixed-n verdict applies at alpha x 0.2: one-sided exact McNemar p = 0.03125 > 0.01: pass",
        ),
        (0.0, 4, False, "no fixed-n test at N (fallback share 0): pass"),
    ],
)
def test_undecided_at_n_the_fixed_n_verdict_applies_at_the_share_of_alpha_and_says_so(
    share: float | None, lost: int, failed: bool, verdict: str
) -> None:
    """``lost`` of 40 items lost, none won, spread over the sequence: the e-process stays below its
    threshold (KT mixture: 8.6, 15.6, 28.7 after 4, 5, 6 losses; the exact boundaries over 40 items
    11.6, 16.2, 25.0, 103.5 for shares 0, 0.2, 0.5, 0.9), so at N the exact McNemar test
    (p = 2^-lost) decides at alpha x share, and the case's p-value is min(1, tail(e) / (1 - share),
    p / share), tail(e) the exact chance of reaching e within 40 items."""
    from bcas.gating.sequential import sequence_order, sequential_result

    plan, _, base = _plan(share)
    s = plan.options.fallback_share
    order = sequence_order(base, 0, "c1")
    wrong = set(order[:: 40 // lost][:lost])  # spread over the sequence
    result = sequential_result(plan, "c1", [{"item_id": i, "correct_em": i not in wrong} for i in base])
    assert result is not None and result.sequential == "undecided" and result.stopped_at == 40
    from bcas.gating.sequential import _exact_tail, thresholds

    assert result.e_value is not None and result.e_value < thresholds(0.05, 1, s, 40)[0]
    expected = min(1.0, _exact_tail(40, result.e_value) / (1 - s), 2.0**-lost / s if s > 0 else 1.0)
    assert result.failed_now is failed and result.p_value == pytest.approx(expected)
    assert result.how.startswith("undecided after 40 of 40 items (e = ") and result.how.endswith(verdict)


def test_the_share_travels_with_the_plan_so_a_resumed_or_xdist_read_decides_alike() -> None:
    """The plan written beside the records (read back by the xdist controller and the report) keeps
    the share; the case's decision from the read-back plan is the one the session took."""
    import tempfile

    from bcas.gating.plan import load_plan
    from bcas.gating.sequential import case_decision, sequence_order

    for share in (0.0, 0.35, 0.5):
        plan, _, base = _plan(share)
        wrong = set(sequence_order(base, 0, "c1")[:7])
        records = [{"item_id": i, "correct_em": i not in wrong} for i in base]
        with tempfile.TemporaryDirectory() as tmp:
            plan.save(Path(tmp), "tok")
            back = load_plan(Path(tmp), "tok")
        assert back is not None and back.options.fallback_share == share
        back.items = plan.items
        assert case_decision(back, "c1", records) == case_decision(plan, "c1", records)
        assert case_decision(back, "c1", records).share == share
        assert f"at alpha x {share:g})" in back.options.test
