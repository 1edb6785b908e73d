"""Citations (``AgentConfig.cite``): the bounded ``cite`` field of the final answer, the record's
cited documents, and citation precision / recall against gold evidence (ALCE §2.2, document level)."""

from __future__ import annotations

import asyncio
import json
import re
from itertools import product
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bcas.agent import run_bcas
from bcas.agent.protocol import CITE_ENUM_MAX, CITE_ID_MAX_CHARS, CITE_MAX_ITEMS, answer_schema, parse_cite
from bcas.agent.records import record_from_trajectory
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.data import Document, Item
from bcas.llm.base import ChatRequest
from bcas.metrics import metric_columns
from bcas.metrics.trajectory import bcas_trajectory, citation_precision_recall
from bcas.testing.scripted import FakeRetriever, ScriptedModel

PASSAGES = [
    ("d1", "Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 comedy film starring Shirley Temple."),
    ("d2", "Shirley Temple", "Shirley Temple Black served as Chief of Protocol of the United States."),
    ("d3", "Meet Corliss Archer", "Meet Corliss Archer is a radio program."),
    ("d4", "Janet Waldo", "Janet Waldo voiced Corliss Archer on radio."),
]
ITEM = Item(
    id="q1",
    question="What position was held by the woman who starred in Kiss and Tell?",
    answers=("Chief of Protocol",),
    documents=tuple(Document(d, t, x) for d, t, x in PASSAGES),
)
GOLD = [frozenset({"d1"}), frozenset({"d2"}), frozenset({"d4"})]


def cite_config(**agent: Any) -> RunConfig:
    return RunConfig(
        budget=Budget(max_searches=2, max_total_tokens=2000),
        retrieval=RetrievalConfig(k=2),
        agent=AgentConfig(cite=True, **agent),
    )


def scripted_citing(cited: list[str]) -> ScriptedModel:
    """Searches twice, then answers citing ``cited`` (the answer request's schema is checked by the caller):
    a document id of ``PASSAGES`` there stands for the opaque id its passage was shown under."""

    def script(request: ChatRequest, i: int) -> str:
        if request.json_schema and "answer" in request.json_schema["properties"]:
            shown = "\n".join(str(m.get("content") or "") for m in request.messages)
            return json.dumps({"answer": "Chief of Protocol", "cite": [shown_as(shown, c) for c in cited]})
        query = ["Kiss and Tell film", "Shirley Temple Protocol"][min(i, 1)]
        return json.dumps({"thought": "look", "action": "search_database", "query": query})

    return ScriptedModel(script)


def shown_as(prompt: str, doc: str) -> str:
    """The opaque id the passage of document ``doc`` was shown under in ``prompt`` (``doc`` itself if none)."""
    title = {d: t for d, t, _ in PASSAGES}.get(doc)
    found = re.search(rf"\(id (p\d+)\) {re.escape(title)}:", prompt) if title else None
    return found.group(1) if found else doc


def test_the_answer_cites_shown_passages_and_the_record_scores_them() -> None:
    model = scripted_citing(["d2", "d1", "nowhere#3", "d2"])
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=2), cite_config(), keep_requests=True))
    assert traj.stop_reason == "max_searches"
    shown = [c for s in traj.steps if s.kind == "search" for c in s.retrieved]
    schema = traj.requests[-1].json_schema
    assert schema is not None and schema["required"] == ["answer", "cite"]
    cite = schema["properties"]["cite"]
    assert cite["maxItems"] == CITE_MAX_ITEMS and cite["items"]["enum"] == list(traj.passage_ids)
    assert "cite" in traj.requests[-1].messages[-1]["content"]  # the cite prompt asked for it
    assert all(re.fullmatch(r"p\d+", c) for c in cite["items"]["enum"])  # opaque ids, never the dataset's
    labels = {chunk: label for label, chunk in traj.passage_ids.items()}
    assert sorted(labels) == sorted(set(shown))  # every passage shown is mapped back to its chunk
    written = [labels["d2#0"], labels["d1#0"], "nowhere#3"]
    assert traj.cite == written  # as written, once each
    assert traj.cited_docs == ["d2", "d1"] and traj.cite_unseen == 1
    record = record_from_trajectory(traj, run_id="t", dataset_name="toy", dataset_hash="h")
    assert record.extra["cite"] == written and record.extra["passage_ids"] == traj.passage_ids
    found = bcas_trajectory(record.steps, GOLD, record.extra)
    # precision: 2 gold documents of 3 cited (one id named nothing shown); recall: 2 of 3 gold documents
    assert found["citation_precision"] == 2 / 3 and found["citation_recall"] == 2 / 3


def test_without_cite_nothing_changes() -> None:
    model = scripted_citing(["d1#0"])
    config = RunConfig(budget=Budget(max_searches=2, max_total_tokens=2000), retrieval=RetrievalConfig(k=2))
    traj = asyncio.run(run_bcas(ITEM, model, FakeRetriever(PASSAGES, k=2), config, keep_requests=True))
    schema = traj.requests[-1].json_schema
    assert schema is not None and list(schema["properties"]) == ["answer"]
    assert "cite" not in traj.requests[-1].messages[-1]["content"]
    assert traj.cite is None
    record = record_from_trajectory(traj, run_id="t", dataset_name="toy", dataset_hash="h")
    assert "cite" not in record.extra and "citation_precision" not in bcas_trajectory(record.steps, GOLD, record.extra)
    assert "cite" not in record.config["agent"] and "abstain" not in record.config["agent"]


def test_the_cite_option_is_part_of_the_configuration_identity() -> None:
    plain = RunConfig()
    on = RunConfig(agent=AgentConfig(cite=True))
    assert "cite" not in plain.to_dict()["agent"]  # off: the id configurations always had
    assert on.config_id != plain.config_id and on.label.endswith("/cite")
    assert RunConfig.from_dict(on.to_dict()) == on and RunConfig.from_dict(plain.to_dict()) == plain
    assert RunConfig(agent=AgentConfig(abstain=True)).config_id not in (plain.config_id, on.config_id)


def test_the_cite_schema_stays_bounded() -> None:
    few = answer_schema(None, [f"d{i}#0" for i in range(3)])["properties"]["cite"]
    assert few["items"]["enum"] == ["d0#0", "d1#0", "d2#0"] and few["maxItems"] == CITE_MAX_ITEMS
    # a small allowance: the answer gets half of it, the list as many ids as fit the rest (at least one)
    tight = answer_schema(40, [f"d{i}#0" for i in range(3)])
    assert tight["properties"]["answer"]["maxLength"] == 32 and tight["properties"]["cite"]["maxItems"] == 2
    long_ids = [f"{'a' * 24}#{i}" for i in range(3)]
    assert answer_schema(48, long_ids)["properties"]["cite"]["maxItems"] == 1
    many = answer_schema(40, [f"d{i}#0" for i in range(CITE_ENUM_MAX + 1)])["properties"]["cite"]
    assert many["items"] == {"type": "string", "maxLength": CITE_ID_MAX_CHARS}
    assert "cite" not in answer_schema(40, [])["properties"]  # nothing shown: nothing to cite


def test_cite_is_read_from_json_and_from_a_cite_line() -> None:
    assert parse_cite('{"answer": "x", "cite": ["a#0", "b#1", "a#0"]}') == ["a#0", "b#1"]
    assert parse_cite("Answer: x\nCite: [a#0], b#1; c#2") == ["a#0", "b#1", "c#2"]
    assert parse_cite("Answer: x") == []
    assert len(parse_cite(json.dumps({"cite": [f"i{n}" for n in range(20)]}))) == CITE_MAX_ITEMS


doc_ids = st.sampled_from(["a", "b", "c", "d", "e"])


@given(
    cited=st.lists(doc_ids, max_size=6),
    unseen=st.integers(0, 3),
    groups=st.lists(st.frozensets(doc_ids, min_size=1, max_size=2), max_size=4),
)
def test_citation_precision_and_recall_by_enumeration(
    cited: list[str], unseen: int, groups: list[frozenset[str]]
) -> None:
    precision, recall = citation_precision_recall(cited, groups, unseen)
    if not groups:
        assert (precision, recall) == (None, None)
        return
    distinct = set(cited)
    gold = {d for g in groups for d in g}
    want_p = None if not distinct and not unseen else len(distinct & gold) / (len(distinct) + unseen)
    want_r = sum(1 for g in groups if any(d in g for d in distinct)) / len(groups)
    assert precision == want_p and recall == want_r


def test_the_summary_row_averages_citations_over_records_with_gold() -> None:
    def rec(item: str, extra: dict[str, Any]) -> dict[str, Any]:
        return {"item_id": item, "prediction": "x", "answers": ["x"], "correct_em": True, "extra": extra}

    recs = [
        rec("a", {"evidence_recall": 1.0, "cite": ["1"], "citation_precision": 1.0, "citation_recall": 0.5}),
        rec("b", {"evidence_recall": 0.5, "cite": [], "citation_precision": None, "citation_recall": 0.0}),
        rec("c", {"cite": ["2"]}),  # no gold: not measurable
    ]
    cols = metric_columns(recs)
    assert cols.cite_n == 2 and cols.citation_precision == 1.0 and cols.citation_recall == 0.25
    assert metric_columns([rec("d", {"evidence_recall": 1.0})]).citation_recall is None


def test_enumeration_helper_is_sane() -> None:
    """The brute force above sees every gold group: a check of the check on all small cases."""
    for cited in product("ab", repeat=2):
        p, r = citation_precision_recall(list(cited), [frozenset({"a"})])
        assert r == 1.0 if "a" in cited else r == 0.0
        assert p == (1.0 if set(cited) == {"a"} else (0.5 if "a" in cited else 0.0))


def test_citations_appear_in_the_beyond_accuracy_table_and_the_terminal_lines() -> None:
    from bcas.records import Record
    from bcas.report.html_metrics import metric_lines, metrics_section
    from bcas.report.summary import summarize

    def record(item: str, extra: dict[str, Any]) -> dict[str, Any]:
        row = Record(
            run_id="r", model="m", config_id="c", label="s1/cite", dataset="d", dataset_hash="h", item_id=item,
            question="?", answers=["x"], prediction="x", correct_em=True, f1=1.0, model_fingerprint="fp",
        ).to_dict()  # fmt: skip
        row["extra"] = extra
        return row

    cited = [
        record("a", {"evidence_recall": 1.0, "cite": ["1"], "citation_precision": 1.0, "citation_recall": 0.5}),
        record("b", {"evidence_recall": 0.5, "cite": ["<2>"], "citation_precision": 0.5, "citation_recall": 1.0}),
    ]
    (row,) = summarize(cited)
    html = metrics_section([row])
    assert "citation precision / recall %" in html and "75.0 / 75.0 (n=2)" in html
    (line,) = [x for x in metric_lines([row]) if "s1/cite" in x]
    assert "citation precision/recall 75.0 / 75.0 (n=2)" in line
    # Without citations the cell is a dash and the terminal line says nothing of them.
    (plain,) = summarize([record("c", {"evidence_recall": 1.0})])
    assert "citation" not in " ".join(metric_lines([plain]))
    assert metrics_section([plain]).count("<td>—</td>") >= 1
