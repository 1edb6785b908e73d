"""Extending bcas from a user's own folder: a new backend, dataset format, retrieval mode
and MADARA treatment, one registration each in a temporary ``conftest.py``, and a grid
that uses them all, run end to end through the plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bcas.agent  # noqa: F401  (loaded once: pytester runs in this process)
import bcas.harness.runner  # noqa: F401
import bcas.report.html  # noqa: F401
import bcas.retrieval  # noqa: F401

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

CONFTEST = '''
from pathlib import Path

from bcas.assess import treatment
from bcas.assess.pipeline import TreatmentOutcome, _generate_from
from bcas.config import AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.formats import Format, register_format
from bcas.grids import Grid, GridEntry, register_grid
from bcas.items import Document, Item
from bcas.llm import register_backend
from bcas.registry import RETRIEVAL_MODES
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


# One registration each:
register_backend("echo", Echo, label="echo", concurrency=2)
register_format(Format("qa-tsv", "question, answer, title, text per line", read_tsv, lambda keys: False))
RETRIEVAL_MODES.register("bm25-reversed", reversed_bm25, label="bm25rev", lexical=True)
treatment("first-doc")(first_document)

register_grid(Grid("mine", (
    GridEntry("bcas", RunConfig(budget=Budget(max_searches=1, max_total_tokens=400),
                                retrieval=RetrievalConfig(mode="bm25-reversed", k=2)), reference=True),
    GridEntry("madara", RunConfig(assess=AssessConfig(method="first-doc", doc_source="item", calibration_n=1))),
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
    data.write_text("\n".join(lines) + "\n")
    pytester.makeconftest(CONFTEST.replace("DATA", str(data)))
    pytester.makepyfile(test_grids=(REPO / "benchmarks" / "test_grids.py").read_text())
    run_dir = pytester.path / "run"
    result = pytester.runpytest(
        "--bcas-grid", "mine", "--bcas-model", "echo", "--bcas-report", str(run_dir), "-p", "no:cacheprovider", "-v"
    )
    result.assert_outcomes(passed=2)
    help_text = pytester.runpytest("--help").stdout.str()
    for name in ("echo", "qa-tsv", "bm25-reversed", "first-doc", "mine"):
        assert name in help_text  # pytest --help lists what is registered
    records = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == 8 and {r["model"] for r in records} == {"echo"}
    bcas_recs = [r for r in records if r["method"] == "bcas"]
    madara_recs = [r for r in records if r["method"] == "madara"]
    assert {r["label"] for r in bcas_recs} == {"bm25rev/s1/t400"}  # the mode's declared label
    assert all(r["config"]["retrieval"]["mode"] == "bm25-reversed" for r in bcas_recs)
    assert {r["extra"]["assess_method"] for r in madara_recs} == {"first-doc"}
    assert all(r["extra"]["context_doc_ids"] == [f"{r['item_id']}::0"] for r in madara_recs)
    assert all(r["prediction"] == "alpha" for r in records)  # the echo backend answers the gold answer
