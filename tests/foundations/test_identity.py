"""Runs you can trust and compare: answer identity, several models per run, grids that
share a configuration, re-judging, epochs and records written by bcas 0.1.0.

Most runs use the ``mock`` backend (instant, deterministic); one runs the real embedded
SmolLM2 beside ``mock:gold`` in one session.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from bcas.identity import answer_key, epoch_seed, gguf_fingerprint, prompt_hash, server_fingerprint
from bcas.records import Record, RecordError, ResultStore, load_records
from bcas.run.settings import parse_model_spec
from bcas.testing.project import budget_grid, grid_project, preload, read_records
from bcas.testing.servers import FaultServer

preload()

pytest_plugins = ["pytester"]

BACKENDS = {"embedded": 1, "openai": 1, "vllm": 1, "mock": 1}

# Two grids sharing one configuration (s2), each with its own reference.
SHARED_CONFTEST = budget_grid("pair_a", ["hotpotqa"], (1, 2), limit=4) + budget_grid(
    "pair_b", ["hotpotqa"], (2, 3), limit=4, reference=1
)

TIMING = ("latency_s", "created_at", "run_id", "timing")


def _answers(run_dir: Path) -> dict[tuple, dict]:
    """Records by answer identity, without timing fields (and per-step timings)."""
    out = {}
    for rec in load_records(run_dir):
        d = rec.to_dict()
        for name in TIMING:
            d.pop(name, None)
        d["extra"] = {k: v for k, v in d["extra"].items() if k not in ("worker", "case_id", "grid", "reference")}
        d["steps"] = [{k: v for k, v in s.items() if k not in ("latency_s", "cached")} for s in d["steps"]]
        out[rec.key] = d
    return out


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(pytester.path)
    return pytester


def _smoke(*extra: str) -> list[str]:
    return ["--bcas-grid", "smoke", "-k", "hotpotqa and bm25 and s1", "-p", "no:cacheprovider", *extra]


# -- model specs and fingerprints ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("embedded:/m/a.gguf", ("embedded", "/m/a.gguf")),
        ("openai:qwen3-8b", ("openai", "qwen3-8b")),
        ("mock:gold", ("mock", "gold")),
        ("embedded", ("embedded", None)),
        ("/m/a.gguf", ("vllm", "/m/a.gguf")),  # a plain value is --bcas-backend's model
        ("Qwen/Qwen3-8B", ("vllm", "Qwen/Qwen3-8B")),
        ("http://host:1/x", ("vllm", "http://host:1/x")),  # "http" is no backend
    ],
)
def test_model_specs(value: str, expected: tuple[str, str | None]) -> None:
    assert parse_model_spec(value, "vllm", BACKENDS) == expected


def test_gguf_fingerprint_is_the_file_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.gguf"
    path.write_bytes(random.Random(3).randbytes(3_000_001))
    expected = "gguf:sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert gguf_fingerprint(path) == expected
    assert gguf_fingerprint(path) == expected  # from the on-disk cache
    path.write_bytes(path.read_bytes()[:-1] + b"\x00")  # other weights, other identity
    assert gguf_fingerprint(path) != expected


def test_served_fingerprint_comes_from_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bcas.llm.fingerprint import model_fingerprint

    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    with FaultServer(model="served-x") as server:
        url = server.base_url
        # Never verified here: the requested name, marked.
        assert model_fingerprint("openai", "served-x", base_url=url, verify=False) == "served:served-x?unverified"
        # A server reporting its id alone (no /props, no system_fingerprint): that id.
        assert model_fingerprint("openai", "served-x", base_url=url) == server_fingerprint("served-x")
        # Not asked (offline replay): the identity last verified for this URL and name.
        assert model_fingerprint("openai", "served-x", base_url=url, verify=False) == server_fingerprint("served-x")


def test_prompt_hash_changes_with_a_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bcas.identity as identity

    before = prompt_hash("bcas")
    fake = tmp_path / "pkg"
    for folder in identity.prompt_dirs("bcas"):
        src = identity.PACKAGE_ROOT / folder
        (fake / folder).mkdir(parents=True)
        for f in src.glob("*.txt"):
            (fake / folder / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(identity, "PACKAGE_ROOT", fake)
    assert prompt_hash("bcas") == before
    (fake / "agent/prompts/system.txt").write_text("another system prompt", encoding="utf-8")
    assert prompt_hash("bcas") != before
    assert prompt_hash("madara") != before


# -- several models in one run ---------------------------------------------------------------


@pytest.mark.proof_stage  # a real-model and a mock session, 29 s on a fresh clone: CI's required proof stage runs it
def test_embedded_and_mock_in_one_session_are_compared_pairwise(project: pytest.Pytester) -> None:
    run_dir = project.path / "run"
    result = project.runpytest(
        *_smoke(
            "--bcas-model", "embedded", "--bcas-model", "mock:gold", "--bcas-limit", "2", "--bcas-report", str(run_dir)
        )
    )
    result.assert_outcomes(passed=2)
    records = load_records(run_dir)
    by_model: dict[str, list[Record]] = {}
    for rec in records:
        by_model.setdefault(rec.model, []).append(rec)
    assert sorted(by_model) == ["mock-gold", "smollm2-135m"]
    assert all(len(v) == 2 for v in by_model.values())
    assert by_model["smollm2-135m"][0].model_fingerprint.startswith("gguf:sha256:")
    assert by_model["mock-gold"][0].model_fingerprint == "mock:gold"
    assert {r.item_id for r in by_model["mock-gold"]} == {r.item_id for r in by_model["smollm2-135m"]}
    summary = json.loads((run_dir / "summary.json").read_text())
    (comp,) = summary["model_comparisons"]
    assert {comp["model"], comp["reference"]} == {"mock-gold", "smollm2-135m"} and comp["n_paired"] == 2
    assert summary["model_matrix"]["panels"][0]["models"] == ["mock-gold", "smollm2-135m"]
    html = (run_dir / "index.html").read_text()
    assert 'id="model-comparisons"' in html and "mock-gold" in html and "smollm2-135m" in html


def test_models_one_after_the_other_equal_one_session(project: pytest.Pytester) -> None:
    together, apart = project.path / "together", project.path / "apart"
    project.runpytest(
        *_smoke(
            "--bcas-model",
            "mock:gold",
            "--bcas-model",
            "mock:random",
            "--bcas-limit",
            "4",
            "--bcas-report",
            str(together),
        )
    ).assert_outcomes(passed=2)
    for model in ("mock:gold", "mock:random"):
        project.runpytest(
            *_smoke("--bcas-model", model, "--bcas-limit", "4", "--bcas-report", str(apart))
        ).assert_outcomes(passed=1)
    a, b = _answers(together), _answers(apart)
    assert len(a) == 8 and a == b
    summary = json.loads((apart / "summary.json").read_text())
    assert len(summary["model_comparisons"]) == 1  # the second run did not skip or replace the first


def test_grids_sharing_a_configuration_keep_both_comparisons(project: pytest.Pytester) -> None:
    project.makeconftest(SHARED_CONFTEST)
    run_dir = project.path / "run"
    args = ["--bcas-model", "mock:random", "--bcas-report", str(run_dir), "-p", "no:cacheprovider"]
    project.runpytest("--bcas-grid", "pair_a", *args).assert_outcomes(passed=2)
    second = project.runpytest("--bcas-grid", "pair_b", *args, "-s")
    second.assert_outcomes(passed=2)
    raw = read_records(run_dir)
    assert sum(r["label"] == "bm25/s2/t2k" for r in raw) == 4  # the shared configuration ran once
    records = load_records(run_dir)
    assert len(records) == 4 * 3  # s1, s2 (once, shared), s3
    summary = json.loads((run_dir / "summary.json").read_text())
    comps = {(c["grid"], c["label"], c["reference"]) for c in summary["comparisons"]}
    assert comps == {("pair_a", "bm25/s2/t2k", "bm25/s1/t2k"), ("pair_b", "bm25/s2/t2k", "bm25/s3/t2k")}
    rows = {(r["grid"], r["label"], r["reference"]) for r in summary["rows"]}
    assert ("pair_a", "bm25/s2/t2k", False) in rows and ("pair_b", "bm25/s2/t2k", False) in rows
    assert ("pair_b", "bm25/s3/t2k", True) in rows


# -- grades ----------------------------------------------------------------------------------


def test_rejudge_changes_grades_and_nothing_else(project: pytest.Pytester) -> None:
    from bcas.rejudge import rejudge

    run_dir = project.path / "run"
    project.runpytest(
        *_smoke(
            "--bcas-model",
            "mock:gold",
            "--bcas-limit",
            "4",
            "--bcas-judge",
            "mock:random",
            "--bcas-report",
            str(run_dir),
        )
    ).assert_outcomes(passed=1)
    before = {r.key: r.to_dict() for r in load_records(run_dir)}
    assert all(len(r["grades"]) == 1 for r in before.values())
    summary = rejudge(run_dir, "mock:gold")
    assert summary.graded == 4 and summary.already == 0
    after = {r.key: r.to_dict() for r in load_records(run_dir)}
    assert after.keys() == before.keys()
    for key, old in before.items():
        new = after[key]
        assert len(new["grades"]) == 2 and set(old["grades"]) < set(new["grades"])
        changed = {k for k in old if old[k] != new[k]}
        assert changed <= {"judge", "judge_verdict", "grades"}, changed
        assert new["judge"]["grade_id"].startswith("mock:gold|prompt:")
    again = rejudge(run_dir, "mock:gold")
    assert again.graded == 0 and again.already == 4


def test_a_new_judge_grades_only_what_it_has_not(project: pytest.Pytester) -> None:
    run_dir = project.path / "run"
    base = _smoke("--bcas-model", "mock:gold", "--bcas-limit", "3", "--bcas-report", str(run_dir))
    project.runpytest(*base).assert_outcomes(passed=1)
    assert all(not r.grades for r in load_records(run_dir))
    project.runpytest(*base, "--bcas-judge", "mock:gold").assert_outcomes(passed=1)
    graded = load_records(run_dir)
    assert all(len(r.grades) == 1 and r.judge_verdict is not None for r in graded)
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    project.runpytest(*base, "--bcas-judge", "mock:gold").assert_outcomes(passed=1)
    assert (run_dir / "records.jsonl").read_text().splitlines() == lines  # nothing re-graded


# -- epochs ----------------------------------------------------------------------------------


def test_epochs_give_n_records_per_item_with_distinct_seeds(project: pytest.Pytester) -> None:
    run_dir = project.path / "run"
    project.runpytest(
        *_smoke(
            "--bcas-model",
            "mock:random",
            "--bcas-limit",
            "3",
            "--bcas-epochs",
            "3",
            "--bcas-seed",
            "5",
            "--bcas-report",
            str(run_dir),
        )
    ).assert_outcomes(passed=1)
    records = load_records(run_dir)
    assert len(records) == 9
    by_item: dict[str, list[Record]] = {}
    for rec in records:
        by_item.setdefault(rec.item_id, []).append(rec)
    for recs in by_item.values():
        assert sorted(r.epoch for r in recs) == [0, 1, 2]
        assert len({r.seed for r in recs}) == 3 and {r.seed for r in recs} == {epoch_seed(5, e) for e in range(3)}
        assert len({r.config_id for r in recs}) == 1
    rows = json.loads((run_dir / "summary.json").read_text())["rows"]
    assert rows[0]["epochs"] == 3 and rows[0]["interval"] == "clustered-t" and rows[0]["n"] == 3


def test_clustered_interval_matches_statsmodels() -> None:
    import numpy as np
    import statsmodels.api as sm
    from scipy.stats import t

    from bcas.report.summary import summarize

    rng = random.Random(11)
    for trial in range(5):
        n_items, epochs = rng.randint(4, 30), rng.randint(2, 5)
        recs, y, groups = [], [], []
        for i in range(n_items):
            p = rng.random()
            for e in range(epochs):
                ok = rng.random() < p
                recs.append(
                    {
                        "item_id": f"q{i}",
                        "epoch": e,
                        "correct_em": ok,
                        "model": "m",
                        "dataset": "d",
                        "label": "c",
                        "config_id": "c",
                        "extra": {"grid": "g"},
                        "cost_usd": 0.0,
                    }
                )
                y.append(float(ok))
                groups.append(i)
        (row,) = summarize(recs)
        fit = sm.OLS(np.array(y), np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": np.array(groups)})
        se = float(fit.bse[0])
        half = float(t.ppf(0.975, n_items - 1)) * se
        assert row.accuracy == pytest.approx(float(fit.params[0]))
        assert row.ci_lo == pytest.approx(max(0.0, row.accuracy - half), abs=1e-12), trial
        assert row.ci_hi == pytest.approx(min(1.0, row.accuracy + half), abs=1e-12), trial


def test_paired_epochs_use_a_paired_t_test_on_item_means() -> None:
    from scipy.stats import ttest_rel

    from bcas.report.paired import paired

    rng = random.Random(2)
    a = {f"q{i}": rng.choice([0, 1 / 3, 2 / 3, 1]) for i in range(12)}
    b = {f"q{i}": rng.choice([0, 1 / 3, 2 / 3, 1]) for i in range(12)}
    res = paired(a, b, binary=False)
    keys = sorted(a)
    expected = ttest_rel([a[k] for k in keys], [b[k] for k in keys])
    assert res.test == "paired-t" and res.p_value == pytest.approx(float(expected.pvalue))
    assert res.diff == pytest.approx(sum(a[k] - b[k] for k in keys) / 12)


# -- records of bcas 0.1.0 -------------------------------------------------------------------


def _v1_line() -> str:
    rec = {
        "run_id": "r",
        "config_id": "c",
        "model": "smollm2-135m",
        "dataset": "hotpotqa",
        "dataset_hash": "h",
        "item_id": "q1",
        "question": "?",
        "answers": ["a"],
        "prediction": "a",
        "correct_em": True,
        "f1": 1.0,
        "schema_version": 1,
    }
    return json.dumps(rec) + "\n"


def test_v1_records_are_upgraded_on_read_and_never_mixed(tmp_path: Path, project: pytest.Pytester) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "records.jsonl").write_text(_v1_line())
    (rec,) = load_records(old)
    assert rec.legacy and rec.model_fingerprint == "legacy:smollm2-135m" and rec.extra["upgraded_from_schema"] == 1
    assert answer_key(rec.to_dict())[0] == "legacy:smollm2-135m"
    with pytest.raises(RecordError, match="written by bcas 0.1.0"):
        ResultStore(old).check_writable()
    result = project.runpytest(*_smoke("--bcas-model", "mock:gold", "--bcas-limit", "2", "--bcas-report", str(old)))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "written by bcas 0.1.0" in result.stderr.str()
    assert (old / "records.jsonl").read_text() == _v1_line()  # untouched


def test_the_run_seed_reaches_every_madara_call() -> None:
    """A MADARA item under seed 7 sends seed 7 on every assessment and generation call."""
    import asyncio

    from bcas.assess import run_madara
    from bcas.config import AssessConfig, RunConfig
    from bcas.data import load_dataset
    from bcas.testing.mock import MockModel
    from bcas.testing.recording import RecordingModel

    item = load_dataset("conflictqa", limit=1).items[0]
    for method in ("sda", "pde", "cot"):
        model = RecordingModel(MockModel("random"))
        config = RunConfig(assess=AssessConfig(method=method, doc_source="item"), seed=7)
        asyncio.run(run_madara(item, model, None, config))
        seeds = [r.seed for r in model.requests]
        assert seeds and set(seeds) == {7}, method
