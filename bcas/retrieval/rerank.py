"""Re-ranking (R): a reranker registry (BCAS §3.5 "Re-ranking"; MADARA §5.5, §6.4).

BCAS retrieves 100 hybrid candidates, re-scores them with a cross-encoder
(bge-reranker-v2-m3) and keeps the top five.  MADARA §6.4 re-orders retrieved
documents with a generative reranker (Qwen3-0.6B).  Registered rerankers:

- ``llm`` (CPU default): a generative reranker on any ``ChatModel`` that reports
  log-probabilities.  Each (question, passage) pair is put into the template
  ``prompts/rerank.txt`` ("does this passage help answer the question?") as one user
  message; the model generates one token with ``top_logprobs`` and the relevance is
  ``log P("Yes") − log P("No")`` at that first answer position.  Token spellings that
  differ only in case, surrounding white space or punctuation (``Yes``, `` yes``,
  ``YES.``) are pooled with log-sum-exp.  An answer word absent from the reported
  top-``top_logprobs`` list takes the smallest listed log-probability (an upper bound
  of its true value).  Without a model argument it runs on
  ``bcas.llm.load_model("embedded")`` (SmolLM2-135M-Instruct via llama.cpp).
- ``bge-reranker-v2-m3`` (GPU): FlagEmbedding's ``FlagReranker`` cross-encoder (the
  ``gpu`` extra), raw logits as scores (BCAS §3.5's reranker).  ``bge-reranker-v2-m3:PATH``
  or ``BCAS_BGE_RERANKER_MODEL`` names a local model folder instead of the hub id
  ``BAAI/bge-reranker-v2-m3``.
- ``cross-encoder:PATH``: any sentence-transformers ``CrossEncoder`` saved in the local
  folder ``PATH`` (e.g. ms-marco-MiniLM-L-12-v2, the cross-encoder of MADARA Appendix K),
  its ``predict`` scores as relevance; loaded with ``local_files_only``, never fetched.

A name ``NAME:ARGUMENT`` passes ``ARGUMENT`` as the ``path`` of the reranker ``NAME``;
:func:`reranker_known` says whether a name can load, before anything is built.

The configured reranker runs or the build fails with ``RerankerError``; no reranker
ever stands in for another.  A new reranker is one decorated factory::

    @register_reranker("my-reranker")
    def _mine(model=None, **options) -> Reranker: ...
"""

from __future__ import annotations

import abc
import asyncio
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bcas.llm.base import ChatModel, ChatRequest, ModelError
from bcas.llm.usage import add_usage
from bcas.prompts import prompt_text
from bcas.retrieval.model_table import ModelTable, weights_digest

RERANK_PROMPT = "rerank.txt"
DEFAULT_TOP_LOGPROBS = 20
DEFAULT_PASSAGE_CHARS = 2000


def rerank_calls_per_search(mode: str, reranker: str, candidates: int, k: int) -> int:
    """Model calls one search's re-ranking makes (the estimate's, :mod:`bcas.callshape`): the ``llm``
    reranker asks the model once per candidate of the pool (``max(candidates, k)``, as
    :meth:`bcas.retrieval.retriever.Retriever.search` draws it); a cross-encoder, or a mode that
    does not re-rank, none."""
    from bcas.registry import mode_uses

    if not mode_uses(mode, "rerank") or reranker.partition(":")[0] != "llm":
        return 0
    return max(candidates, k)


class RerankerError(RuntimeError):
    """A reranker cannot be created or failed to score; the message says what to change."""


class Reranker(abc.ABC):
    """Scores (query, passage) pairs; higher is more relevant."""

    name: str = "unknown"
    model_id: str = "unknown"

    @abc.abstractmethod
    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, in the order given."""

    async def aclose(self) -> None:
        return None


RERANKERS: dict[str, Callable[..., Reranker]] = {}

PATH_RERANKERS = ("cross-encoder", "bge-reranker-v2-m3")
"""Rerankers that take a local folder as ``NAME:PATH``; ``cross-encoder`` needs one."""

_TABLE = ModelTable("reranker", RERANKERS, PATH_RERANKERS, "cross-encoder", RerankerError)


# ``@register_reranker("name")`` registers a factory (heavy imports belong inside it);
# ``reranker_known`` checks a name, ``NAME:PATH`` included.
register_reranker = _TABLE.register
reranker_known = _TABLE.known
reranker_names = _TABLE.names


def load_reranker(name: str, *, model: ChatModel | None = None, **options: Any) -> Reranker:
    """Create the named reranker (``NAME`` or ``NAME:PATH``); unknown names raise ``RerankerError``."""
    return _TABLE.create(name, model=model, **options)


def load_prompt(name: str = RERANK_PROMPT) -> str:
    """The reranker's prompt text (``bcas/retrieval/prompts/<name>``)."""
    return prompt_text("bcas.retrieval", name)


def _answer_word(token: str) -> str:
    return token.strip().strip(".,:;!?\"'").lower()


def _pooled_logprob(row: dict[str, float], word: str) -> float | None:
    values = [lp for tok, lp in row.items() if _answer_word(tok) == word]
    if not values:
        return None
    peak = max(values)
    return peak + math.log(sum(math.exp(v - peak) for v in values))


def yes_no_margin(row: dict[str, float]) -> float:
    """``log P(yes) − log P(no)`` from one position's top log-probabilities (see module doc)."""
    if not row:
        raise RerankerError("the model reported an empty log-probability row")
    floor = min(row.values())
    yes = _pooled_logprob(row, "yes")
    no = _pooled_logprob(row, "no")
    return (floor if yes is None else yes) - (floor if no is None else no)


class LLMReranker(Reranker):
    """Generative reranker: relevance = log P("Yes") − log P("No") of the first answer token."""

    name = "llm"

    def __init__(
        self,
        model: ChatModel,
        *,
        template: str | None = None,
        top_logprobs: int = DEFAULT_TOP_LOGPROBS,
        passage_chars: int = DEFAULT_PASSAGE_CHARS,
        owns_model: bool = False,
    ) -> None:
        if not getattr(model, "supports_logprobs", False):
            raise RerankerError(
                f"reranker 'llm' needs a model that reports log-probabilities; {model.model_id!r} does not "
                "(use the embedded backend, or a server that returns top_logprobs)"
            )
        self.model = model
        self.template = template if template is not None else load_prompt()
        self.top_logprobs = top_logprobs
        self.passage_chars = passage_chars
        self.model_id = f"llm:{model.model_id}"
        self._owns_model = owns_model

    def request(self, query: str, passage: str) -> ChatRequest:
        prompt = self.template.format(question=query.strip(), passage=passage.strip()[: self.passage_chars])
        return ChatRequest(
            messages=({"role": "user", "content": prompt},),
            max_tokens=1,
            temperature=0.0,
            top_logprobs=self.top_logprobs,
        )

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        try:
            results = await asyncio.gather(*(self.model.chat(self.request(query, p)) for p in passages))
        except ModelError as exc:
            raise RerankerError(f"reranker 'llm' on {self.model.model_id}: {exc}") from exc
        scores: list[float] = []
        for result in results:
            add_usage(result)  # on the item's ledger (bcas.llm.usage), when the caller meters
            if not result.logprobs:
                raise RerankerError(
                    f"reranker 'llm': {self.model.model_id} returned no log-probabilities for the answer token"
                )
            scores.append(yes_no_margin(result.logprobs[0]))
        return scores

    async def aclose(self) -> None:
        if self._owns_model:
            await self.model.aclose()


@register_reranker("llm")
def _llm(model: ChatModel | None = None, backend: str = "embedded", **options: Any) -> Reranker:
    owns = model is None
    if model is None:
        from bcas.llm import load_model

        try:
            model = load_model(backend)
        except (ModelError, ImportError) as exc:
            raise RerankerError(f"reranker 'llm' could not load the {backend!r} model: {exc}") from exc
    return LLMReranker(model, owns_model=owns, **options)


class BGEReranker(Reranker):
    """bge-reranker-v2-m3 cross-encoder through FlagEmbedding (GPU extra)."""

    name = "bge-reranker-v2-m3"

    def __init__(self, model: str, batch_size: int = 32, max_length: int = 512) -> None:
        try:
            from FlagEmbedding import FlagReranker
        except ImportError as exc:
            raise RerankerError(
                "reranker 'bge-reranker-v2-m3' needs FlagEmbedding, part of the gpu extra: pip install 'bcas[gpu]' "
                f"(import failed: {exc})"
            ) from None
        import torch

        self.model_id = f"bge-reranker-v2-m3:{model}"
        self.batch_size = batch_size
        self.max_length = max_length
        self._model = FlagReranker(model, use_fp16=torch.cuda.is_available())

    def _score_sync(self, query: str, passages: Sequence[str]) -> list[float]:
        out = self._model.compute_score(
            [[query, p] for p in passages], batch_size=self.batch_size, max_length=self.max_length
        )
        return [float(s) for s in (out if isinstance(out, list) else [out])]

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.to_thread(self._score_sync, query, passages)


@register_reranker("bge-reranker-v2-m3")
def _bge_reranker(model: ChatModel | None = None, path: str | None = None, **options: Any) -> Reranker:
    # ``model`` (a ChatModel) is meaningless for a cross-encoder and ignored.
    return BGEReranker(path or os.environ.get("BCAS_BGE_RERANKER_MODEL", "BAAI/bge-reranker-v2-m3"), **options)


class CrossEncoderReranker(Reranker):
    """A sentence-transformers ``CrossEncoder`` from a local folder (``cross-encoder:PATH``)."""

    name = "cross-encoder"

    def __init__(self, path: str, batch_size: int = 32, device: str | None = None) -> None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise RerankerError(
                f"reranker 'cross-encoder:{path}': {folder} is not a folder holding a saved CrossEncoder"
            )
        os.environ["HF_HUB_OFFLINE"] = "1"  # weights come from the folder, never from a hub
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise RerankerError(f"reranker 'cross-encoder' needs sentence-transformers ({exc})") from None
        try:
            self._model = CrossEncoder(str(folder), local_files_only=True, device=device or _device())
        except (OSError, ValueError) as exc:
            raise RerankerError(
                f"reranker 'cross-encoder:{path}': cannot load a CrossEncoder from {folder}: {exc}"
            ) from None
        self.batch_size = batch_size
        self.model_id = f"cross-encoder:{folder.resolve()}@{weights_digest(folder)}"

    def _score_sync(self, query: str, passages: Sequence[str]) -> list[float]:
        out = self._model.predict([(query, p) for p in passages], batch_size=self.batch_size, show_progress_bar=False)
        return [float(x) for x in out]

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.to_thread(self._score_sync, query, passages)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@register_reranker("cross-encoder")
def _cross_encoder(model: ChatModel | None = None, path: str | None = None, **options: Any) -> Reranker:
    # ``model`` (a ChatModel) is meaningless for a cross-encoder and ignored.
    if not path:
        raise RerankerError("reranker 'cross-encoder' needs a local folder: cross-encoder:PATH")
    return CrossEncoderReranker(path, **options)
