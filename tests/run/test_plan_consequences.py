"""The run plan: what decides an answer's identity and how many items a case gets.

A seed or a corpus left out of a case's identity would let a resume reuse answers made
under another seed or over another collection; a limit read from the wrong place would run
more (or fewer) items than asked.
"""

from __future__ import annotations

from pathlib import Path

from bcas.run.plan import DEFAULT_LIMIT, make_plan
from bcas.run.settings import build_settings


def _plan(tmp_path: Path, **given):
    values = {"model": "mock:gold", "grid": "smoke", **given}
    return make_plan(build_settings(values, tmp_path))


def test_the_seed_and_the_corpus_are_part_of_every_cases_identity(tmp_path):
    base = _plan(tmp_path)
    case = base.cases[0]
    first = base.identity(case)
    assert first == base.identity(case)  # the same settings: the same identity
    other_seed = _plan(tmp_path, seed="7")
    assert other_seed.identity(other_seed.cases[0]).config_id != first.config_id
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "d1", "contents": "A passage."}\n')
    with_corpus = _plan(tmp_path, corpus=str(corpus))
    # a MADARA case that read each item's own documents retrieves them from the corpus: another identity
    madara = next(c for c in base.cases if c.entry.kind == "madara" and c.entry.config.assess.doc_source == "item")
    madara_corpus = next(c for c in with_corpus.cases if c.id == madara.id)
    changed = with_corpus.identity(madara_corpus)
    assert changed.config_id != base.identity(madara).config_id and changed.config.assess.doc_source == "retrieval"
    # a BCAS case searches a collection either way: the corpus is in its dataset, not its configuration
    assert with_corpus.identity(with_corpus.cases[0]).config_id == first.config_id
    # a fingerprint given is the one used; none given is the model's own, computed once
    assert base.identity(case, "fp:given").fingerprint == "fp:given"
    assert base.identity(case).fingerprint == first.fingerprint != "fp:given"


def test_a_run_limit_wins_over_the_grids_and_the_grids_over_the_default(tmp_path):
    plan = _plan(tmp_path)
    case = plan.cases[0]
    from bcas.grids import get_grid

    grid_limit = get_grid("smoke").limit or DEFAULT_LIMIT
    assert plan.limit_for(case) == grid_limit
    # limits both below and above the grid's own, so the run's limit is seen to win either way
    for limit in (1, grid_limit + 1, grid_limit + 7):
        assert _plan(tmp_path, limit=str(limit)).limit_for(case) == limit


def test_grades_of_two_judges_are_kept_apart_and_the_same_judge_is_not_asked_twice(tmp_path, monkeypatch):
    """A judge's grades carry its model's identity: another judge grades again, the same one does not."""
    import bcas
    from bcas.grids import GRIDS, SMOKE
    from bcas.grids.table import Grid, GridEntry, register_grid

    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    saved = GRIDS.snapshot()
    try:
        bm25 = next(e for e in SMOKE.entries if e.config.label == "bm25/s1/t2k")
        register_grid(Grid("judge_ids", (GridEntry("bcas", bm25.config),), datasets=("hotpotqa",), limit=2))
        common = {"grids": "judge_ids", "models": "mock:gold", "out": tmp_path / "run"}
        first = bcas.evaluate(**common, judge="mock:gold")
        (grade_id,) = {g for r in first.records for g in r["grades"]}
        assert grade_id.startswith("mock:gold|prompt:") and len(first.records) == 2
        again = bcas.evaluate(**common, judge="mock:gold")
        assert {g for r in again.records for g in r["grades"]} == {grade_id}  # nothing graded twice
        other = bcas.evaluate(**common, judge="mock:random")
        assert all(len(r["grades"]) == 2 and grade_id in r["grades"] for r in other.records)  # beside the first's
        same = bcas.evaluate(**common, judge="same")  # the answering model: mock:gold, already a judge here
        assert all(len(r["grades"]) == 2 for r in same.records)
    finally:
        GRIDS.restore(saved)


def test_a_cases_identity_carries_its_models_fingerprint_verified_as_the_preflight_says(tmp_path, monkeypatch):
    """Answers are reused only under the same model fingerprint: an identity without it would let
    one model's records stand for another's; with preflight on, the fingerprint asks the server
    what it serves, once per model."""
    import bcas.llm.fingerprint as fingerprint

    asked: list[tuple[str, str | None, bool]] = []

    def recorded(backend, model, *, base_url=None, api_key_env=None, verify=True, loaded=None):
        asked.append((backend, model, verify))
        return f"fp:{backend}:{model}"

    monkeypatch.setattr(fingerprint, "model_fingerprint", recorded)
    plan = _plan(tmp_path)
    case = plan.cases[0]
    assert plan.identity(case).fingerprint == "fp:mock:gold" == plan.identity(plan.cases[1]).fingerprint
    assert asked == [("mock", "gold", True)]  # once per model, verified
    other = _plan(tmp_path, model="mock:random")
    assert other.identity(other.cases[0]).fingerprint == "fp:mock:random"
    asked.clear()
    unverified = _plan(tmp_path, **{"no-preflight": True})
    unverified.identity(unverified.cases[0])
    assert asked == [("mock", "gold", False)]
