"""What a MADARA or BCAS prompt may know: the question, the documents and the dataset's task.

Each test states one side door an answer used to reach a model by, and fails where it is open:
the task chosen per item from its gold answer (the yes/no prompt and a ``{yes, no}`` enum for
exactly the items whose gold is yes/no), documents kept in the file's order (ConflictQA lists
its memory side first), retrieval ties broken by the file's order, the RSC probe calibrating on
evaluated items, a degenerate profile routed as stochastic, a CoT reply schema that does not
require the confidence its prompt asks for.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.agent import run_bcas
from bcas.assess.agents import AssessDocument, score_schema
from bcas.assess.documents import gather_documents
from bcas.assess.pipeline import answer_madara, run_nf_for_probe
from bcas.assess.rsc.profile import Triple, profile_from_triples
from bcas.config import AgentConfig, AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item, load_calibration, load_dataset, load_evaluation
from bcas.grids import GRIDS
from bcas.llm.base import ChatRequest
from bcas.retrieval import build_retriever
from bcas.testing.scripted import FakeRetriever, ScriptedModel

DOCS = (
    Document("x::0", "Kiss and Tell", "Kiss and Tell is a 1945 film starring Shirley Temple."),
    Document("x::1", "Shirley Temple", "Shirley Temple served as Chief of Protocol."),
)
YES = Item("yes-item", "Did Shirley Temple star in Kiss and Tell?", ("yes",), DOCS)
OTHER = Item("other-item", "What post did Shirley Temple hold?", ("Chief of Protocol",), DOCS)


def _reply(request: ChatRequest, index: int) -> str:
    props = (request.json_schema or {}).get("properties", {})
    if "action" in props:
        return json.dumps({"thought": "look", "action": "search_database", "query": "Shirley Temple"})
    if "score" in props:
        return json.dumps({"score": 3, "reason": "r"})
    return json.dumps({"answer": "Chief of Protocol"}) if "answer" in props else "Chief of Protocol"


def _generations(model: ScriptedModel) -> list[str]:
    """The generator requests a model got (system prompt and answer schema), as text."""
    return [
        json.dumps([r.messages[0]["content"], r.json_schema], sort_keys=True)
        for r in model.requests
        if "assessment team" not in str(r.messages[0]["content"]) and "DOCUMENTS:" in str(r.messages[-1]["content"])
    ]


def test_evalnf_asks_every_calibration_item_with_the_datasets_task() -> None:
    """The router's EvalNF: a yes/no gold item of a multi-hop file gets the multi-hop prompt, as every other."""
    model = ScriptedModel(_reply)
    docs = [[AssessDocument.from_any(d) for d in DOCS]] * 2
    asyncio.run(run_nf_for_probe(model, [YES, OTHER], docs, AssessConfig(), task="multi-hop"))
    prompts = _generations(model)
    assert len(prompts) == 2 and prompts[0] == prompts[1], "EvalNF chose a prompt from an item's gold"
    assert "enum" not in prompts[0]


def test_a_madara_treatment_asks_every_item_with_the_datasets_task() -> None:
    model = ScriptedModel(_reply)
    config = RunConfig(assess=AssessConfig(method="nf", doc_source="item"))
    for item in (YES, OTHER):
        asyncio.run(answer_madara(item, model, None, config, task=None))
    prompts = _generations(model)
    assert len(prompts) == 2 and prompts[0] == prompts[1]


def test_the_bcas_loops_assessment_tool_asks_with_the_datasets_task() -> None:
    """PDE on the search tool: its generations for a yes/no gold item are the dataset's task's."""
    config = RunConfig(
        budget=Budget(max_searches=1, max_total_tokens=4000),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(assess="pde"),
        assess=AssessConfig(n_docs=2, score_max_tokens=16),
    )
    seen = []
    for item in (YES, OTHER):
        model = ScriptedModel(_reply)
        passages = [(d.id, d.title, d.text) for d in DOCS]
        asyncio.run(run_bcas(item, model, FakeRetriever(passages, k=2), config, task="multi-hop"))
        seen.append(sorted(set(_generations(model))))
    assert seen[0] and seen[0] == seen[1]


def test_run_json_records_each_datasets_task(tmp_path: Path) -> None:
    rows = [
        {"id": f"q{i}", "question": f"Is {w} a colour?", "answers": [a], "documents": [{"id": f"q{i}::0", "title": w, "text": f"{w} is a colour."}]}
        for i, (w, a) in enumerate([("red", "yes"), ("blue", "yes"), ("stone", "no")])
    ]  # fmt: skip
    path = tmp_path / "colours.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bcas.evaluate(grids="rsc", models="mock:gold", datasets=f"colours={path}", out=tmp_path / "run", calibration_n=2)
    manifest = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    tasks = manifest["sessions"][-1]["dataset_tasks"]
    assert tasks["colours"] == {"task": "yes-no-conflict", "scoring": "label", "task_source": "file"}


def test_a_mixed_file_keeps_its_formats_task_and_says_so(tmp_path: Path) -> None:
    """Yes/no golds beside span golds (HotpotQA's mix): the format's factoid task, named as the format's."""
    rows = [
        {"id": f"q{i}", "question": q, "answers": [a], "documents": [{"id": f"q{i}::0", "title": "t", "text": "x"}]}
        for i, (q, a) in enumerate([("Is red a colour?", "yes"), ("Which colour is grass?", "green")])
    ]  # fmt: skip
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ds = load_dataset(str(path))
    assert (ds.task, ds.scoring, ds.task_source) == ("factoid", "qa", "format")


def _conflict_item(i: int) -> Item:
    """An item listed as ConflictQA lists them: the two memory-side documents first."""
    docs = tuple(
        Document(f"c{i}::{j}", "", f"Document {j} of item {i}: side {'memory' if j < 2 else 'counter'}.")
        for j in range(4)
    )
    return Item(f"c{i}", f"Question {i}?", ("yes",), docs)


def test_madara_orders_an_items_documents_by_a_seeded_shuffle_not_the_files_layout() -> None:
    config = AssessConfig(doc_source="item")
    firsts = set()
    for i in range(12):
        item = _conflict_item(i)
        order = [d.text for d in asyncio.run(gather_documents(item, None, config, seed=7))]
        relaid = replace(item, documents=tuple(reversed(item.documents)))
        assert [d.text for d in asyncio.run(gather_documents(relaid, None, config, seed=7))] == order
        firsts.add("memory" in order[0])
    assert firsts == {True, False}, "the memory side always comes first"


def test_madara_orders_retrieved_documents_by_score_then_the_seeded_shuffle() -> None:
    class Scored:
        def search(self, query: str, k: int | None = None, exclude_ids: Any = ()) -> list[dict[str, Any]]:
            return [
                {"doc_id": "a", "title": "", "text": "tied one", "score": 1.0},
                {"doc_id": "b", "title": "", "text": "best", "score": 2.0},
                {"doc_id": "c", "title": "", "text": "tied two", "score": 1.0},
            ]

    class Relaid(Scored):
        def search(self, query: str, k: int | None = None, exclude_ids: Any = ()) -> list[dict[str, Any]]:
            return list(reversed(super().search(query, k)))

    config = AssessConfig(doc_source="retrieval", n_docs=3)
    one = [d.doc_id for d in asyncio.run(gather_documents(YES, Scored(), config))]
    assert one[0] == "b" and one == [d.doc_id for d in asyncio.run(gather_documents(YES, Relaid(), config))]


def test_equal_bm25_scores_are_ordered_by_text_not_by_place_in_the_collection() -> None:
    texts = [f"Shirley Temple film number {w}." for w in ("one", "two", "three", "four")]
    forward = [Document(f"d{j}", "", t) for j, t in enumerate(texts)]
    backward = [Document(f"e{j}", "", t) for j, t in enumerate(reversed(texts))]
    config = RetrievalConfig(mode="bm25", phrase_boost=False, k=2)
    hits = [
        [h.text for h in build_retriever(docs, config).search("Shirley Temple film")] for docs in (forward, backward)
    ]
    assert hits[0] == hits[1], "tied chunks follow the collection's layout"


def test_madara_heldout_evaluates_no_item_its_rsc_probe_calibrates_on() -> None:
    grid = GRIDS["madara_heldout"]
    calibration = {i.id for i in load_calibration("triviaqa", 10).items}
    evaluated = {i.id for i in load_evaluation("triviaqa", None, 0, grid.holdout_for(10)).items}
    assert calibration and evaluated and not calibration & evaluated
    assert len(calibration | evaluated) == len(load_dataset("triviaqa"))


def test_a_degenerate_rsc_profile_is_uninformative_and_isolates() -> None:
    """Every score at the floor (MADARA Table 4, ‡): not stochastic, and routed to PDE."""
    triples = [Triple(q, d, "relevance", 0.0, (0.0, 0.0, 0.0)) for q in range(4) for d in range(5)]
    profile = profile_from_triples(triples, em_nf=0.9, n_bootstrap=0)
    assert profile.classification == "uninformative" and profile.state == "uninformative"
    decision = profile.decision()
    assert decision.mode == "PDE" and "uninformative" in decision.reason
    informative = [
        Triple(q, d, "relevance", float(d), (float(d), float(4 - d), float(d % 2))) for q in range(4) for d in range(5)
    ]
    assert profile_from_triples(informative, em_nf=0.9, n_bootstrap=0).classification != "uninformative"


def test_the_cot_schema_requires_the_confidence_its_prompt_asks_for() -> None:
    schema = score_schema(cot=True)
    assert schema["required"] == ["reasoning_steps", "score", "confidence"]
    assert list(schema["properties"]) == schema["required"]  # decoding order: reasoning, score, confidence


@pytest.mark.parametrize("exclude_seen", [False, True])
def test_the_search_tool_promises_unseen_passages_only_when_it_holds_them_back(exclude_seen: bool) -> None:
    config = RunConfig(
        budget=Budget(max_searches=2, max_total_tokens=2000),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(exclude_seen=exclude_seen),
    )
    model = ScriptedModel(_reply)
    asyncio.run(run_bcas(OTHER, model, FakeRetriever([("z", "Zebra", "Zebras are striped.")], k=2), config))
    text = "\n".join(str(m.get("content") or "") for r in model.requests for m in r.messages)
    text += json.dumps([r.tools for r in model.requests])
    assert ("not seen" in text) == exclude_seen and ("no new passages" in text) == exclude_seen
    assert "search_database" in text
