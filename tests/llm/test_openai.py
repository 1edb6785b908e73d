"""The openai backend against the fault-injecting loopback server: retries, limits,
errors, structured-output fallback, concurrency, logprob parsing, key hygiene."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from llm_cases import ACTION_SCHEMA

from bcas.llm import load_model
from bcas.llm.base import ChatRequest, ModelError
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.llm.replies import _retry_after
from bcas.testing.servers import Fault, FaultServer

FAST = {"backoff_base": 0.01, "backoff_max": 0.05, "timeout": 5.0}


def _model(server: FaultServer, **options: Any) -> OpenAICompatModel:
    return OpenAICompatModel("test-model", base_url=server.base_url, **{**FAST, **options})


def _ask(model: OpenAICompatModel, text: str = "hello", **fields: Any) -> Any:
    return asyncio.run(model.chat(ChatRequest([{"role": "user", "content": text}], **fields)))


def test_plain_request_body_and_result(fault_server: FaultServer) -> None:
    result = _ask(_model(fault_server), "what is two plus two", max_tokens=7, stop=["\n"])
    assert result.text == "echo: what is two plus two"
    assert (result.prompt_tokens, result.completion_tokens) == (5, 6)  # the server's usage field
    assert result.finish_reason == "stop" and result.retries == 0
    body = fault_server.log[0].body
    assert body is not None
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 7 and body["temperature"] == 0.0 and body["seed"] == 0
    assert body["stop"] == ["\n"]
    assert "response_format" not in body and "logprobs" not in body


FAULTS = {
    "http-500": Fault.error(500),
    "http-503": Fault.error(503, "overloaded"),
    "http-429-retry-after": Fault.error(429, "slow down", retry_after=0.05),
    "timeout": Fault.slow(2.0),
    "truncated-json": Fault.truncated(),
    "malformed-body": Fault.malformed(),
    "dropped-connection": Fault.drop(),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_retries_recover_from_each_fault(fault_server: FaultServer, name: str) -> None:
    fault = FAULTS[name]
    fault_server.script(fault, fault)
    model = _model(fault_server, timeout=0.5, max_retries=3, max_malformed_retries=2)
    result = _ask(model, "recover please")
    assert result.text == "echo: recover please"
    assert result.retries == 2
    assert fault_server.requests == 3
    assert [r.fault for r in fault_server.log] == [fault.kind, fault.kind, "ok"]


@pytest.mark.parametrize("name", ["http-500", "http-429-retry-after", "timeout", "dropped-connection"])
def test_gives_up_cleanly_past_the_retry_limit(fault_server: FaultServer, name: str) -> None:
    fault_server.script(default=FAULTS[name])
    model = _model(fault_server, timeout=0.3, max_retries=2)
    with pytest.raises(ModelError, match=r"gave up .* after 3 attempts \(2 retries\)"):
        _ask(model)
    assert fault_server.requests == 3


def test_malformed_bodies_are_retried_a_bounded_number_of_times(fault_server: FaultServer) -> None:
    fault_server.script(default=Fault.truncated())
    model = _model(fault_server, max_retries=10, max_malformed_retries=1)
    with pytest.raises(ModelError, match="2 malformed bodies"):
        _ask(model)
    assert fault_server.requests == 2


def test_retry_after_is_honoured(fault_server: FaultServer) -> None:
    fault_server.script(Fault.error(429, "rate limited", retry_after=0.6))
    result = _ask(_model(fault_server, backoff_base=0.001, backoff_max=0.001))
    assert result.retries == 1
    first, second = fault_server.log
    assert second.received_at - first.received_at >= 0.55


def test_retry_after_header_forms() -> None:
    def response(value: str) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": value})

    assert _retry_after(response("3")) == 3.0
    assert _retry_after(response("Wed, 21 Oct 2015 07:28:00 GMT")) == 0.0  # a date in the past: no wait
    assert _retry_after(response("soon")) is None
    assert _retry_after(httpx.Response(429)) is None


def test_non_retryable_4xx_fails_at_once_with_the_server_message(fault_server: FaultServer) -> None:
    fault_server.script(Fault.error(400, "max_tokens must be at most 4096"))
    with pytest.raises(ModelError, match="HTTP 400: max_tokens must be at most 4096"):
        _ask(_model(fault_server))
    assert fault_server.requests == 1


def test_unknown_model_404_is_not_retried(fault_server: FaultServer) -> None:
    fault_server.script(Fault.error(404, "The model `nope` does not exist"))
    with pytest.raises(ModelError, match="does not exist"):
        _ask(_model(fault_server))
    assert fault_server.requests == 1


def test_json_schema_is_sent_as_strict_response_format(fault_server: FaultServer) -> None:
    fault_server.script(Fault.ok('{"action": "answer", "text": "Paris"}'))
    result = _ask(_model(fault_server), json_schema=ACTION_SCHEMA)
    assert json.loads(result.text) == {"action": "answer", "text": "Paris"}
    body = fault_server.log[0].body
    assert body is not None
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "action", "schema": ACTION_SCHEMA, "strict": True},
    }
    assert result.extra == {"schema_mode": "json_schema"}


def test_rejected_response_format_falls_back_and_is_remembered(fault_server: FaultServer) -> None:
    fault_server.script(
        Fault.error(400, "response_format type json_schema is not supported"),
        Fault.error(422, "response_format: schema not supported"),
    )
    model = _model(fault_server)
    first = _ask(model, "one", json_schema=ACTION_SCHEMA)
    assert first.extra == {"schema_mode": "none", "schema_fallback": True}
    assert first.retries == 0
    kinds = [(r.body or {}).get("response_format", {}).get("type") for r in fault_server.log]
    assert kinds == ["json_schema", "json_object", None]
    assert fault_server.log[1].body["response_format"]["schema"] == ACTION_SCHEMA  # type: ignore[index]
    second = _ask(model, "two", json_schema=ACTION_SCHEMA)  # goes straight to the mode that worked
    assert second.extra == {"schema_mode": "none", "schema_fallback": True}
    assert fault_server.requests == 4
    assert "response_format" not in (fault_server.log[3].body or {})


def test_rejected_response_format_without_fallback_fails(fault_server: FaultServer) -> None:
    fault_server.script(Fault.error(400, "response_format json_schema is not supported"))
    with pytest.raises(ModelError, match="rejected response_format"):
        _ask(_model(fault_server, schema_fallback=False), json_schema=ACTION_SCHEMA)
    assert fault_server.requests == 1


def test_unrelated_400_with_a_schema_does_not_trigger_fallback(fault_server: FaultServer) -> None:
    fault_server.script(Fault.error(400, "prompt is longer than the context window"))
    model = _model(fault_server)
    with pytest.raises(ModelError, match="context window"):
        _ask(model, json_schema=ACTION_SCHEMA)
    assert fault_server.requests == 1
    assert model.schema_mode == "json_schema"


def test_logprobs_are_requested_and_parsed(fault_server: FaultServer) -> None:
    result = _ask(_model(fault_server), "yes or no", top_logprobs=3)
    body = fault_server.log[0].body
    assert body is not None and body["logprobs"] is True and body["top_logprobs"] == 3
    assert result.logprobs is not None
    assert len(result.logprobs) == len("echo: yes or no".split())
    assert result.logprobs[0] == {"echo:": -0.1, "alt0": -2.0, "alt1": -3.0}


def test_32_concurrent_requests_complete_within_the_concurrency_limit() -> None:
    with FaultServer(latency=0.05) as server:
        model = OpenAICompatModel("test-model", base_url=server.base_url, concurrency=8, **FAST)

        async def run_all() -> list:
            requests = [ChatRequest([{"role": "user", "content": f"question {i}"}]) for i in range(32)]
            results = await asyncio.gather(*(model.chat(r) for r in requests))
            await model.aclose()
            return results

        results = asyncio.run(run_all())
        assert [r.text for r in results] == [f"echo: question {i}" for i in range(32)]
        assert server.requests == 32
        assert 1 < server.max_in_flight <= 8


def test_model_survives_successive_event_loops(fault_server: FaultServer) -> None:
    model = _model(fault_server)
    assert _ask(model, "first loop").text == "echo: first loop"
    assert _ask(model, "second loop").text == "echo: second loop"


SECRET = "sk-test-7f3a9c1e5b2d4a6f8e0c"


def test_api_key_is_sent_but_never_shown(fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCAS_TEST_API_KEY", SECRET)
    model = _model(fault_server, api_key_env="BCAS_TEST_API_KEY", max_retries=1)
    assert SECRET not in repr(model)
    assert _ask(model).text == "echo: hello"
    assert fault_server.log[0].headers.get("Authorization") == f"Bearer {SECRET}"
    # A server that echoes the key back in its error text, fatal and retryable alike.
    echoed = json.dumps({"error": {"message": f"invalid api key {SECRET}"}})
    fault_server.script(Fault("status", status=401, body=echoed))
    with pytest.raises(ModelError) as fatal:
        _ask(model)
    fault_server.script(Fault("status", status=500, body=echoed), Fault("status", status=500, body=echoed))
    with pytest.raises(ModelError) as exhausted:
        _ask(model)
    for error in (fatal.value, exhausted.value):
        assert SECRET not in str(error) and SECRET not in repr(error)
        assert "invalid api key ***" in str(error)


def test_missing_api_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BCAS_ABSENT_KEY", raising=False)
    with pytest.raises(ModelError, match="BCAS_ABSENT_KEY"):
        load_model("openai", "m", base_url="http://127.0.0.1:9/v1", api_key_env="BCAS_ABSENT_KEY", cache=False)


def test_load_model_needs_a_model_name() -> None:
    with pytest.raises(ModelError, match="model name"):
        load_model("openai", None, cache=False)
