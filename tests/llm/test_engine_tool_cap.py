"""The embedded engine's native tool calls keep to the call's ``max_tokens`` and to the context window.

llama-cpp-python's ``chatml-function-calling`` handler runs its completions with ``max_tokens=None``;
here it runs for real, over a stand-in ``Llama`` that behaves as llama.cpp does on the window (a
``None`` or non-positive ``max_tokens`` fills what the window leaves; a prompt that fills the window is
``ValueError("Requested tokens (n) exceed context window of m")``) and whose model keeps calling the
search tool with an endless query, as SmolLM2-135M did through the bridge."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed (the embedded backend)"
)

N_CTX = 512
TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search passages.",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]  # fmt: skip


class EndlessSearcher:
    """Four characters a token; every completion as llama.cpp bounds it; the model always calls ``search``."""

    verbose = False

    def __init__(self) -> None:
        self.generated: list[int] = []

    def n_ctx(self) -> int:
        return N_CTX

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [0] * (len(text) // 4 + 1)

    def create_completion(self, prompt: str, max_tokens: int | None = 16, **_: Any) -> dict[str, Any]:
        n = len(self.tokenize(prompt.encode()))
        if n >= N_CTX:
            raise ValueError(f"Requested tokens ({n}) exceed context window of {N_CTX}")
        limit = N_CTX - n if max_tokens is None or max_tokens <= 0 else min(max_tokens, N_CTX - n)
        if prompt.endswith("search:\n"):  # the arguments: a query that never ends
            text = ('{"query": "' + "word " * N_CTX)[: 4 * limit]
        else:  # choosing: a function (again), never a message
            text = "functions.search"[: 4 * limit]
        used = min(limit, len(text) // 4 + 1)
        self.generated.append(used)
        return {"id": "cmpl", "object": "text_completion", "created": 0, "model": "m",
                "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "length"}],
                "usage": {"prompt_tokens": n, "completion_tokens": used, "total_tokens": n + used}}  # fmt: skip


def ask(max_tokens: int) -> tuple[dict[str, Any], EndlessSearcher]:
    from bcas.llm.engine_process import _Engine

    llm = EndlessSearcher()
    request = {"messages": [{"role": "system", "content": "Answer with the search tool."},
                            {"role": "user", "content": "Where was the author of Hamlet born?"}],
               "max_tokens": max_tokens, "temperature": 0.0, "seed": 0, "stop": [], "tools": TOOLS}  # fmt: skip
    return _Engine(llm).chat(request), llm


@pytest.mark.parametrize("max_tokens", [1, 8, 64])
def test_a_tool_calling_reply_generates_at_most_the_calls_max_tokens_and_never_overfills_the_window(
    max_tokens: int,
) -> None:
    reply, llm = ask(max_tokens)
    assert reply["ok"], reply.get("error")  # no "Requested tokens ... exceed context window"
    assert reply["completion_tokens"] <= max_tokens
    assert sum(llm.generated) <= max_tokens  # every token the handler had generated, counted or not


def test_the_reply_still_carries_the_tool_call_it_made() -> None:
    reply, _ = ask(64)
    assert reply["ok"], reply.get("error")
    assert [c["function"]["name"] for c in reply["tool_calls"]][:1] == ["search"]
    assert reply["tool_calls"][0]["function"]["arguments"].startswith('{"query": "word')
