"""bcas.corpus (--bcas-corpus) and the package data, down to a run through the plugin.

Corpora are written from the shipped samples (tests/support/official.py) in the
FlashRAG, BEIR, our-documents and FEVER wiki-pages layouts.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import pytest

import bcas
from bcas.corpus import (
    InputError,
    check_inputs,
    evidence_recall,
    gold_documents,
    open_corpus,
)
from bcas.data import DatasetError, load_dataset
from bcas.resources import resource_path
from bcas.testing.project import backends, budget_grid, grid_project, preload, read_records

preload()

TESTS_DIR = Path(__file__).resolve().parents[1]
ROOT = TESTS_DIR.parent
sys.path.insert(0, str(TESTS_DIR))
from support import official  # noqa: E402

pytest_plugins = ["pytester"]


def _documents_jsonl(path: Path, name: str = "hotpotqa") -> Path:
    docs = load_dataset(name).documents
    path.write_text(
        "".join(json.dumps({"id": str(j), "title": d.title, "text": d.text}) + "\n" for j, d in enumerate(docs))
    )
    return path


def test_layouts_are_detected_and_hash_the_same_passages_alike(tmp_path: Path) -> None:
    _, flash, _ = official.flashrag_pair(tmp_path / "f", n=2)
    beir = official.beir_corpus(tmp_path / "corpus.jsonl")
    ours = _documents_jsonl(tmp_path / "docs.jsonl")
    corpora = {"flashrag": open_corpus(flash), "beir": open_corpus(beir), "documents": open_corpus(ours)}
    assert {name: c.format.name for name, c in corpora.items()} == {n: n for n in corpora}
    stats = {name: c.scan() for name, c in corpora.items()}
    n = len(load_dataset("hotpotqa").documents)
    assert {s.documents for s in stats.values()} == {n}
    # Same ids, titles and texts: the same hash, whatever the layout, path or formatting.
    assert len({s.hash for s in stats.values()}) == 1
    first = next(iter(corpora["flashrag"]))
    assert not first.title.startswith('"')  # wiki-18's quoted titles are unquoted
    assert open_corpus(f"documents:{ours}").hash == stats["documents"].hash
    changed = tmp_path / "changed.jsonl"
    lines = ours.read_text().splitlines()
    lines[5] = json.dumps({**json.loads(lines[5]), "text": "another text"})
    changed.write_text("\n".join(lines) + "\n")
    assert open_corpus(changed).hash != stats["documents"].hash


def test_fever_wiki_pages_folder_matches_claims_by_page_id(tmp_path: Path) -> None:
    claims, wiki = official.fever(tmp_path / "paper_dev.jsonl", tmp_path / "wiki-pages")
    corpus = open_corpus(wiki)
    assert corpus.format.name == "fever-wiki" and len(corpus.files) == 2
    stats = corpus.scan()
    assert stats.skipped == 1  # the dump's empty first page
    titles = {d.id: d.title for d in corpus}
    assert all("_" not in t and "-LRB-" not in t for t in titles.values())
    ds = load_dataset(claims)
    gold = gold_documents(ds.items, corpus)
    for item in ds.items:
        found = set().union(*gold[item.id]) if gold[item.id] else set()
        assert found == {g for g in item.gold if g in titles}
        assert found  # every sample claim's evidence sentence is in the corpus
    doc = next(d for d in corpus if "-LRB-" in d.id) if any("-LRB-" in i for i in titles) else None
    if doc is not None:
        assert "(" in doc.title and "-LRB-" not in doc.text


def test_gold_documents_by_title_and_evidence_recall(tmp_path: Path) -> None:
    dataset, corpus_path, items = official.flashrag_pair(tmp_path, n=6)
    ds = load_dataset(dataset)
    corpus = open_corpus(corpus_path)
    gold = gold_documents(ds.items, corpus)
    by_id = {d.id: d for d in corpus}
    for item in items:
        want = {d.title for d in item.documents if d.id in item.supporting}
        assert {by_id[i].title for group in gold[item.id] for i in group} == want
    groups = gold[items[0].id]
    one = next(iter(groups[0]))
    assert evidence_recall([], groups) == 0.0
    assert evidence_recall([one, "unrelated"], groups) == pytest.approx(1 / len(groups))
    assert evidence_recall([next(iter(g)) for g in groups], groups) == 1.0
    assert evidence_recall(["x"], ()) is None
    # Without a corpus: each supporting document, by its id in the de-duplicated collection.
    sample = load_dataset("hotpotqa", limit=5)
    own = gold_documents(sample.items)
    assert all(len(own[it.id]) == len(it.supporting) for it in sample.items)


def test_corpus_is_streamed(tmp_path: Path) -> None:
    path = tmp_path / "wiki.jsonl"
    text = "passage words " * 60
    with path.open("w") as fh:
        for j in range(12000):
            fh.write(json.dumps({"id": str(j), "contents": f'"Title {j % 700}"\n{j} {text}'}) + "\n")
    corpus = open_corpus(path)
    tracemalloc.start()
    try:
        stats = corpus.scan()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = path.stat().st_size
    assert stats.documents == 12000 and size > 10_000_000
    assert peak < size / 20, f"peak {peak} bytes scanning a {size}-byte corpus"
    iterator = iter(corpus)
    assert next(iterator).id == "0" and iter(iterator) is iterator  # a generator, not a list


@pytest.mark.parametrize(
    ("rows", "line", "field"),
    [
        ([{"id": "1", "contents": "T\nx"}, {"id": "2"}, {"id": "3", "contents": "U\ny"}], 2, "contents"),
        ([{"id": "1", "contents": "T\nx"}, {"id": None, "contents": "U\ny"}], 2, "id"),
        ([{"id": "1", "contents": "T\nx"}, {"id": "2", "contents": 5}], 2, "contents"),
    ],
)
def test_malformed_corpus_line_names_file_line_and_field(tmp_path: Path, rows: list, line: int, field: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError) as err:
        open_corpus(f"flashrag:{path}").scan()
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field), str(err.value)


def test_corpus_layout_errors(tmp_path: Path) -> None:
    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps({"query_id": "q1", "query": "x"}) + "\n")
    with pytest.raises(DatasetError, match=r"no known corpus layout.*beir, documents, fever-wiki, flashrag"):
        open_corpus(path)
    with pytest.raises(DatasetError, match="no such file"):
        open_corpus(tmp_path / "absent.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="without .jsonl files"):
        open_corpus(tmp_path / "empty")


def test_dataset_hash_folds_in_the_corpus() -> None:
    ds = load_dataset("hotpotqa")
    a, b = ds.with_corpus("a" * 64), ds.with_corpus("b" * 64)
    assert len({ds.hash, a.hash, b.hash}) == 3
    sub = a.subset(5)
    assert sub.corpus == a.corpus and sub.hash == load_dataset("hotpotqa", limit=5).with_corpus("a" * 64).hash


def test_check_inputs(tmp_path: Path) -> None:
    dataset, corpus, _ = official.flashrag_pair(tmp_path, n=3)
    check_inputs([f"flashrag:{dataset}"], str(corpus))
    with pytest.raises(InputError, match="questions only.*--bcas-corpus"):
        check_inputs([str(dataset)], None)
    check_inputs(["hotpotqa"], None)


# --- package data ----------------------------------------------------------------------


def test_samples_and_price_sheets_are_package_data() -> None:
    data = resource_path("data")
    assert data.parent == Path(bcas.__file__).resolve().parent / "resources"
    names = {p.name for p in data.iterdir()}
    from bcas.data import DATASETS

    assert {spec.file for spec in DATASETS.values()} | {"README.md"} <= names
    assert resource_path("prices.toml").is_file()
    # A checkout's fixtures/ paths are links to the same files.
    assert (ROOT / "fixtures" / "data").resolve() == data.resolve()
    assert (ROOT / "fixtures" / "prices.toml").resolve() == resource_path("prices.toml").resolve()
    from bcas.records import load_price_sheet

    assert load_price_sheet(resource_path("prices.toml")).models
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"resources/data/*.jsonl"' in pyproject and '"**/*.toml"' in pyproject


# --- through the plugin -------------------------------------------------------------------

CONFTEST = backends(
    {"instant": "bcas.testing.instant:create", "asker": "bcas.testing.instant:create_asker"}
) + budget_grid("tiny", ["hotpotqa"], (1,))
BASE = ["--bcas-backend", "instant", "--bcas-grid", "tiny", "--bcas-no-cache", "-p", "no:cacheprovider"]


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(pytester.path, CONFTEST)
    return pytester


def test_flashrag_pair_runs_through_a_grid_with_evidence_recall(suite: pytest.Pytester) -> None:
    dataset, corpus, items = official.flashrag_pair(suite.path / "data", n=4)
    run = suite.path / "run"
    args = [a if a != "instant" else "asker" for a in BASE]
    result = suite.runpytest(
        *args, "--bcas-datasets", f"flashrag:{dataset}", "--bcas-corpus", str(corpus), "--bcas-report", str(run)
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*hotpotqa-dev*"])
    records = read_records(run)
    assert sorted(r["item_id"] for r in records) == sorted(it.id for it in items)
    expected_hash = load_dataset(dataset).with_corpus(open_corpus(corpus).hash).hash
    assert {r["dataset_hash"] for r in records} == {expected_hash}
    titles = {d.id: d.title for d in open_corpus(corpus)}
    gold_titles = {it.id: {d.title for d in it.documents if d.id in it.supporting} for it in items}
    for r in records:
        assert r["extra"]["gold_documents"] == 2
        retrieved = {titles[d] for step in r["steps"] for d in step.get("docs") or []}
        assert retrieved  # the question was searched, over the corpus's ids
        share = len(retrieved & gold_titles[r["item_id"]]) / 2
        assert r["extra"]["evidence_recall"] == pytest.approx(share)
    # Searching with the question, BM25 over the corpus finds gold pages.
    assert any(r["extra"]["evidence_recall"] > 0 for r in records)


def test_questions_only_without_corpus_and_bad_corpus_are_usage_errors(suite: pytest.Pytester) -> None:
    dataset, corpus, _ = official.flashrag_pair(suite.path / "data", n=2)
    result = suite.runpytest(*BASE, "--bcas-datasets", str(dataset), "--bcas-report", str(suite.path / "a"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "questions only" in result.stderr.str() and "--bcas-corpus" in result.stderr.str()
    lines = corpus.read_text().splitlines()
    lines[2] = json.dumps({"id": "x"})
    corpus.write_text("\n".join(lines) + "\n")
    result = suite.runpytest(
        *BASE, "--bcas-datasets", str(dataset), "--bcas-corpus", str(corpus), "--bcas-report", str(suite.path / "b")
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--bcas-corpus: {corpus}:3: missing field 'contents'" in result.stderr.str()
    assert not (suite.path / "b" / "records.jsonl").exists()


def test_ambiguous_dataset_is_a_usage_error_listing_formats(suite: pytest.Pytester) -> None:
    path = suite.path / "test_fullwiki.json"
    path.write_text(json.dumps([{"_id": "a", "question": "q?", "context": [["T", ["s."]]]}]))
    result = suite.runpytest(*BASE, "--bcas-datasets", str(path), "--bcas-report", str(suite.path / "c"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ambiguous" in result.stderr.str() and "2wikimultihopqa, hotpotqa" in result.stderr.str()


def test_every_official_layout_runs_through_a_grid(suite: pytest.Pytester) -> None:
    root = suite.path / "official"
    own = [
        f"hotpotqa:{official.hotpotqa(root / 'hotpot_dev_distractor_v1.json', n=2)}",
        str(official.twowiki(root / "2wiki" / "dev.json", n=2)),
        str(official.musique(root / "musique_ans_v1.0_dev.jsonl", n=2)),
        str(official.triviaqa(root / "triviaqa-rc", n=2)),
        str(official.conflictqa(root / "conflictQA-strategyQA-chatgpt.json", n=2)),
    ]
    result = suite.runpytest(*BASE, "--bcas-datasets", ",".join(own), "--bcas-report", str(suite.path / "own"))
    result.assert_outcomes(passed=len(own))
    claims, wiki = official.fever(root / "fever" / "paper_dev.jsonl", root / "fever" / "wiki-pages", n=2)
    questions = [str(claims), str(official.nq_open(root / "NQ-open.dev.jsonl", n=2))]
    result = suite.runpytest(
        *BASE,
        "--bcas-datasets",
        ",".join(questions),
        "--bcas-corpus",
        str(wiki),
        "--bcas-report",
        str(suite.path / "wiki"),
    )
    result.assert_outcomes(passed=len(questions))
    records = read_records(suite.path / "wiki")
    assert {r["dataset"] for r in records} == {"paper_dev", "NQ-open.dev"} and len(records) == 4
    fever_records = [r for r in records if r["dataset"] == "paper_dev"]
    assert all(r["extra"]["gold_documents"] >= 1 for r in fever_records)  # claims' pages found by id


@pytest.mark.slow
def test_a_non_editable_install_collects_the_smoke_grid(tmp_path: Path) -> None:
    """Build a wheel of this tree, install it (no deps) into a fresh venv and use it from elsewhere."""
    import shutil
    import subprocess

    src = tmp_path / "src"
    shutil.copytree(ROOT / "bcas", src / "bcas", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    run = {"check": True, "capture_output": True, "text": True}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
        **run,
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], **run)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", *map(str, wheels.glob("*.whl"))], **run)
    user = grid_project(tmp_path / "user")
    probe = (
        "import bcas, bcas.data as d, bcas.resources as r, bcas.records as res; "
        "print(bcas.__file__); [d.load_dataset(n) for n in d.DATASETS]; "
        "print(len(res.load_price_sheet(r.resource_path('prices.toml')).models))"
    )
    out = subprocess.run([python, "-c", probe], cwd=user, **run).stdout.split()
    assert out[0].startswith(str(venv)) and int(out[1]) > 0
    collected = subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "test_grids.py",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "--bcas-grid",
            "smoke",
        ],
        cwd=user,
        **run,
    ).stdout
    assert "smollm2-135m-hotpotqa-bm25/s1" in collected and "conflictqa-madara/nf" in collected
