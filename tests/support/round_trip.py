"""GGUF -> Hugging Face conversion round trip: the comparison and its documented tolerance.

The reference is the shipped GGUF under llama.cpp (tests/support/gguf_greedy.py); the
candidate is the converted checkpoint under vLLM, both greedy from the same prompt ids.
They cannot be bit-identical: llama.cpp multiplies Q4_1 weights with 8-bit-quantised
activations, vLLM the dequantised weights in bfloat16 (the converter's default dtype),
whose logits have ~3 significant digits and often tie exactly.  Measured on SmolLM2-135M
(6 chat prompts, 24 tokens): the greedy token's log-probability differs by at most
0.14 nats between the two, and where the greedy paths part, llama.cpp's top two were
0.06-0.39 nats apart and vLLM's tied.  Hence the tolerance:

* up to the first disagreement every greedy token is the same, and its log-probability
  agrees within ``LOGPROB_TOL`` = 0.3 nats (about twice the measured worst);
* a disagreement is accepted only at a near tie: each engine's pick is in the other's
  top list, and each engine ranks the two within ``NEAR_TIE`` = 0.5 nats; the prompt's
  comparison stops there (the contexts differ afterwards);
* without a disagreement both stop at the same length (both at the end-of-turn
  token, or both at the token limit).

A broken conversion (wrong tokenizer, permuted attention weights, a lost norm or a
wrong RoPE base) moves the greedy token's log-probability by far more, or parts the
paths where one engine is confident, and fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LOGPROB_TOL = 0.3
NEAR_TIE = 0.5


@dataclass
class Agreement:
    matched: int
    diverged_at: int | None


def compare_greedy(reference: dict[str, Any], positions: list[dict[str, float]], stopped: bool) -> Agreement:
    """Check one prompt's vLLM output against llama.cpp's (raises AssertionError).

    ``reference``: one result of gguf_greedy.py (``pieces``, ``top``, ``stopped``).
    ``positions``: vLLM's top log-probabilities per generated token, end token
    excluded; ``stopped``: vLLM ended at the end-of-turn token.
    """
    pieces, tops = reference["pieces"], reference["top"]
    picks = [max(position, key=position.__getitem__) for position in positions]
    for i, (ours, theirs) in enumerate(zip(pieces, picks, strict=False)):
        llama_top, vllm_top = tops[i], positions[i]
        if ours == theirs:
            gap = abs(llama_top[ours] - vllm_top[theirs])
            assert gap <= LOGPROB_TOL, f"token {i} {ours!r}: log-probabilities differ by {gap:.3f} nats"
            continue
        assert theirs in llama_top and ours in vllm_top, (
            f"token {i}: llama.cpp {ours!r}, vLLM {theirs!r}, not in each other's top {len(llama_top)}"
        )
        llama_margin = llama_top[ours] - llama_top[theirs]
        vllm_margin = vllm_top[theirs] - vllm_top[ours]
        assert llama_margin <= NEAR_TIE and vllm_margin <= NEAR_TIE, (
            f"token {i}: llama.cpp {ours!r} vs vLLM {theirs!r} is no near tie "
            f"(margins {llama_margin:.3f} and {vllm_margin:.3f} nats)"
        )
        return Agreement(i, i)
    assert len(pieces) == len(picks) and bool(reference["stopped"]) == stopped, (
        f"same tokens, but llama.cpp gave {len(pieces)} (stopped={reference['stopped']}) "
        f"and vLLM {len(picks)} (stopped={stopped})"
    )
    return Agreement(len(pieces), None)
