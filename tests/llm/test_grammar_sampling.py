"""Check-first grammar sampling on the real model: the same tokens as the full mask, fewer full masks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from llm_cases import structured_requests

from bcas.llm.engine_process import load_llama
from bcas.llm.grammar_sampling import install_check_first


@pytest.fixture(scope="module")
def llm(smollm2_gguf: Path) -> Iterator[Any]:
    model = load_llama(str(smollm2_gguf), {"n_ctx": 1024, "n_threads": 1, "verbose": False, "seed": 0})
    install_check_first(model)
    yield model
    model.close()


def _decode(llm: Any, messages: list[dict[str, Any]], schema: dict[str, Any], check_first: bool, **kw: Any) -> Any:
    from llama_cpp import LlamaGrammar  # type: ignore[attr-defined]  # exported, not in __all__

    llm.check_first = check_first
    llm.last_sampler = None
    llm.reset()  # the whole prompt evaluated both ways (a reused prefix may round the last logits differently)
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    out = llm.create_chat_completion(messages=messages, max_tokens=48, grammar=grammar, **kw)
    # Every generated token but the last is evaluated into the context after the prompt.
    return out, list(llm._input_ids[: llm.n_tokens]), llm.last_sampler


# One prompt of each of the three schemas (action, label, score): a few greedy decodes keep the file cheap.
CASES = [structured_requests()[i] for i in (0, 10, 16)]


@pytest.mark.parametrize("case", CASES, ids=["action", "label", "score"])
def test_greedy_check_first_gives_the_full_mask_tokens(llm: Any, case: Any) -> None:
    request, schema = case
    messages = [dict(m) for m in request.messages]
    full, full_ids, full_sampler = _decode(llm, messages, schema, check_first=False, temperature=0.0)
    first, first_ids, sampler = _decode(llm, messages, schema, check_first=True, temperature=0.0)
    assert full_sampler is None  # the full-mask run went through llama-cpp-python's own chain
    assert first_ids == full_ids
    assert first["choices"][0]["message"]["content"] == full["choices"][0]["message"]["content"]
    assert first["usage"] == full["usage"]
    jsonschema.validate(json.loads(first["choices"][0]["message"]["content"]), schema)
    # The speed-up's cause: most tokens pass the one-token check, so few need the full mask.
    assert sampler is not None and sampler.tokens >= first["usage"]["completion_tokens"]
    assert sampler.full_masks < sampler.tokens


def test_sampled_check_first_output_keeps_to_the_schema(llm: Any) -> None:
    request, schema = CASES[0]
    messages = [dict(m) for m in request.messages]
    rejected = 0
    for seed in range(4):
        out, _, sampler = _decode(llm, messages, schema, check_first=True, temperature=1.0, seed=seed)
        jsonschema.validate(json.loads(out["choices"][0]["message"]["content"]), schema)
        rejected += sampler.full_masks
    # At temperature 1 the chain proposes tokens the grammar refuses: the fallback ran and still kept the schema.
    assert rejected > 0


def test_a_logits_processor_keeps_the_full_mask_chain(llm: Any) -> None:
    from llama_cpp import LogitsProcessorList

    request, schema = CASES[1]
    seen: list[int] = []

    def record(input_ids: Any, scores: Any) -> Any:
        seen.append(1)
        return scores

    out, _, sampler = _decode(
        llm, [dict(m) for m in request.messages], schema, check_first=True, temperature=0.0,
        logits_processor=LogitsProcessorList([record]),
    )  # fmt: skip
    assert sampler is None
    # One call per sampled position (the end-of-text token is sampled but not counted in the usage):
    # the top-logprobs recorder never sees a position twice.
    ended = out["choices"][0]["finish_reason"] == "stop"
    assert len(seen) == out["usage"]["completion_tokens"] + int(ended)
