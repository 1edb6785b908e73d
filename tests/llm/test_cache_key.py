"""The generation cache's key (``ChatRequest.cache_key``): every part of a request that changes
its reply changes the key, and the key is the documented hash of those parts, for requests that
set each of them (not only the defaults), so a cached reply is never served for another request."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from bcas.llm.base import ChatRequest

MESSAGES = ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France? é"})
TOOLS = ({"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},)
SCHEMA = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}
FULL = ChatRequest(MESSAGES, max_tokens=17, temperature=0.7, stop=("\n", "END"), seed=42, json_schema=SCHEMA,
                   top_logprobs=5, tools=TOOLS)  # fmt: skip


def _documented(request: ChatRequest, model: str) -> str:
    payload = {
        "model": model, "messages": [dict(m) for m in request.messages], "max_tokens": request.max_tokens,
        "temperature": request.temperature, "stop": list(request.stop) if request.stop else None,
        "seed": request.seed, "json_schema": None if request.json_schema is None else json.dumps(request.json_schema),
        "top_logprobs": request.top_logprobs,
    }  # fmt: skip
    if request.tools is not None:
        payload["tools"] = json.dumps(list(request.tools))
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def test_the_key_is_the_documented_hash_of_every_part() -> None:
    for request in (FULL, ChatRequest(MESSAGES), dataclasses.replace(FULL, tools=None, stop=None)):
        for model in ("m", "smollm2-135m", "served:Qwen/Qwen3-8B#fp"):
            assert request.cache_key(model) == _documented(request, model)


def test_each_part_of_a_request_changes_the_key() -> None:
    variants = {
        "model": (FULL, "other-model"),
        "messages": (dataclasses.replace(FULL, messages=(*MESSAGES[:1], {"role": "user", "content": "Capital?"})), "m"),
        "max_tokens": (dataclasses.replace(FULL, max_tokens=18), "m"),
        "temperature": (dataclasses.replace(FULL, temperature=0.0), "m"),
        "stop": (dataclasses.replace(FULL, stop=("\n",)), "m"),
        "no stop": (dataclasses.replace(FULL, stop=None), "m"),
        "seed": (dataclasses.replace(FULL, seed=43), "m"),
        "schema": (dataclasses.replace(FULL, json_schema=None), "m"),
        # property order steers constrained decoding: the same properties in another order are another request
        "schema order": (
            dataclasses.replace(
                FULL, json_schema={"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
            ),
            "m",
        ),  # fmt: skip
        "top_logprobs": (dataclasses.replace(FULL, top_logprobs=None), "m"),
        "tools": (dataclasses.replace(FULL, tools=None), "m"),
    }
    keys = {name: request.cache_key(model) for name, (request, model) in variants.items()}
    base = FULL.cache_key("m")
    assert base not in keys.values(), [n for n, k in keys.items() if k == base]
    assert len(set(keys.values())) == len(keys)
    assert FULL.cache_key("m") == dataclasses.replace(FULL).cache_key("m")  # equal requests share it
