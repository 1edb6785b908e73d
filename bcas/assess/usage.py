"""The call ledger of one MADARA run: LLM calls and tokens by purpose.

Every model call of the assessment package goes through ``Ledger.chat`` so a
record can report, from its own counts, what a treatment cost (MADARA
Appendix K: NF = 1 generation call; 3-Agent/CoT/SDA = 3 agents x m documents
assessment calls + 1 generation call; PDE = assessment + k generation calls;
PDE-Random = k generation calls and no assessment).

Kinds: ``assessment`` (an agent scoring one document), ``rescore`` (an RSC
re-scoring under perturbed reasoning), ``generation`` (an answer) and ``rerank`` (a
call the ``llm`` reranker made while the item's documents were retrieved, one per
candidate; measured by :func:`bcas.llm.usage.metering` and added with
``Ledger.add_metered``, as the BCAS loop's ``rerank`` steps are).  A call
answered by the generation cache is still a call of the method (its tokens are
the provider-reported usage stored with it); ``cached_calls`` says how many were.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from bcas.llm.base import ChatModel, ChatRequest, ChatResult
from bcas.llm.usage import UsageMeter

CALL_KINDS = ("assessment", "rescore", "generation", "rerank")


@dataclass
class Usage:
    """Totals of a ledger (or of several, added with ``+``)."""

    llm_calls: int = 0
    assessment_calls: int = 0
    rescore_calls: int = 0
    generation_calls: int = 0
    rerank_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cached_calls: int = 0
    model_errors: int = 0
    latency_s: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class CallEntry:
    kind: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    finish_reason: str
    tag: str = ""
    error: str | None = None


@dataclass
class Ledger:
    """Records every call made through ``chat``; ``usage()`` sums them.

    ``seed``: the run's sampling seed, stamped on every request that goes through the
    ledger (MADARA samples at T = 0.6, §5.1), so ``--bcas-seed`` and each epoch's seed
    reach every assessment, re-scoring and generation call.
    """

    entries: list[CallEntry] = field(default_factory=list)
    seed: int | None = None

    async def chat(self, model: ChatModel, request: ChatRequest, kind: str, tag: str = "") -> ChatResult:
        """Call ``model.chat`` and ledger it; a failed call is ledgered, then re-raised."""
        if kind not in CALL_KINDS:
            raise ValueError(f"call kind must be one of {CALL_KINDS}, got {kind!r}")
        if self.seed is not None and request.seed != self.seed:
            request = dataclasses.replace(request, seed=self.seed)
        start = time.perf_counter()
        try:
            result = await model.chat(request)
        except Exception as exc:
            self.entries.append(CallEntry(kind, 0, 0, time.perf_counter() - start, False, "error", tag, repr(exc)))
            raise
        self.entries.append(
            CallEntry(
                kind,
                int(result.prompt_tokens),
                int(result.completion_tokens),
                float(result.latency_s),
                bool(result.cached),
                result.finish_reason,
                tag,
            )
        )
        return result

    def add_metered(self, kind: str, meter: UsageMeter, tag: str = "") -> None:
        """Ledger, one entry each, the calls a component made under ``meter`` (the reranker's)."""
        if kind not in CALL_KINDS:
            raise ValueError(f"call kind must be one of {CALL_KINDS}, got {kind!r}")
        for r in meter.results:
            self.entries.append(
                CallEntry(
                    kind,
                    int(r.prompt_tokens),
                    int(r.completion_tokens),
                    float(r.latency_s),
                    bool(r.cached),
                    r.finish_reason,
                    tag,
                )
            )

    def usage(self) -> Usage:
        u = Usage()
        for e in self.entries:
            u.llm_calls += 1
            setattr(u, f"{e.kind}_calls", getattr(u, f"{e.kind}_calls") + 1)
            u.tokens_in += e.prompt_tokens
            u.tokens_out += e.completion_tokens
            u.cached_calls += int(e.cached)
            u.model_errors += int(e.error is not None)
            u.latency_s += e.latency_s
        return u
