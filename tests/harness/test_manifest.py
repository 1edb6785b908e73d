"""The run manifest run.json: written for a real run, completed at its end, appended per session.

The runs use the ``mock`` backend (instant, deterministic): these tests check what the
manifest records and when, not a model.
"""

from __future__ import annotations

import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path

import pytest

from bcas.report.html_run import manifest_section
from bcas.resources import resource_path
from bcas.run.manifest import MANIFEST_FILE, cpu_features, plain, read_manifest, safe_url, start_session
from bcas.run.options import OPTIONS
from bcas.testing.project import grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

RUN = ["--bcas-grid", "smoke", "-k", "bm25 and s1", "--bcas-limit", "3", "-p", "no:cacheprovider"]
SECRET = "sk-manifest-secret-4711"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_MANIFEST_TEST_KEY", SECRET)
    grid_project(pytester.path)
    return pytester


def test_a_run_writes_a_complete_manifest_without_the_key(project: pytest.Pytester) -> None:
    run_dir = project.path / "run"
    result = project.runpytest(
        "--bcas-model", "mock:gold", "--bcas-report", str(run_dir), "--bcas-api-key-env", "BCAS_MANIFEST_TEST_KEY", *RUN
    )
    result.assert_outcomes(passed=1)
    text = (run_dir / MANIFEST_FILE).read_text()
    assert SECRET not in text and SECRET not in (run_dir / "index.html").read_text()
    manifest = json.loads(text)
    [entry] = manifest["sessions"]
    assert entry["bcas"]["version"] == metadata.version("bcas")
    assert entry["python"] == platform.python_version()
    assert set(entry["packages"]) >= {
        "llama-cpp-python",
        "vllm",
        "torch",
        "transformers",
        "sentence-transformers",
        "bm25s",
        "faiss",
    }
    assert entry["packages"]["bm25s"] == metadata.version("bm25s")
    assert entry["models"]["mock-gold"]["fingerprint"] == "mock:gold"
    recs = read_records(run_dir)
    assert entry["datasets"] == {"hotpotqa": sorted({r["dataset_hash"] for r in recs})}
    assert entry["records_written"] == len(recs) == 3
    assert entry["price_sheet"]["sha256"] == hashlib.sha256(resource_path("prices.toml").read_bytes()).hexdigest()
    assert set(entry["options"]) == {name for name, *_ in OPTIONS}
    assert entry["options"]["api-key-env"] == {"value": "BCAS_MANIFEST_TEST_KEY", "source": "command line"}
    assert entry["options"]["limit"] == {"value": "3", "source": "command line"}  # as given ("all" is allowed)
    assert entry["options"]["judge"] == {"value": "none", "source": "default"}
    assert entry["seed"] == 0 and entry["epochs"] == 1 and entry["judge"] is None
    assert entry["exit_status"] == 0 and entry["started_at"] <= entry["ended_at"]
    assert isinstance(entry["host"]["gpus"], list) and entry["host"]["cpu"]
    assert entry["host"]["cpu_features"] == cpu_features()
    html = (run_dir / "index.html").read_text()
    assert '<h2 id="run">Run</h2>' in html and "mock:gold" in html and entry["session"] in html


def test_cpu_features_are_the_kernel_choosing_flags_of_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx fma amx_tile avx512f\n\nprocessor\t: 1\n")
    assert cpu_features(info) == ["avx", "avx2", "fma", "avx512f", "amx_tile"]  # SIMD_FLAGS order, others left out
    info.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm sve\n")
    assert cpu_features(info) == ["asimd", "sve"]
    assert cpu_features(tmp_path / "absent") == []


def test_sessions_into_one_folder_are_appended_and_a_failing_run_says_so(project: pytest.Pytester) -> None:
    run_dir = project.path / "run"
    project.runpytest("--bcas-model", "mock:random", "--bcas-report", str(run_dir), *RUN).assert_outcomes(passed=1)
    first = read_manifest(run_dir)["sessions"][0]
    # The second session resumes (writes nothing new) and fails the accuracy floor.
    result = project.runpytest(
        "--bcas-model", "mock:random", "--bcas-report", str(run_dir), "--bcas-min-accuracy", "0.9", *RUN
    )
    result.assert_outcomes(failed=1)
    sessions = read_manifest(run_dir)["sessions"]
    assert len(sessions) == 2 and sessions[0] == first
    second = sessions[1]
    assert second["session"] != first["session"]
    assert second["exit_status"] == int(pytest.ExitCode.TESTS_FAILED)
    assert second["records_written"] == 0
    assert second["datasets"] == first["datasets"]  # the resumed case's dataset, from the session
    assert second["options"]["min-accuracy"]["value"] == 0.9
    assert "Earlier sessions into this folder (1)" in (run_dir / "index.html").read_text()


def test_no_manifest_without_a_real_run(project: pytest.Pytester) -> None:
    collect = project.path / "collect"
    project.runpytest("--bcas-model", "mock:gold", "--bcas-report", str(collect), "--collect-only", *RUN)
    assert not (collect / MANIFEST_FILE).exists()
    bad = project.path / "bad"
    result = project.runpytest("--bcas-model", "mock:gold", "--bcas-report", str(bad), "--bcas-grid", "nonesuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (bad / MANIFEST_FILE).exists()
    plain_tests = project.path / "plain"
    project.makepyfile(test_other="def test_nothing_of_bcas():\n    assert 1 + 1 == 2\n")
    result = project.runpytest("test_other.py", "--bcas-report", str(plain_tests), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (plain_tests / MANIFEST_FILE).exists()


def test_urls_and_secret_fields_are_cleaned() -> None:
    assert safe_url("https://user:pw@example.org:8443/v1?api_key=abc") == "https://example.org:8443/v1"
    cleaned = plain(
        {
            "base_url": "http://u:p@h/v1?key=x",
            "api_key": "abc",
            "api_key_env": "MY_KEY",
            "nested": [{"token": "t0k"}],
            "seed": 3,
            "path": Path("/x"),
        }
    )
    assert cleaned == {
        "base_url": "http://h/v1",
        "api_key": "<withheld>",
        "api_key_env": "MY_KEY",
        "nested": [{"token": "<withheld>"}],
        "seed": 3,
        "path": "/x",
    }


def test_damaged_manifest_is_kept_aside_and_a_new_one_started(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_FILE).write_text("{not json")
    start_session(tmp_path, {"session": "s1", "started_at": "2024-01-01T00:00:00+00:00"})
    assert [s["session"] for s in read_manifest(tmp_path)["sessions"]] == ["s1"]
    [aside] = tmp_path.glob(f"{MANIFEST_FILE}.damaged-*")
    assert aside.read_text() == "{not json"


def test_report_section_escapes_manifest_text() -> None:
    hostile = "<img src=x onerror=alert(1)>"
    html = manifest_section(
        {
            "sessions": [
                {
                    "session": "s",
                    "models": {hostile: {"backend": "mock", "model": hostile, "fingerprint": hostile}},
                    "options": {"grid": {"value": hostile, "source": "ini"}},
                }
            ]
        }
    )
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
