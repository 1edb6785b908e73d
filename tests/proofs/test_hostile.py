"""Proof: hostile input through the pytest entry point fails cleanly or stays secret.

* Each malformed dataset case of the data schema, given as ``--bcas-datasets
  bad.jsonl``, stops the session with a usage error naming file, line and field,
  before any case runs: no traceback, no records.
* An API key given by environment variable (``--bcas-api-key-env``) reaches the
  server in the ``Authorization`` header and nowhere else: not in any file of the
  run directory or the cache, not in the captured output or log lines, also when
  the server rejects it with HTTP 401 and echoes it in its error message.

(The HTML report's escaping of hostile text is proved in tests/report/test_browser.py.)
"""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

import pytest
from support.proofs import write_project

from bcas.testing.instant import canned_reply
from bcas.testing.project import backends, codename_items, preload
from bcas.testing.servers import Fault, FaultServer

preload("bcas.llm.openai_compat")

pytest_plugins = ["pytester"]


def _item(i: int, **changes: object) -> dict[str, object]:
    item: dict[str, object] = codename_items(i + 1)[i]
    item.update(changes)
    return {k: v for k, v in item.items() if v is not None}


def _good_lines(n: int = 2) -> list[bytes]:
    return [json.dumps(_item(i)).encode() for i in range(n)]


# (case id, line 3 of the file, words the error must contain besides "bad.jsonl:3")
_missing_question = {k: v for k, v in _item(2).items() if k != "question"}
_empty_doc = _item(2, documents=[{"id": "q2::0", "title": "T", "text": ""}], supporting=["q2::0"])
MALFORMED: list[tuple[str, bytes, tuple[str, ...]]] = [
    ("invalid-json", b'{"id": "q2", "question": "Why?", "answers": ["x"], ', ("invalid JSON",)),
    ("missing-question", json.dumps(_missing_question).encode(), ("'question'", "missing")),
    ("empty-answers", json.dumps(_item(2, answers=[])).encode(), ("'answers'",)),
    ("no-documents", json.dumps(_item(2, documents=[], supporting=[])).encode(), ("'documents'",)),
    ("empty-document-text", json.dumps(_empty_doc).encode(), ("documents[0]", "text", "empty")),
    ("duplicate-item-id", json.dumps(_item(0)).encode(), ("'id'", "duplicate item id 'q0'", "line 1")),
    ("bad-supporting-id", json.dumps(_item(2, supporting=["q2::9"])).encode(), ("'supporting'", "q2::9")),
    ("non-utf8", json.dumps(_item(2)).encode().replace(b"Which", b"Wh\xff\xfech"), ("not valid UTF-8",)),
]

INSTANT = backends({"instant": "bcas.testing.instant:create"})


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    write_project(pytester.path, INSTANT, grid="hostile", configs=((1, False),), dataset="hotpotqa", limit=2)
    return pytester


@pytest.mark.parametrize(("line3", "words"), [(c[1], c[2]) for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_dataset_is_a_clean_usage_error(
    project: pytest.Pytester, line3: bytes, words: tuple[str, ...]
) -> None:
    bad = project.path / "bad.jsonl"
    bad.write_bytes(b"\n".join([*_good_lines(), line3]) + b"\n")
    run_dir = project.path / "run"
    result = project.runpytest(
        "-p", "no:cacheprovider", "--bcas-backend", "instant", "--bcas-grid", "hostile", "--bcas-no-cache",
        "--bcas-datasets", str(bad), "--bcas-report", str(run_dir),
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    out = result.stdout.str()
    assert f"{bad}:3:" in err, err
    for word in words:
        assert word in err, (word, err)
    assert err.count("\n") <= 3, err  # one error line, not a traceback
    assert "Traceback" not in err + out and "DatasetError" not in err + out
    assert not run_dir.exists() or not list(run_dir.rglob("records*.jsonl"))
    assert "passed" not in out and "failed" not in out  # no case ran


def test_the_same_file_repaired_runs(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The control for the cases above: a well-formed file in the same place runs and records.
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    good = project.path / "bad.jsonl"
    good.write_bytes(b"\n".join(_good_lines(3)) + b"\n")
    run_dir = project.path / "run"
    result = project.runpytest(
        "-p", "no:cacheprovider", "--bcas-backend", "instant", "--bcas-grid", "hostile", "--bcas-no-cache",
        "--bcas-datasets", str(good), "--bcas-report", str(run_dir),
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 2  # the grid's limit


# -- the API key ---------------------------------------------------------------------


def _files_containing(folder: Path, needle: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _key_run(project: pytest.Pytester, server: FaultServer, run_dir: Path, *extra: str) -> pytest.RunResult:
    log_file = run_dir / "run.log"
    run_dir.mkdir(parents=True, exist_ok=True)
    return project.runpytest(*extra,
        "-p", "no:cacheprovider", "-rA", "--showlocals",
        "--log-level=DEBUG", "--log-cli-level=DEBUG", f"--log-file={log_file}", "--log-file-level=DEBUG",
        "--bcas-backend", "openai", "--bcas-base-url", server.base_url, "--bcas-model", "canned",
        "--bcas-api-key-env", "MY_KEY", "--bcas-grid", "hostile", "--bcas-report", str(run_dir),
    )  # fmt: skip


def test_api_key_from_env_appears_in_no_record_log_report_or_error(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-proof-" + secrets.token_hex(16)
    monkeypatch.setenv("MY_KEY", key)
    caplog.set_level(logging.DEBUG)
    needles = (key.encode(), key[len("sk-proof-") :].encode())

    with FaultServer(reply=canned_reply) as server:
        ok_dir = tmp_path / "ok"
        ok = _key_run(project, server, ok_dir)  # cached: the cache is searched too
        ok.assert_outcomes(passed=1)
        headers = [r.headers for r in server.log if r.path.endswith("/chat/completions")]
        # The key was really used: every request carried it, in the header only.
        assert headers and all(h.get("Authorization") == f"Bearer {key}" for h in headers)
        assert all(key not in json.dumps(r.body) for r in server.log)

        # The server rejects the key and, as some servers do, quotes it back.
        server.reset()
        server.script(default=Fault.error(401, message=f"Incorrect API key provided: {key}. Check it."))
        bad_dir = tmp_path / "bad"
        # With the preflight (default) the session stops before any case, naming the variable.
        pre = _key_run(project, server, tmp_path / "pre", "--bcas-no-cache")
        assert pre.ret == pytest.ExitCode.USAGE_ERROR
        assert "HTTP 401" in pre.stderr.str() and "$MY_KEY" in pre.stderr.str()
        assert not (tmp_path / "pre" / "records.jsonl").exists()
        # Without it, every item fails and is recorded with the (redacted) error.
        bad = _key_run(project, server, bad_dir, "--bcas-no-cache", "--bcas-no-preflight")
        bad.assert_outcomes(failed=1)
        assert server.requests >= 2

    bad_records = [json.loads(x) for x in (bad_dir / "records.jsonl").read_text().splitlines()]
    assert bad_records and all(r["stop_reason"] == "error" for r in bad_records)
    assert all("HTTP 401" in r["error"] and "***" in r["error"] for r in bad_records)  # redacted, not dropped
    assert "HTTP 401" in bad.stdout.str()

    for run_dir in (ok_dir, bad_dir):
        assert (run_dir / "records.jsonl").is_file() and (run_dir / "index.html").is_file()
        assert (run_dir / "run.log").stat().st_size > 0
    for needle in needles:
        for folder in (ok_dir, bad_dir, tmp_path / "pre", tmp_path / "cache"):
            assert _files_containing(folder, needle) == [], folder
        for result in (ok, pre, bad):
            assert needle.decode() not in result.stdout.str() + result.stderr.str()
        assert needle.decode() not in caplog.text
