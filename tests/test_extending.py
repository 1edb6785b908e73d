"""Extending bcas from a user's own folder: a new backend, dataset format, retrieval mode,
MADARA treatment and run kind, one registration each in a temporary ``conftest.py``, and
a grid that uses them all, run end to end through the plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from bcas.testing.project import grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

CONFTEST = '''
import json
from pathlib import Path

from bcas.assess import treatment
from bcas.assess.pipeline import TreatmentOutcome, _generate_from
from bcas.config import AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.formats import Format, register_format
from bcas.grids import Grid, GridEntry, register_grid
from bcas.run.pipelines import ItemKind
from bcas.items import Document, Item
from bcas.llm import register_backend
from bcas.llm.base import ChatRequest
from bcas.records import Answer
from bcas.registry import RETRIEVAL_MODES, RUN_KINDS
from bcas.testing.mock import MockModel


class Echo(MockModel):
    """A backend of the user's: the mock's gold answers under another name."""

    def __init__(self, model=None, **options):
        super().__init__("gold")
        self.model_id = "echo"


def read_tsv(path):
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        question, answer, title, text = line.split("\\t")
        yield n, Item(f"t{n}", question, (answer,), (Document(f"t{n}::0", title, text),))


async def first_document(ctx):
    answer, raw = await _generate_from(ctx, [0], "first")
    return TreatmentOutcome(answer, raw, selected=[0])


def reversed_bm25(retriever, query, n, exclude=None):
    return list(reversed(retriever.lexical(query, n, exclude)))


class ClosedBook(ItemKind):
    """A run kind of the user's: the question alone, no retrieval, one constrained answer."""

    def needs_retriever(self, config):
        return False

    async def answer(self, ctx, item, config):
        """The answer alone: the engine grades it and builds its record (bcas.records.build_record)."""
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        request = ChatRequest([{"role": "user", "content": f"Question: {item.question}\\nAnswer the question now."}],
                              max_tokens=32, json_schema=schema, seed=config.seed)
        result = await ctx.model.chat(request)
        prediction = json.loads(result.text)["answer"]
        return Answer(prediction=prediction, method="closed-book", model=ctx.model.model_id, label="closed-book",
                      tokens_in=result.prompt_tokens, tokens_out=result.completion_tokens, llm_calls=1,
                      stop_reason="answered")

    def check(self, config, records):
        return [f"{r['item_id']}: searched" for r in records if r.get("searches_used")]


# One registration each:
register_backend("echo", Echo, label="echo", concurrency=2)
register_format(Format("qa-tsv", "question, answer, title, text per line", read_tsv, lambda keys: False))
RETRIEVAL_MODES.register("bm25-reversed", reversed_bm25, label="bm25rev", lexical=True)
treatment("first-doc")(first_document)
RUN_KINDS.register("closed-book", ClosedBook(), per_item=True, prompts=(), label="closed-book")

register_grid(Grid("mine", (
    GridEntry("bcas", RunConfig(budget=Budget(max_searches=1, max_total_tokens=400),
                                retrieval=RetrievalConfig(mode="bm25-reversed", k=2)), reference=True),
    GridEntry("madara", RunConfig(assess=AssessConfig(method="first-doc", doc_source="item", calibration_n=1))),
    GridEntry("closed-book", RunConfig(budget=Budget(max_searches=0, max_total_tokens=64))),
), datasets=("qa-tsv:DATA",), limit=None))
'''


def test_one_registration_each_from_a_conftest(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    data = pytester.path / "mine.tsv"
    lines = [
        f"Which greek letter is project {i} named after?\talpha\tProject {i}\tProject {i} is named alpha."
        for i in range(4)
    ]
    grid_project(pytester.path, CONFTEST.replace("DATA", str(data)), files={data.name: "\n".join(lines) + "\n"})
    run_dir = pytester.path / "run"
    result = pytester.runpytest(
        "--bcas-grid", "mine", "--bcas-model", "echo", "--bcas-report", str(run_dir), "-p", "no:cacheprovider", "-v"
    )
    result.assert_outcomes(passed=3)
    help_text = pytester.runpytest("--help").stdout.str()
    for name in ("echo", "qa-tsv", "bm25-reversed", "first-doc", "closed-book", "mine"):
        assert name in help_text  # pytest --help lists what is registered
    records = read_records(run_dir)
    assert len(records) == 12 and {r["model"] for r in records} == {"echo"}
    bcas_recs = [r for r in records if r["method"] == "bcas"]
    closed = [r for r in records if r["method"] == "closed-book"]
    assert len(closed) == 4 and {r["label"] for r in closed} == {"closed-book"}
    assert all(r["searches_used"] == 0 and r["llm_calls"] == 1 and r["correct_em"] for r in closed)
    assert len({r["prompt_hash"] for r in closed}) == 1 and closed[0]["prompt_hash"] != bcas_recs[0]["prompt_hash"]
    madara_recs = [r for r in records if r["method"] == "madara"]
    assert {r["label"] for r in bcas_recs} == {"bm25rev/s1/t400"}  # the mode's declared label
    assert all(r["config"]["retrieval"]["mode"] == "bm25-reversed" for r in bcas_recs)
    assert {r["extra"]["assess_method"] for r in madara_recs} == {"first-doc"}
    assert all(r["extra"]["context_doc_ids"] == [f"{r['item_id']}::0"] for r in madara_recs)
    assert all(r["prediction"] == "alpha" for r in records)  # the echo backend answers the gold answer
