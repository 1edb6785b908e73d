"""The openai backend against a real llama.cpp server on loopback serving SmolLM2."""

from __future__ import annotations

import asyncio
import json

import httpx
import jsonschema
import pytest
from llm_cases import PARIS_MESSAGES, structured_requests

from bcas.llm import load_model
from bcas.llm.base import ChatRequest
from bcas.llm.embedded import EmbeddedModel
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.testing.servers import LlamaCppServer

pytestmark = pytest.mark.server


def _model(server: LlamaCppServer, **options: object) -> OpenAICompatModel:
    return load_model("openai", server.alias, base_url=server.base_url, cache=False, **options)  # type: ignore[return-value]


def test_server_lists_the_model(llama_server: LlamaCppServer) -> None:
    listing = httpx.get(f"{llama_server.base_url}/models", timeout=10).json()
    assert [m["id"] for m in listing["data"]] == ["smollm2"]


def test_answers_from_context_with_the_servers_usage(
    llama_server: LlamaCppServer, embedded_model: EmbeddedModel
) -> None:
    model = _model(llama_server)
    result = asyncio.run(model.chat(ChatRequest(PARIS_MESSAGES, max_tokens=32)))
    assert "Paris" in result.text
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    # The numbers are the server's own usage field, untouched ...
    raw = httpx.post(
        f"{llama_server.base_url}/chat/completions",
        json={"model": "smollm2", "messages": list(PARIS_MESSAGES), "max_tokens": 32, "temperature": 0.0, "seed": 0},
        timeout=60,
    ).json()
    assert raw["choices"][0]["message"]["content"] == result.text
    assert (result.prompt_tokens, result.completion_tokens) == (
        raw["usage"]["prompt_tokens"],
        raw["usage"]["completion_tokens"],
    )
    # ... and the same chat template and tokenizer as the embedded backend.
    local = asyncio.run(embedded_model.chat(ChatRequest(PARIS_MESSAGES, max_tokens=32)))
    assert result.prompt_tokens == local.prompt_tokens


@pytest.mark.proof_stage  # twenty constrained generations on a real server, 14 s: CI's required proof stage runs it
def test_schema_constrained_output_is_valid_on_twenty_prompts(llama_server: LlamaCppServer) -> None:
    # Default settings: the server rejects response_format type json_schema, the backend
    # falls back to llama.cpp's own {"type": "json_object", "schema": ...}, still constrained.
    model = _model(llama_server)
    cases = structured_requests()

    async def run_all() -> list:
        return await asyncio.gather(*(model.chat(request) for request, _ in cases))

    results = asyncio.run(run_all())
    for (request, schema), result in zip(cases, results, strict=True):
        assert result.extra["schema_mode"] == "json_object"
        assert result.finish_reason == "stop", (request.messages, result.text)
        jsonschema.validate(json.loads(result.text), schema)
    assert model.schema_mode == "json_object"


def test_32_concurrent_requests_complete(llama_server: LlamaCppServer) -> None:
    model = _model(llama_server, concurrency=16)
    requests = [ChatRequest([{"role": "user", "content": f"Say the number {i}."}], max_tokens=4) for i in range(32)]

    async def run_all() -> list:
        results = await asyncio.gather(*(model.chat(r) for r in requests))
        await model.aclose()
        return results

    results = asyncio.run(run_all())
    assert len(results) == 32
    assert all(r.completion_tokens > 0 and r.prompt_tokens > 0 for r in results)


def test_first_token_logprobs_match_the_embedded_model(
    llama_server: LlamaCppServer, embedded_model: EmbeddedModel
) -> None:
    request = ChatRequest(
        [{"role": "user", "content": "Is Paris in France? Answer Yes or No."}], max_tokens=1, top_logprobs=5
    )
    served = asyncio.run(_model(llama_server).chat(request))
    local = asyncio.run(embedded_model.chat(request))
    assert served.logprobs is not None and local.logprobs is not None
    served_first, local_first = served.logprobs[0], local.logprobs[0]
    # The server computes them from all logits (logits_all); the embedded backend from
    # a logits processor on the raw logits of each step: the same numbers.
    assert {"Yes", "No"} <= set(served_first)
    assert set(served_first) == set(local_first)
    for token, logprob in served_first.items():
        assert local_first[token] == pytest.approx(logprob, abs=1e-3)
