"""Every artifact names what was served beside what was asked for (issue 36, item 1).

llama.cpp's server answers any model name with the one GGUF it loaded: a run asking for
``Qwen/Qwen3-8B`` from a server of SmolLM2 gets SmolLM2's answers.  The name of what
answered (the GGUF's file name from ``/props``, vLLM's ``root``, the listed id) is read by
the preflight and shown in the case ids (when it is another model), the summary (JSON
and the terminal lines), ``run.json`` and the HTML report.  The loopback tests use the
scriptable ``FaultServer``; the ``server`` test runs the documented recipe on a real
llama.cpp server of the shipped GGUF.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bcas.grids import get_grid
from bcas.identity import name_stem, same_model
from bcas.llm.served import facts_from, model_entry
from bcas.records.manifest import served_by_fingerprint
from bcas.report.summary import served_beside
from bcas.run.plan import Plan
from bcas.run.served import differs, served_name, served_names
from bcas.run.settings import Case, ModelSpec
from bcas.testing.instant import canned_reply
from bcas.testing.project import budget_grid, preload
from bcas.testing.servers import FaultServer

preload()

pytest_plugins = ["pytester"]

GGUF = "SmolLM2-135M-Instruct-Q4_1.gguf"
QWEN = ModelSpec("openai", "Qwen/Qwen3-8B", "http://127.0.0.1:9/v1")


def test_the_served_name_is_the_ggufs_file_then_root_then_the_listed_id() -> None:
    llama = facts_from({"id": "smollm2"}, {"model_path": f"/models/{GGUF}"})
    assert llama.name("Qwen/Qwen3-8B") == GGUF  # the alias and the requested name say nothing
    vllm = facts_from({"id": "qwen", "root": "/data/hf/Qwen3-8B"}, None)
    assert vllm.name("qwen") == "/data/hf/Qwen3-8B"
    listed = facts_from(model_entry({"data": [{"id": f"/m/{GGUF}"}]}, "Qwen/Qwen3-8B", "Qwen/Qwen3-8B"), None)
    assert listed.name("Qwen/Qwen3-8B") == GGUF  # llama.cpp without /props: its one listed entry
    assert facts_from({}, None).name("gpt-4o-2024-08-06") == "gpt-4o-2024-08-06"  # a hosted API: its answer's id
    # The listed id is a name, not an identity: the fingerprint's facts are unchanged by it.
    assert listed.identity() == {} and facts_from({"id": "x"}, None) == facts_from({"id": "y"}, None)


@pytest.mark.parametrize(
    ("requested", "served", "same"),
    [
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B", True),
        ("Qwen/Qwen3-8B", "Qwen3-8B-Q4_K_M.gguf", True),  # a quantisation of the requested model
        ("smollm2-135m", GGUF, True),
        ("Qwen/Qwen3-8B", GGUF, False),
        ("Qwen/Qwen3-8B", "Qwen3-8Bx.gguf", False),  # a longer name is not a variant
        ("srv", GGUF, False),
    ],
)
def test_same_model_by_name(requested: str, served: str, same: bool) -> None:
    assert same_model(requested, served) is same
    assert (served_beside(name_stem(requested), served) == name_stem(requested)) is same


def test_what_each_backend_serves() -> None:
    preflight = [{"base_url": QWEN.base_url, "model": QWEN.model, "served_name": GGUF}]
    assert served_name(QWEN, preflight) == GGUF
    assert served_name(QWEN, []) is None  # --bcas-no-preflight: nothing was asked, nothing is claimed
    assert served_name(ModelSpec("embedded", "/x/Other-1B.Q8_0.gguf"), []) == "Other-1B.Q8_0.gguf"
    from bcas.llm.embedded import default_gguf_path

    assert served_name(ModelSpec("embedded", None), []) == default_gguf_path().name  # the shipped GGUF
    assert served_name(ModelSpec("mock", "gold"), []) == "mock-gold"  # a test double: its label, nothing beside it
    assert served_beside("mock-gold", "mock-gold") == "mock-gold"
    assert served_name(ModelSpec("vllm", "/ckpt/Qwen3-8B"), []) == "Qwen3-8B"
    assert served_beside("qwen [served:Qwen/Qwen3-8B#]", GGUF) == f"qwen [served:Qwen/Qwen3-8B#] (served: {GGUF})"
    assert differs(QWEN, GGUF) and not differs(QWEN, "Qwen3-8B-Q4_K_M.gguf") and not differs(QWEN, None)
    assert served_names([QWEN, ModelSpec("mock", "gold")], preflight) == {"qwen3-8b": GGUF}


def test_case_ids_name_what_was_served_only_when_it_is_another_model() -> None:
    entry = get_grid("smoke").entries[0]
    qwen, mock = Case(QWEN, "hotpotqa", "smoke", entry), Case(ModelSpec("mock", "gold"), "hotpotqa", "smoke", entry)
    plan = Plan(settings=None, cases=(qwen, mock))  # type: ignore[arg-type]
    served = plan.with_served({"qwen3-8b": GGUF})
    assert served.cases[0].id == f"qwen3-8b~smollm2-135m-instruct-q4_1-hotpotqa-{entry.label}"
    assert served.cases[1].id == mock.id == f"mock-gold-hotpotqa-{entry.label}"  # nothing else served: as before
    assert served.cases == plan.cases  # the same cases (the served name is shown, not an identity)
    assert plan.with_served({}) is plan


def test_run_json_names_what_each_fingerprint_served() -> None:
    manifest = {
        "sessions": [
            {"models": {"qwen3-8b": {"fingerprint": "served:a@1", "served": "Old.gguf"}}},
            {"models": {"qwen3-8b": {"fingerprint": "served:a@2", "served": GGUF}, "m": {"fingerprint": "mock:x"}}},
        ]
    }
    assert served_by_fingerprint(manifest) == {"served:a@1": "Old.gguf", "served:a@2": GGUF}
    assert served_by_fingerprint(None) == {}


# -- whole runs -------------------------------------------------------------------------------


def _run(one_search_project: pytest.Pytester, url: str, run_dir: Path, model: str, *more: str) -> pytest.RunResult:
    return one_search_project.runpytest(
        "--bcas-backend", "openai", "--bcas-base-url", url, "--bcas-model", model, "--bcas-grid", "tiny",
        "--bcas-report", str(run_dir), "-p", "no:cacheprovider", "-v", *more,
    )  # fmt: skip


def _assert_named_everywhere(result: pytest.RunResult, run_dir: Path, served: str) -> None:
    """The served name beside ``qwen3-8b`` in the case id, the terminal summary, summary.json, run.json, the report."""
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert f"[qwen3-8b~{name_stem(served)}-tiny-" in out  # the case id
    summary_line = next(line for line in out.splitlines() if line.startswith("tiny "))
    assert f"qwen3-8b (served: {served})" in summary_line, summary_line
    (row,) = json.loads((run_dir / "summary.json").read_text())["rows"]
    assert row["model"] == "qwen3-8b" and row["served"] == served
    session = json.loads((run_dir / "run.json").read_text())["sessions"][-1]
    assert session["models"]["qwen3-8b"]["served"] == served
    html = (run_dir / "index.html").read_text()
    assert f"qwen3-8b (served: {served})" in html and f"served: {served} ·" in html


def test_a_server_of_another_model_is_named_in_every_artifact(one_search_project: pytest.Pytester) -> None:
    with FaultServer(model=f"/models/{GGUF}", reply=canned_reply) as server:  # lists its GGUF, answers any name
        run_dir = one_search_project.path / "run"
        _assert_named_everywhere(_run(one_search_project, server.base_url, run_dir, "Qwen/Qwen3-8B"), run_dir, GGUF)
        # Asked for by its own name, nothing is added: ids as they always were.
        same = _run(one_search_project, server.base_url, one_search_project.path / "same", "SmolLM2-135M-Instruct-Q4_1")
        same.assert_outcomes(passed=1)
        assert "~" not in same.stdout.str() and "(served:" not in same.stdout.str()
        assert json.loads((one_search_project.path / "same" / "summary.json").read_text())["rows"][0]["served"] == GGUF


def test_xdist_workers_collect_the_controllers_ids(one_search_project: pytest.Pytester) -> None:
    """The controller's preflight reads what is served; its workers must collect the same ids."""
    with FaultServer(model=f"/models/{GGUF}", reply=canned_reply) as server:
        run_dir = one_search_project.path / "run"
        result = _run(one_search_project, server.base_url, run_dir, "Qwen/Qwen3-8B", "-n", "1")
        _assert_named_everywhere(result, run_dir, GGUF)


@pytest.mark.server
def test_the_documented_llama_cpp_recipe_names_its_gguf(
    one_search_project: pytest.Pytester, smollm2_gguf: Path
) -> None:
    """A real llama.cpp server of the shipped GGUF, asked for Qwen/Qwen3-8B as the docs' recipe does."""
    from bcas.testing.servers import LlamaCppServer

    with LlamaCppServer(smollm2_gguf, alias="smollm2", n_ctx=2048) as server:
        run_dir = one_search_project.path / "run"
        result = _run(one_search_project, server.base_url, run_dir, "Qwen/Qwen3-8B")
    _assert_named_everywhere(result, run_dir, smollm2_gguf.name)
    warning = next(line for line in result.outlines + result.errlines if "answered for it anyway" in line)
    assert f"the model it serves, {smollm2_gguf.name}" in warning  # and the start-up warning names it too


def test_the_api_names_what_was_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bcas.evaluate`` reads the same names: its case lines, summary rows and run.json carry them."""
    import bcas

    exec(budget_grid("tiny_api", ["hotpotqa"], (1,), limit=1), {})  # the registration a conftest would run
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    with FaultServer(model=f"/models/{GGUF}", reply=canned_reply) as server:
        res = bcas.evaluate(
            grids="tiny_api",
            models="openai:Qwen/Qwen3-8B",
            base_url=server.base_url,
            out=tmp_path / "run",
            progress=True,
        )
    assert f"qwen3-8b~{name_stem(GGUF)}-hotpotqa-" in capsys.readouterr().out
    assert [row.served for row in res.summary] == [GGUF]
    session = json.loads((tmp_path / "run" / "run.json").read_text())["sessions"][-1]
    assert session["models"]["qwen3-8b"]["served"] == GGUF
