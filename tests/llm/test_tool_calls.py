"""Native tool calling at the model boundary: requests, results, the cache key, the backends' payloads."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from bcas.llm.base import ChatRequest, ChatResult, ToolCall
from bcas.llm.cache import CachedModel, GenerationCache
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.llm.tool_calls import (
    assistant_message,
    calls_from_message,
    parse_tool_calls_text,
    template_supports_tools,
    tool_message,
    tool_results_as_user,
)
from bcas.llm.vllm_engine import TEMPLATES, _for_template, load_chat_template
from bcas.testing.scripted import Calls, ScriptedModel

TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "search_database",
            "description": "search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
)
MESSAGES = ({"role": "user", "content": "Who wrote Hamlet?"},)


def test_tools_are_part_of_the_cache_key_and_absent_tools_change_no_key() -> None:
    plain = ChatRequest(MESSAGES, max_tokens=8)
    with_tools = ChatRequest(MESSAGES, max_tokens=8, tools=list(TOOLS))
    assert isinstance(with_tools.tools, tuple)
    assert plain.cache_key("m") != with_tools.cache_key("m")
    other = ChatRequest(MESSAGES, max_tokens=8, tools=[{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": "x"}}])
    assert other.cache_key("m") != with_tools.cache_key("m")
    # A request without tools hashes exactly as before tools existed: cached generations stay valid.
    before = {
        "model": "m", "messages": list(MESSAGES), "max_tokens": 8, "temperature": 0.0, "stop": None,
        "seed": 0, "json_schema": None, "top_logprobs": None,
    }  # fmt: skip
    blob = json.dumps(before, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert plain.cache_key("m") == hashlib.sha256(blob.encode()).hexdigest()


def test_results_with_calls_survive_the_generation_cache(tmp_path: Path) -> None:
    model = ScriptedModel([Calls((("search_database", '{"query": "Hamlet"}'),), "let me look")])
    cached = CachedModel(model, GenerationCache(tmp_path / "c.sqlite"))
    request = ChatRequest(MESSAGES, max_tokens=32, tools=TOOLS)
    first = asyncio.run(cached.chat(request))
    again = asyncio.run(cached.chat(request))
    assert len(model.requests) == 1 and again.cached
    assert again.tool_calls == first.tool_calls == (ToolCall("scripted_0_0", "search_database", '{"query": "Hamlet"}'),)
    assert again.text == "let me look" and again.completion_tokens == first.completion_tokens
    assert ChatResult.from_dict(ChatResult("x", 1, 1, "stop", 0.0).to_dict()).tool_calls == ()


def test_the_openai_body_carries_tools_and_the_reply_its_calls() -> None:
    model = OpenAICompatModel("m", base_url="http://127.0.0.1:9/v1")
    history = [*MESSAGES, assistant_message("", [ToolCall("c1", "search_database", '{"query": "x"}')])]
    history.append(tool_message(ToolCall("c1", "search_database", "{}"), "results"))
    request = ChatRequest(history, max_tokens=16, tools=TOOLS)
    body = model._body(request, "json_schema")
    assert body["tools"] == list(TOOLS) and body["tool_choice"] == "auto"
    assert body["messages"][1]["tool_calls"][0]["id"] == "c1"
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "results"}
    assert "tools" not in model._body(ChatRequest(MESSAGES, max_tokens=16), "json_schema")
    payload = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "search_database", "arguments": {"query": "y"}},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9},
    }
    result = model._result(payload, request, 0.1, 0, "json_schema", "json_schema")
    assert result.text == "" and result.completion_tokens == 9 and result.finish_reason == "stop"
    assert result.tool_calls == (ToolCall("call_9", "search_database", '{"query": "y"}'),)
    assert result.extra["finish_reason_raw"] == "tool_calls"


def test_calls_are_read_from_every_form_a_server_sends() -> None:
    legacy = {"function_call": {"name": "ready_to_answer", "arguments": "{}"}}
    assert calls_from_message(legacy) == (ToolCall("call_0", "ready_to_answer", "{}"),)
    assert calls_from_message({"content": "hi"}) == ()
    content, calls = parse_tool_calls_text(
        'thinking\n<tool_call>\n{"name": "search_database", "arguments": {"query": "Hamlet"}}\n</tool_call>'
        '<tool_call>{"name": "ready_to_answer", "arguments": {}}</tool_call>'
    )
    assert content == "thinking"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_0", "search_database", {"query": "Hamlet"}),
        ("call_1", "ready_to_answer", {}),
    ]
    cut = parse_tool_calls_text('<tool_call>{"name": "search_database", "arguments": {"query": "Ham')[1]
    assert len(cut) == 1 and cut[0].name == "search_database"  # a malformed call is a call: an invalid one
    assert parse_tool_calls_text('{"name": "search_database", "parameters": {"query": "x"}}')[1][0].arguments == (
        '{"query": "x"}'
    )
    assert parse_tool_calls_text('{"answer": "Paris"}') == ('{"answer": "Paris"}', ())
    assert parse_tool_calls_text("just text") == ("just text", ())


def test_tool_results_become_user_turns_where_a_template_drops_them() -> None:
    call = ToolCall("c1", "search_database", "{}")
    messages = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": None, "tool_calls": [call.to_dict()]},
        tool_message(call, "first"),
        tool_message(call, "second"),
        {"role": "user", "content": "go on"},
    ]
    out = tool_results_as_user(messages)
    assert [m["role"] for m in out] == ["system", "assistant", "user", "user"]
    assert out[1]["content"] == "" and out[1]["tool_calls"] == [call.to_dict()]
    assert out[2] == {
        "role": "user",
        "content": "<tool_response>\nfirst\n</tool_response>\n<tool_response>\nsecond\n</tool_response>",
    }
    assert messages[1]["content"] is None  # the input is not changed


def test_the_shipped_chatml_tools_template_renders_tools_calls_and_results() -> None:
    name, text = load_chat_template("chatml-tools")
    assert name == "chatml-tools" and template_supports_tools(text) and set(TEMPLATES) == {"chatml-tools"}
    assert not template_supports_tools("{% for m in messages %}{{ m.content }}{% endfor %}")
    with pytest.raises(Exception, match="neither a shipped template"):
        load_chat_template("no-such-template")
    # Rendered as transformers renders chat templates (sandboxed, trim_blocks, lstrip_blocks).
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda value, **_: json.dumps(value)
    call = ToolCall("c1", "search_database", '{"query": "Hamlet"}')
    messages = [
        {"role": "system", "content": "You search."},
        {"role": "user", "content": "Who wrote Hamlet?"},
        _for_template(assistant_message("", [call])),
        tool_message(call, "Hamlet is a play by Shakespeare."),
        {"role": "user", "content": "Answer."},
    ]
    prompt = env.from_string(text).render(messages=messages, tools=list(TOOLS), add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>system\nYou search.\n\n# Tools")
    assert '"name": "search_database"' in prompt.split("\n</tools>")[0]
    assert (
        '<tool_call>\n{"name": "search_database", "arguments": {"query": "Hamlet"}}\n</tool_call><|im_end|>' in prompt
    )
    assert "<|im_start|>user\n<tool_response>\nHamlet is a play by Shakespeare.\n</tool_response><|im_end|>" in prompt
    assert prompt.count("You search.") == 1 and prompt.endswith("<|im_start|>assistant\n")
    plain = env.from_string(text).render(messages=messages[:2], tools=None, add_generation_prompt=True)
    assert (
        plain
        == "<|im_start|>system\nYou search.<|im_end|>\n<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n<|im_start|>assistant\n"
    )


class _RecordingTokenizer:
    """Records what the vllm backend asks of the tokenizer (the wiring only; tests/llm/test_vllm.py runs vLLM)."""

    chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"

    def __init__(self) -> None:
        self.calls: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    def apply_chat_template(self, messages: list[dict[str, Any]], **options: Any) -> str:
        self.calls.append((messages, options))
        return "prompt"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [1, 2, 3]


def test_the_vllm_backend_renders_tools_through_the_chat_template() -> None:
    from bcas.llm.vllm_engine import VLLMModel

    model = object.__new__(VLLMModel)  # no engine: the prompt side only
    model.model, model._tokenizer, model.chat_template = "smol", _RecordingTokenizer(), None
    assert model.supports_tools is False and "does not render tools" in model.tools_problem
    model.chat_template = load_chat_template("chatml-tools")[1]
    assert model.supports_tools is True and model.tools_problem == ""
    call = ToolCall("c1", "search_database", '{"query": "Hamlet"}')
    request = ChatRequest(
        [*MESSAGES, assistant_message("", [call]), tool_message(call, "r")], max_tokens=8, tools=TOOLS
    )
    assert model.render_prompt(request) == [1, 2, 3]
    messages, options = model._tokenizer.calls[-1]
    assert options["tools"] == list(TOOLS) and options["chat_template"] == model.chat_template
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"query": "Hamlet"}  # an object for templates
    model.render_prompt(ChatRequest(MESSAGES, max_tokens=8))
    assert "tools" not in model._tokenizer.calls[-1][1]
