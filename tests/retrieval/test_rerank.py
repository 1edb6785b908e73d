"""Rerankers: the Yes/No margin, error paths, and the real generative reranker on SmolLM2."""

from __future__ import annotations

import asyncio
import importlib.util
import math

import pytest

from bcas.config import RetrievalConfig
from bcas.data import Document
from bcas.retrieval import RerankerError, build_retriever, load_reranker
from bcas.retrieval.rerank import LLMReranker, load_prompt, yes_no_margin
from bcas.testing.scripted import ScriptedModel


def test_margin_pools_spellings_and_bounds_missing_words():
    row = {"Yes": math.log(0.3), " yes": math.log(0.1), "No": math.log(0.4), "The": math.log(0.2)}
    assert yes_no_margin(row) == pytest.approx(math.log(0.4) - math.log(0.4))
    only_yes = {"Yes": -0.1, "Maybe": -3.0}
    assert yes_no_margin(only_yes) == pytest.approx(-0.1 - (-3.0))  # "No" takes the smallest listed value
    assert yes_no_margin({"No.": -0.2, "I": -2.0}) == pytest.approx(-2.0 - (-0.2))
    with pytest.raises(RerankerError):
        yes_no_margin({})


def test_prompt_template_has_both_fields():
    template = load_prompt()
    assert "{question}" in template and "{passage}" in template
    assert "Yes or No" in template


def test_llm_reranker_refuses_models_without_logprobs():
    with pytest.raises(RerankerError, match="log-probabilities"):
        load_reranker("llm", model=ScriptedModel(["Yes"], model_id="no-logprobs"))
    # A model that claims log-probability support but returns none.
    reranker = load_reranker("llm", model=ScriptedModel(["Yes"], model_id="silent", supports_logprobs=True))
    with pytest.raises(RerankerError, match="no log-probabilities"):
        asyncio.run(reranker.score("q", ["p"]))


def test_unknown_reranker_lists_the_registered_ones():
    with pytest.raises(RerankerError, match=r"unknown reranker 'cohere'.*bge-reranker-v2-m3.*llm"):
        load_reranker("cohere")


@pytest.mark.skipif(importlib.util.find_spec("FlagEmbedding") is not None, reason="FlagEmbedding is installed")
def test_bge_reranker_without_flagembedding_fails_instead_of_falling_back(tmp_path):
    docs = [Document("a", "A", "alpha"), Document("b", "B", "beta")]
    with pytest.raises(RerankerError, match=r"FlagEmbedding.*bcas\[gpu\]"):
        build_retriever(
            docs,
            RetrievalConfig(mode="hybrid_rerank", reranker="bge-reranker-v2-m3"),
            embedder="minilm",
            cache_dir=tmp_path,
            progress=False,
        )


QUESTION = "When did the Apollo 11 mission land on the Moon?"
RELEVANT = "Apollo 11 landed on the Moon on July 20, 1969."
IRRELEVANT = ["The violin is a wooden string instrument.", "Tokyo is the capital of Japan."]


def test_llm_reranker_on_smollm2_puts_the_relevant_passage_first(embedded_model):
    reranker = LLMReranker(embedded_model)
    passages = [*IRRELEVANT, RELEVANT]  # relevant one last on input
    scores = asyncio.run(reranker.score(QUESTION, passages))
    assert len(scores) == 3 and all(math.isfinite(s) for s in scores)
    order = sorted(range(3), key=lambda i: -scores[i])
    assert order[0] == 2, scores


def test_hybrid_rerank_pipeline_with_the_real_llm_reranker(tmp_path, embedded_model, minilm_embedder):
    """Hybrid retrieval re-ranked by the real model puts the relevant passage first; closing
    the retriever leaves the caller's model usable (catches a close() that shuts a model
    the retriever did not create: the scores after it raise)."""
    docs = [
        Document("violin", "Violin", IRRELEVANT[0]),
        Document("tokyo", "Tokyo", IRRELEVANT[1]),
        Document("apollo", "Apollo 11", RELEVANT),
    ]
    retriever = build_retriever(
        docs,
        RetrievalConfig(mode="hybrid_rerank", candidates=3, k=3),
        model=embedded_model,
        embedder=minilm_embedder,
        cache_dir=tmp_path,
        progress=False,
    )
    assert retriever.reranker is not None and retriever.reranker.model_id.startswith("llm:")
    hits = retriever.search(QUESTION)
    assert [h.doc_id for h in hits][0] == "apollo"
    assert hits[0].score > hits[1].score
    retriever.close()
    # The caller's model stays open (the retriever did not create it): it still scores,
    # and still ranks the relevant passage first.  A close() that shut the caller's model
    # makes this raise RerankerError ("the embedded model was closed").
    after = asyncio.run(LLMReranker(embedded_model).score(QUESTION, [RELEVANT, IRRELEVANT[0]]))
    assert len(after) == 2 and all(math.isfinite(s) for s in after)
    assert after[0] > after[1], after
