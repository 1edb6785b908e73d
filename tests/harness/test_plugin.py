"""The pytest plugin end to end, with pytester: options, grids, markers, resume, gate, xdist.

The model is the instant test double (bcas/testing/instant.py): these tests check
the suite's control flow; retrieval over the small dataset is the real BM25 index.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bcas.testing.project import backends, budget_grid, codename_items, grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

INSTANT = backends({"instant": "bcas.testing.instant:create"})


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    conftest = INSTANT + budget_grid("tiny", [pytester.path / "tiny.jsonl"])
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(10)})
    return pytester


# The instant model's answer comes from the environment, which the generation cache
# cannot see, so these runs go uncached.
BASE = ["--bcas-backend", "instant", "--bcas-grid", "tiny", "--bcas-no-cache", "-p", "no:cacheprovider"]


def test_help_documents_every_option(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--help")
    out = result.stdout.str()
    for name in (
        "model",
        "backend",
        "base-url",
        "datasets",
        "grid",
        "limit",
        "seed",
        "concurrency",
        "judge",
        "prices",
        "baseline",
        "report",
    ):
        assert f"--bcas-{name}" in out, name


def test_grid_expansion_ids_and_markers(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*BASE, "--collect-only", "-q")
    out = result.stdout.str()
    assert "test_case[instant-tiny-bm25/s1/t2k]" in out
    assert "test_case[instant-tiny-bm25/s2/t2k]" in out
    result = suite.runpytest(*BASE, "--collect-only", "-q", "-m", "tiny and kind_bcas", "-k", "s2")
    out = result.stdout.str()
    assert "s2/t2k" in out and "s1/t2k" not in out


def test_ini_options_are_read(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nbcas_backend = instant\nbcas_grid = tiny\nbcas_limit = 3\n")
    result = suite.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    assert "instant-tiny-bm25/s1/t2k" in result.stdout.str()


def test_bad_option_is_a_usage_error(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*BASE[:2], "--bcas-grid", "nonesuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown grid" in result.stderr.str()


def test_run_records_report_and_resume(suite: pytest.Pytester) -> None:
    run_dir = suite.path / "out"
    result = suite.runpytest(*BASE, "--bcas-report", str(run_dir))
    result.assert_outcomes(passed=2)
    recs = read_records(run_dir)
    assert len(recs) == 20
    assert len({(r["config_id"], r["item_id"]) for r in recs}) == 20
    assert all(r["correct_em"] for r in recs)
    assert (run_dir / "index.html").is_file() and (run_dir / "summary.csv").is_file()
    assert "bcas summary" in result.stdout.str()

    # Drop three records (as if killed before writing them): the rerun runs exactly those.
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    (run_dir / "records.jsonl").write_text("\n".join(lines[:-3]) + "\n")
    result = suite.runpytest(*BASE, "--bcas-report", str(run_dir), "-s")
    result.assert_outcomes(passed=2)
    recs = read_records(run_dir)
    assert len(recs) == 20 and len({(r["config_id"], r["item_id"]) for r in recs}) == 20
    assert "already recorded" in result.stdout.str()


def test_baseline_gate_fails_on_regression_and_passes_on_equal(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_dir = suite.path / "base"
    suite.runpytest(*BASE, "--bcas-report", str(base_dir)).assert_outcomes(passed=2)
    baseline = suite.path / "baseline.json"
    from bcas.cli import main as bcas_main

    assert bcas_main(["gate", "write", str(base_dir), str(baseline)]) == 0

    same = suite.runpytest(*BASE, "--bcas-report", str(suite.path / "same"), "--bcas-baseline", str(baseline))
    same.assert_outcomes(passed=2)

    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")
    worse = suite.runpytest(*BASE, "--bcas-report", str(suite.path / "worse"), "--bcas-baseline", str(baseline))
    worse.assert_outcomes(failed=2)
    out = worse.stdout.str()
    assert "regression gate" in out and "McNemar" in out and "baseline 1.000" in out


def test_min_accuracy_floor(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")
    result = suite.runpytest(*BASE, "--bcas-report", str(suite.path / "floor"), "--bcas-min-accuracy", "0.5")
    result.assert_outcomes(failed=2)
    assert "below the floor" in result.stdout.str()


def test_min_accuracy_floor_uses_the_grids_primary_metric(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "Alpha." is right in SQuAD EM (punctuation dropped) and wrong in strict EM: the floor
    follows the grid's declared primary metric, not SQuAD EM."""
    grid = budget_grid("tiny", [suite.path / "tiny.jsonl"]).replace(
        "limit=None)", "limit=None, primary_metric='strict_em')"
    )
    (suite.path / "conftest.py").write_text(INSTANT + grid.replace("'tiny'", "'tiny_strict'"))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "Alpha.")
    args = ["--bcas-backend", "instant", "--bcas-grid", "tiny_strict", "--bcas-no-cache", "-p", "no:cacheprovider"]
    result = suite.runpytest(*args, "--bcas-report", str(suite.path / "strict"), "--bcas-min-accuracy", "0.5")
    result.assert_outcomes(failed=2)
    assert "strict_em accuracy 0.000 over 10 items is below the floor 0.500" in result.stdout.str()
    records = read_records(suite.path / "strict")
    assert len(records) == 20 and all(r["correct_em"] for r in records)  # SQuAD EM would have passed


def test_xdist_merges_records_exactly_once(suite: pytest.Pytester) -> None:
    run_dir = suite.path / "xd"
    result = suite.runpytest_subprocess(*BASE, "--bcas-report", str(run_dir), "-n", "2")
    result.assert_outcomes(passed=2)
    recs = read_records(run_dir)
    assert len(recs) == 20
    assert len({(r["config_id"], r["item_id"]) for r in recs}) == 20
    assert not list(run_dir.glob("records.*.jsonl")) or all(
        p.stat().st_size == 0 for p in run_dir.glob("records.*.jsonl")
    )


def test_in_process_vllm_with_several_xdist_workers_is_refused(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--bcas-backend", "vllm", "--bcas-grid", "tiny", "-n", "2", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--bcas-backend openai" in result.stderr.str()


def test_malformed_dataset_is_a_usage_error_naming_file_and_line(suite: pytest.Pytester) -> None:
    bad = suite.path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q", "answers": [], "documents": [{"id": "d", "text": "t"}]}\n')
    result = suite.runpytest(*BASE, "--bcas-datasets", str(bad), "--bcas-report", str(suite.path / "bad"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{bad}:1" in result.stderr.str() and "answers" in result.stderr.str()
    assert not (suite.path / "bad" / "records.jsonl").exists()
