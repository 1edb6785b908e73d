"""Grammar-constrained sampling that checks the chosen token first (in the engine process).

llama-cpp-python puts the grammar inside its sampler chain, so every generated token
costs a full pass of the grammar over the whole vocabulary (49,152 tokens for
SmolLM2) before the chain picks one.  llama.cpp's own common sampler
(``common/sampling.cpp``, ``common_sampler_sample``) does it the other way round:

1. run the chain *without* the grammar and take the token it selects;
2. ask the grammar about that one token only (a one-entry candidate array: the grammar
   sets its logit to ``-inf`` when it rejects it);
3. only on rejection, start again from the logits, apply the grammar to the whole
   vocabulary, then the chain, and take that token.

Greedy decoding gives exactly the full-mask tokens: the argmax of the masked logits is
the unmasked argmax whenever the grammar allows it.  Sampled decoding gives the same
distribution: a token ``t`` the grammar allows comes out with probability
``p(t) + p(rejected) * p(t) / p(allowed) = p(t) / p(allowed)``, the full mask's
renormalised probability (the random draws differ, so one seed need not give the
same text both ways).  Penalties commute with the mask (``-inf`` stays ``-inf``).

A chain with a Python logits processor (the top-logprobs recorder) keeps the full-mask
chain, so the recorder sees each position once and before any masking.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np


class GrammarRejectedError(ValueError):
    """llama.cpp's grammar parser refused the grammar (it returns no sampler; the chain would crash on it)."""


_TOKEN_DTYPE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=False)


class CheckFirstSampler:
    """A sampler chain without the grammar plus a separate grammar sampler (see the module docstring).

    It offers what ``llama_cpp.Llama.generate`` asks of ``Llama._sampler``: ``sample(ctx, idx)``.
    ``full_masks`` counts the tokens the grammar rejected (each cost one full-vocabulary pass).
    """

    def __init__(self, chain: Any, llm: Any, grammar: Any) -> None:
        import llama_cpp

        self._c = llama_cpp
        self.chain = chain  # an llama_cpp._internals.LlamaSampler without the grammar
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self.grammar:
            raise GrammarRejectedError("llama.cpp's grammar parser rejected the grammar of this json_schema")
        self.n_vocab = int(llm._n_vocab)
        self.cur = np.zeros(self.n_vocab, dtype=_TOKEN_DTYPE)
        self.ids = np.arange(self.n_vocab, dtype=np.int32)
        self.single = llama_cpp.llama_token_data(0, 1.0, 0.0)
        self.single_p = llama_cpp.llama_token_data_array(
            data=ctypes.pointer(self.single), size=1, selected=-1, sorted=False
        )
        self.tokens = 0
        self.full_masks = 0

    def _candidates(self, ctx: Any, idx: int) -> Any:
        logits = self._c.llama_get_logits_ith(ctx.ctx, idx)
        self.cur["id"] = self.ids
        self.cur["logit"] = np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
        self.cur["p"] = 0.0
        data = self.cur.ctypes.data_as(ctypes.POINTER(self._c.llama_token_data))
        return self._c.llama_token_data_array(data=data, size=self.n_vocab, selected=-1, sorted=False)

    def _allows(self, token: int) -> bool:
        self.single.id = token  # type: ignore[assignment]  # ctypes converts the int
        self.single.logit = 1.0
        self.single.p = 0.0
        self.single_p.selected = -1
        self.single_p.sorted = False
        self._c.llama_sampler_apply(self.grammar, ctypes.byref(self.single_p))
        return bool(np.isfinite(self.single.logit))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        self.tokens += 1
        cur_p = self._candidates(ctx, idx)
        self._c.llama_sampler_apply(self.chain.sampler, ctypes.byref(cur_p))
        token = int(cur_p.data[cur_p.selected].id)
        if not self._allows(token):
            self.full_masks += 1
            cur_p = self._candidates(ctx, idx)
            self._c.llama_sampler_apply(self.grammar, ctypes.byref(cur_p))
            self._c.llama_sampler_apply(self.chain.sampler, ctypes.byref(cur_p))
            token = int(cur_p.data[cur_p.selected].id)
        self._c.llama_sampler_accept(self.grammar, token)
        self._c.llama_sampler_accept(self.chain.sampler, token)
        return token

    def accept(self, token: int) -> None:
        self._c.llama_sampler_accept(self.grammar, token)
        self.chain.accept(token)

    def close(self) -> None:
        if self.grammar:
            self._c.llama_sampler_free(self.grammar)
            self.grammar = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: llama_cpp may be gone already
            pass


def install_check_first(llm: Any) -> None:
    """Make ``llm`` sample grammar-constrained completions check-first (unless a logits processor is given).

    ``llm.check_first`` switches it at run time (the equivalence test and the perf script
    decode the same prompts both ways); ``llm.last_sampler`` is the last constrained
    sampler, for its ``tokens`` / ``full_masks`` counts.
    """
    original = llm._init_sampler
    llm.check_first = True
    llm.last_sampler = None

    def init_sampler(*args: Any, **kwargs: Any) -> Any:
        grammar = kwargs.get("grammar")
        if grammar is None or not llm.check_first or kwargs.get("logits_processor") is not None:
            return original(*args, **kwargs)
        kwargs["grammar"] = None
        sampler = CheckFirstSampler(original(*args, **kwargs), llm, grammar)
        llm.last_sampler = sampler
        return sampler

    llm._init_sampler = init_sampler
