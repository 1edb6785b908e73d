"""A served model is what the server serves (issue 23, items 4, 5 and 7).

Readings of real server replies (llama.cpp's ``/props``, vLLM's ``/v1/models``) into an
identity and a context window; a "context exceeded" reply as its own error; the
generation cache keyed on the identity.  The loopback tests use the scriptable
``FaultServer``; the ``server`` tests run real llama.cpp servers: one GGUF, then another
file behind the same name (other fingerprint, no cached answer reused, every answer of
a rerun from the cache, a dead server stopping even an all-cached run), and an
embedded model with a served judge that is loaded from, and fingerprinted by, one URL.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from bcas.identity import server_fingerprint
from bcas.llm import ContextWindowError, backend_meta, load_model
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.llm.served import facts_from, model_entry, read_server_facts, server_root
from bcas.testing.project import preload, read_records
from bcas.testing.servers import Fault, FaultServer

preload()

pytest_plugins = ["pytester"]

# Shapes of real replies: llama.cpp's server (b5xxx) /props and /v1/models, vLLM 0.8 /v1/models.
LLAMA_PROPS = {
    "default_generation_settings": {"n_ctx": 4096, "params": {"temperature": 0.8}},
    "total_slots": 1,
    "model_path": "/models/Qwen3-8B-Q4_K_M.gguf",
    "chat_template": "{% for message in messages %}...{% endfor %}",
    "build_info": "b5200-abcdef",
}
LLAMA_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "/models/Qwen3-8B-Q4_K_M.gguf",
            "object": "model",
            "owned_by": "llamacpp",
            "meta": {
                "vocab_type": 2,
                "n_vocab": 151936,
                "n_ctx_train": 40960,
                "n_params": 8190735360,
                "size": 5027783488,
            },
        }
    ],
}
VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen3-8B",
            "object": "model",
            "owned_by": "vllm",
            "root": "/data/hf/Qwen3-8B",
            "parent": None,
            "max_model_len": 32768,
        }
    ],
}


def test_llama_cpp_props_give_the_path_the_window_and_the_weights() -> None:
    facts = facts_from(model_entry(LLAMA_MODELS, "Qwen/Qwen3-8B", "Qwen/Qwen3-8B"), LLAMA_PROPS)
    assert facts.context_window == 4096  # the context it was started with, not the trained 40960
    identity = facts.identity()
    assert identity["model_path"] == "/models/Qwen3-8B-Q4_K_M.gguf"
    assert identity["meta"]["n_params"] == 8190735360 and identity["meta"]["size"] == 5027783488
    assert "build_info" not in json.dumps(identity)  # the process's build is not the model


def test_vllm_models_entry_gives_root_and_max_model_len() -> None:
    facts = facts_from(model_entry(VLLM_MODELS, "Qwen/Qwen3-8B", "Qwen/Qwen3-8B"), None)
    assert facts.context_window == 32768
    assert facts.identity() == {"root": "/data/hf/Qwen3-8B", "context_window": 32768}


def test_another_file_behind_the_same_name_is_another_fingerprint() -> None:
    first = facts_from({}, LLAMA_PROPS).identity()
    other = facts_from({}, {**LLAMA_PROPS, "model_path": "/models/Qwen3-8B-Q8_0.gguf"}).identity()
    smaller = facts_from({}, {**LLAMA_PROPS, "default_generation_settings": {"n_ctx": 2048}}).identity()
    prints = {server_fingerprint("Qwen/Qwen3-8B", None, f) for f in (first, other, smaller)}
    assert len(prints) == 3
    assert server_fingerprint("Qwen/Qwen3-8B", None, first) == server_fingerprint("Qwen/Qwen3-8B", None, dict(first))
    assert server_fingerprint("m", "fp_1", first).endswith("#fp_1")
    assert server_fingerprint("m") == "served:m"  # a server that reports nothing more: its id


def test_props_live_beside_v1() -> None:
    assert server_root("http://h:8000/v1") == "http://h:8000"
    assert server_root("http://h:8000/v1/") == "http://h:8000"
    assert server_root("https://api.example.com/openai") == "https://api.example.com/openai"


def test_a_server_without_props_gives_no_facts_and_no_error() -> None:
    with FaultServer(model="m") as server, httpx.Client() as client:
        facts = read_server_facts(client, server.base_url, "m")
    assert facts.identity() == {} and facts.context_window is None


# -- a "context exceeded" reply --------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "window"),
    [
        (  # vLLM and llama-cpp-python's server
            "This model's maximum context length is 2048 tokens. However, you requested 2300 tokens "
            "(2200 in the messages, 100 in the completion).",
            2048,
        ),
        ("the request exceeds the available context size, try increasing it", 4096),  # llama.cpp: the model's window
    ],
)
def test_context_exceeded_is_its_own_error_naming_the_window(message: str, window: int) -> None:
    from bcas.llm.base import ChatRequest

    with FaultServer(model="m") as server:
        server.script(Fault.error(400, message))
        model = OpenAICompatModel("m", base_url=server.base_url, context_window=4096, max_retries=0)
        with pytest.raises(ContextWindowError) as info:
            asyncio.run(model.chat(ChatRequest([{"role": "user", "content": "hi"}], max_tokens=8)))
        assert server.requests == 1  # not asked again: it cannot fit next time either
    assert info.value.window == window
    assert f"context window ({window} tokens)" in str(info.value)


def test_another_400_is_not_a_context_error() -> None:
    from bcas.llm.base import ChatRequest, ModelError

    with FaultServer(model="m") as server:
        server.script(Fault.error(400, "max_tokens must be at least 1"))
        model = OpenAICompatModel("m", base_url=server.base_url, context_window=4096, max_retries=0)
        with pytest.raises(ModelError) as info:
            asyncio.run(model.chat(ChatRequest([{"role": "user", "content": "hi"}], max_tokens=8)))
    assert not isinstance(info.value, ContextWindowError)


def test_the_embedded_default_window_is_declared_as_loaded() -> None:
    from bcas.llm.embedded import DEFAULT_N_CTX

    assert backend_meta("embedded", "context_window") == DEFAULT_N_CTX


# -- the generation cache keys on the identity -------------------------------------------


def test_the_cache_keys_on_the_identity_not_the_name(tmp_path: Path) -> None:
    from bcas.llm.base import ChatRequest
    from bcas.llm.cache import tally

    request = ChatRequest([{"role": "user", "content": "hello"}], max_tokens=8)
    cache = str(tmp_path / "gen.sqlite")

    async def ask(url: str, identity: str) -> tuple[bool, int]:
        model = load_model("openai", "same-name", base_url=url, cache=cache, identity=identity)
        with tally() as counts:
            result = await model.chat(request)
        await model.aclose()
        return result.cached, counts.hits

    with FaultServer(model="same-name") as server:
        assert asyncio.run(ask(server.base_url, "served:same-name@aaaa")) == (False, 0)
        assert asyncio.run(ask(server.base_url, "served:same-name@aaaa")) == (True, 1)
        assert asyncio.run(ask(server.base_url, "served:same-name@bbbb")) == (False, 0)  # another model
        assert server.requests == 2


# -- the budget a window can hold ------------------------------------------------------------


def _settings(window_model: str, base_url: str | None) -> SimpleNamespace:
    from bcas.run.settings import ModelSpec

    backend = "openai" if base_url else "embedded"
    return SimpleNamespace(
        models=[ModelSpec(backend, window_model, base_url)],
        grids=["smoke"],
        datasets=None,
        embedder=None,
        reranker=None,
        rerank_candidates=None,
        calibration_n=None,
    )


def test_one_warning_names_the_configurations_a_small_window_cannot_hold() -> None:
    from bcas.run.windows import PROMPT_ALLOWANCE, context_warnings, context_windows

    settings = _settings("m", "http://127.0.0.1:9/v1")
    preflight = [{"base_url": "http://127.0.0.1:9/v1", "model": "m", "context_window": 2048}]
    windows = context_windows(settings, preflight)
    assert windows == {"m": 2048}
    (line,) = context_warnings(settings, windows)
    assert "context window of 2048 tokens" in line
    need = 2000 + 48 + PROMPT_ALLOWANCE
    assert f"smoke/bm25/s3/t2k/plan (~{need})" in line
    assert "madara" not in line  # the MADARA cases spend no trajectory budget
    assert context_warnings(settings, {"m": 8192}) == []
    assert context_warnings(settings, {"m": None}) == []  # unknown: nothing to say
    # a window smaller than a budget alone: the case is refused before the run, not warned about
    assert context_warnings(settings, {"m": 2047}) == []


def test_the_judge_is_loaded_and_fingerprinted_from_one_endpoint() -> None:
    from bcas.run.settings import ModelSpec, judge_endpoint

    embedded, served = ModelSpec("embedded", None), ModelSpec("openai", "m", "http://s:1/v1", "KEY")
    settings = SimpleNamespace(models=[embedded, served], judge_base_url=None)
    assert judge_endpoint(settings) == ("http://s:1/v1", "KEY")  # the served model's, not the first model's
    settings.judge_base_url = "http://j:2/v1"
    assert judge_endpoint(settings) == ("http://j:2/v1", None)


# -- real llama.cpp servers ------------------------------------------------------------------


def _run(one_search_project: pytest.Pytester, url: str, run_dir: Path, *more: str) -> pytest.RunResult:
    return one_search_project.runpytest(
        "--bcas-backend",
        "openai",
        "--bcas-base-url",
        url,
        "--bcas-model",
        "smollm2",
        "--bcas-grid",
        "tiny",
        "--bcas-report",
        str(run_dir),
        "-p",
        "no:cacheprovider",
        *more,
    )


def _session(run_dir: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((run_dir / "run.json").read_text())["sessions"][-1]


@pytest.mark.proof_stage  # two llama.cpp servers started in turn: CI's required proof stage
@pytest.mark.server
def test_another_gguf_under_the_same_name_reuses_no_answer(
    one_search_project: pytest.Pytester, smollm2_gguf: Path, tmp_path: Path
) -> None:
    """Same name, another file (a byte-identical copy at another path: the server reports another
    ``model_path``, which is all that tells the two apart here) -> another fingerprint."""
    from bcas.testing.servers import LlamaCppServer

    copy = tmp_path / "other" / "smollm2-copy.gguf"
    copy.parent.mkdir()
    shutil.copyfile(smollm2_gguf, copy)
    run_dir = one_search_project.path / "run"
    with LlamaCppServer(smollm2_gguf, alias="smollm2", n_ctx=4096) as first:
        result = _run(one_search_project, first.base_url, run_dir)
        result.assert_outcomes(passed=1)
    (one,) = read_records(run_dir)
    assert _session(run_dir)["models"]["smollm2"]["context_window"] == 4096
    with LlamaCppServer(copy, alias="smollm2", n_ctx=4096) as second:
        result = _run(one_search_project, second.base_url, run_dir)
        result.assert_outcomes(passed=1)
        assert "generation cache: 0 of 1 answers" in result.stdout.str()
        records = read_records(run_dir)
        assert len(records) == 2  # the first file's answer was not resumed as the second's
        other = records[1]
        assert other["model_fingerprint"] != one["model_fingerprint"]
        assert other["model_fingerprint"].startswith("served:smollm2@")
        assert other["extra"]["cache"]["hits"] == 0  # and none of its calls came from the first's cache
        # The same file again, into a fresh folder: every answer from the cache, and said so.
        again = _run(one_search_project, second.base_url, one_search_project.path / "again")
        again.assert_outcomes(passed=1)
        assert "generation cache: 1 of 1 answers" in again.stdout.str()
        assert _session(one_search_project.path / "again")["answers_from_cache"] == 1
        dead_url = second.base_url
    # Every answer is cached, the server is gone: the run still stops at its preflight ...
    dead = _run(one_search_project, dead_url, one_search_project.path / "dead")
    assert dead.ret == pytest.ExitCode.USAGE_ERROR
    assert "preflight failed" in dead.stderr.str() and "connection refused" in dead.stderr.str()
    # ... unless told to replay offline: the identity last verified for that URL and name.
    offline = _run(one_search_project, dead_url, one_search_project.path / "offline", "--bcas-no-preflight")
    offline.assert_outcomes(passed=1)
    assert "generation cache: 1 of 1 answers" in offline.stdout.str()
    assert read_records(one_search_project.path / "offline")[0]["model_fingerprint"] == other["model_fingerprint"]


@pytest.mark.server
@pytest.mark.proof_stage  # a real server for model and judge, 12 s: CI's required proof stage runs it
def test_an_embedded_model_and_a_served_judge_share_one_endpoint(
    one_search_project: pytest.Pytester, llama_server
) -> None:  # type: ignore[no-untyped-def]
    from bcas.llm.preflight import preflight

    run_dir = one_search_project.path / "run"
    result = one_search_project.runpytest(
        "--bcas-model",
        "embedded",
        "--bcas-model",
        "openai:srv",
        "--bcas-base-url",
        llama_server.base_url,
        "--bcas-judge",
        "openai:srv",  # no --bcas-judge-base-url: the served model's server
        "--bcas-grid",
        "tiny",
        "-k",
        "smollm2 and not srv",  # the embedded model's case ("srv", serving SmolLM2's GGUF, is the served model's)
        "--bcas-report",
        str(run_dir),
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    expected = preflight(llama_server.base_url, "srv").fingerprint
    session = _session(run_dir)
    assert session["judge"]["fingerprint"] == expected
    (record,) = read_records(run_dir)
    assert record["model"] == "smollm2-135m" and record["prediction"]
    grade = record["grades"][session["judge"]["grade_id"]]
    assert expected in session["judge"]["grade_id"]
    assert grade["llm_calls"] >= 1 and "judge call failed" not in str(grade.get("reason"))  # the judge answered
