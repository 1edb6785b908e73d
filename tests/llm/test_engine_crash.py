"""A native crash of the embedded engine fails one request, never the process that asked.

The embedded backend runs llama.cpp in a child process (``bcas.llm.engine_process``).
These tests crash that child for real, with SIGSEGV (what a bad grammar or a bad
kernel does inside llama.cpp): one crash is retried on a fresh engine; two in a row
raise ``EngineCrashError`` naming the model and the request; the model then serves
the next request on a new engine.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_cases import PARIS_MESSAGES

from bcas.llm.base import ChatRequest, ContextWindowError, ModelError
from bcas.llm.embedded import EmbeddedModel, EngineCrashError

LONG = ChatRequest([{"role": "user", "content": "Write a long story about a lighthouse keeper."}], max_tokens=400)
SHORT = ChatRequest(PARIS_MESSAGES, max_tokens=32)  # answered from its context: "Paris"


@pytest.fixture
def model(smollm2_gguf: Path) -> Iterator[EmbeddedModel]:
    m = EmbeddedModel(smollm2_gguf, n_ctx=1024, n_threads=1)
    yield m
    m.close()


def _crash_engines(model: EmbeddedModel, times: int, settle_s: float = 0.5) -> threading.Thread:
    """Send SIGSEGV to the engine answering ``model``, ``times`` engines in a row."""

    def run() -> None:
        killed: set[int] = set()
        deadline = time.monotonic() + 120
        while len(killed) < times and time.monotonic() < deadline:
            pid = model.worker_pid
            if pid is None or pid in killed:
                time.sleep(0.02)
                continue
            # let the new engine load and start generating before it is crashed
            time.sleep(settle_s if not killed else 3.0)
            os.kill(pid, signal.SIGSEGV)
            killed.add(pid)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.proof_stage  # an engine killed and started again, 7 s: CI's required proof stage runs it
def test_one_crash_is_retried_on_a_fresh_engine(model: EmbeddedModel) -> None:
    first = model.worker_pid
    killer = _crash_engines(model, 1)
    result = asyncio.run(model.chat(LONG))
    killer.join(timeout=10)
    assert model.crashes == 1
    assert model.worker_pid not in (None, first)
    assert result.completion_tokens > 0 and result.text


@pytest.mark.proof_stage  # two engines killed and started again, 5 s: CI's required proof stage runs it
def test_two_crashes_fail_the_request_with_its_size_and_the_model_goes_on(model: EmbeddedModel) -> None:
    killer = _crash_engines(model, 2)
    with pytest.raises(EngineCrashError) as caught:
        asyncio.run(model.chat(LONG))
    killer.join(timeout=10)
    message = str(caught.value)
    assert model.model_id in message and "SIGSEGV" in message
    assert "max_tokens=400" in message and "1 messages" in message
    assert model.crashes == 2
    # the next request gets a fresh engine
    result = asyncio.run(model.chat(SHORT))
    assert "Paris" in result.text


def test_the_engine_is_a_child_process(model: EmbeddedModel) -> None:
    assert model.worker_pid is not None and model.worker_pid != os.getpid()
    assert model.context_window == 1024


def test_a_grammar_llama_cpp_rejects_fails_its_request_only(model: EmbeddedModel) -> None:
    """llama.cpp's grammar for a 4,000-character maxLength (what the action schema used to
    ask for at paper budgets): its parser refuses it, which crashed the engine when the
    refused grammar went into the sampler chain; checked first, it fails the request with a
    schema error and the engine serves on."""
    schema = {
        "type": "object",
        "properties": {"thought": {"type": "string", "maxLength": 4000}},
        "required": ["thought"],
        "additionalProperties": False,
    }
    request = ChatRequest([{"role": "user", "content": "Think."}], max_tokens=16, json_schema=schema)
    crashes, pid = model.crashes, model.worker_pid
    with pytest.raises(ModelError, match="grammar parser rejected") as caught:
        asyncio.run(model.chat(request))
    assert not isinstance(caught.value, (EngineCrashError, ContextWindowError))
    assert (model.crashes, model.worker_pid) == (crashes, pid)
    assert "Paris" in asyncio.run(model.chat(SHORT)).text


PARENT_SCRIPT = """
import asyncio, sys
from bcas.llm.base import ChatRequest
from bcas.llm.embedded import EmbeddedModel
model = EmbeddedModel(sys.argv[1], n_ctx=2048, n_threads=1)
asyncio.run(model.chat(ChatRequest([{"role": "user", "content": "Hi"}], max_tokens=2)))  # the engine is up
print(model.worker_pid, flush=True)
long = ChatRequest([{"role": "user", "content": "Write a very long story about a lighthouse keeper."}],
                   max_tokens=1800, temperature=1.0)
asyncio.run(model.chat(long))
"""


def test_an_engine_whose_run_is_killed_stops_at_once(smollm2_gguf: Path) -> None:
    # a run killed by kill -9 (or the OOM killer, or a scheduler's preemption) in the middle
    # of a long generation must not leave its engine generating on the cores for minutes
    import subprocess
    import sys

    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT, str(smollm2_gguf)], stdout=subprocess.PIPE, text=True
    )
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        assert line.strip().isdigit(), f"the engine did not start: {line!r}"
        engine = int(line)
        time.sleep(1.0)  # well inside the 1,800-token generation (about 40 s on a quiet core)
        os.kill(engine, 0)  # generating
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(engine, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(engine, signal.SIGKILL)
            pytest.fail("the engine went on generating after its run was killed")
    finally:
        if parent.poll() is None:
            parent.kill()
