"""No annotation of a dataset reaches a prompt (the papers' models saw questions and passages only).

The shipped samples and the official layouts carry annotations for grading and analysis:
ConflictQA's stance, side and origin of each document, gold flags, supporting facts,
how a title was chosen.  A model that read them could answer from them: the counter side
of ConflictQA supports the gold answer in 302 of 1,000 items, so a document titled
``counter_memory`` alone predicts the answer about 70% of the time.

Every shipped dataset (the registry's, ``/work/shared/data``'s where present, the
fixtures') is copied with each annotation replaced by a unique marker, and every format
reader's official file is read as is; the smoke grid, whose cases run both pipelines (the
BCAS loop and the MADARA treatments, assessment agents and generator), answers one item
of each through a model that records every request.  No marker, no ConflictQA field name
and no annotation value that is not also question or passage text may be in any request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.data import DATASETS, load_dataset
from bcas.formats import FORMATS
from bcas.formats.native import ROLE_TITLES
from bcas.testing.recording import RecordingModel, recording_backend
from tests.support import official

SHARED_DATA = Path("/work/shared/data")
MARK = "zqannot"
_MODELS: list[RecordingModel] = []


@pytest.fixture(autouse=True)
def _recording_backend() -> Iterator[None]:
    """The recording backend for this file's tests only (the registry reference lists the shipped ones)."""
    with recording_backend("recording") as made:
        global _MODELS
        _MODELS = made
        yield


def _prompts(run_dir: Path, dataset: str, corpus: str | None = None) -> list[str]:
    del _MODELS[:]
    extra = {"corpus": corpus} if corpus else {}
    bcas.evaluate(
        grids="smoke", models="recording:gold", datasets=dataset, limit=1, out=run_dir, no_cache=True, **extra
    )
    texts = [m["content"] or "" for model in _MODELS for r in model.requests for m in r.messages]
    assert texts, f"no request reached the model on {dataset}"
    return texts


def _marked(value: Any, counter: list[int]) -> Any:
    """``value`` with every string leaf replaced by a unique marker."""
    if isinstance(value, dict):
        return {k: _marked(v, counter) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v, counter) for v in value]
    counter[0] += 1
    return f"{MARK}{counter[0]}x"


KEEP = 5  # items of a copy at least; more where needed to carry every kind of annotation


def _kinds(row: dict[str, Any]) -> set[tuple[str, str]]:
    """The annotation keys an item carries: its own and its documents'."""
    return {("item", k) for k in row} | {("doc", k) for doc in row.get("documents") or [] for k in doc}


def _covering(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first KEEP items, and each later item that carries a kind of annotation those lack.

    The run answers one item and searches the copy's collection: a small collection that still
    holds every kind of annotation the file has keeps the check and spares embedding thousands
    of passages for the hybrid case."""
    kept = rows[:KEEP]
    seen = set().union(*(_kinds(r) for r in kept)) if kept else set()
    for row in rows[KEEP:]:
        if not _kinds(row) <= seen:
            kept.append(row)
            seen |= _kinds(row)
    return kept


def _annotated_copy(source: Path, target: Path) -> Path:
    """``source`` (our schema), cut to the items that carry every kind of annotation it has
    (:func:`_covering`), with every annotation, of the item and of each document, a marker."""
    counter = [0]
    rows = []
    originals = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in _covering(originals):
        for key in [k for k in row if k not in ("id", "question", "answers", "documents", "supporting", "gold")]:
            row[key] = _marked(row[key], counter)
        row.setdefault("meta", {})["planted"] = _marked(["stance", "supports_gold"], counter)
        for doc in row["documents"]:
            for key in [k for k in doc if k not in ("id", "title", "text")]:
                doc[key] = _marked(doc[key], counter)
            doc["stance"] = _marked("supports_gold", counter)
        rows.append(json.dumps(row, ensure_ascii=False))
    target.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return target


def _shipped() -> Iterator[Any]:
    for name, spec in sorted(DATASETS.items()):
        yield pytest.param(spec.path, id=f"registry-{name}")
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "data"
    for path in sorted(fixtures.glob("*.jsonl")):
        yield pytest.param(path, id=f"fixtures-{path.stem}")
    for path in sorted(SHARED_DATA.glob("*.jsonl")) if SHARED_DATA.is_dir() else []:
        yield pytest.param(path, id=f"shared-{path.stem}")


def _leaks(texts: list[str], forbidden: set[str]) -> list[str]:
    return sorted({f for f in forbidden for t in texts if f in t})


@pytest.mark.parametrize("source", list(_shipped()))
def test_no_annotation_of_a_shipped_dataset_reaches_a_prompt(source: Path, tmp_path: Path) -> None:
    copy = _annotated_copy(source, tmp_path / source.name)
    texts = _prompts(tmp_path / "run", str(copy))
    assert not [t for t in texts if MARK in t], "an annotation reached a prompt"
    assert not _leaks(texts, set(ROLE_TITLES)), "a ConflictQA role name reached a prompt"


def _first_rows(source: Path, target: Path, n: int) -> Path:
    """The first ``n`` items of a bcas-format file (its collection: their documents only)."""
    rows = source.read_text(encoding="utf-8").splitlines(keepends=True)[:n]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(rows), encoding="utf-8")
    return target


def _official_files(root: Path) -> dict[str, tuple[str, str | None]]:
    """One official file per format reader, as ``FORMAT:PATH`` and the corpus a questions-only one searches."""
    fever, wiki = official.fever(root / "fever" / "paper_dev.jsonl", root / "fever" / "wiki-pages")
    flash, corpus, _ = official.flashrag_pair(root / "flashrag", n=4, whole_collection=False)
    files = {
        "hotpotqa": official.hotpotqa(root / "hotpot_dev_distractor_v1.json", n=4),
        "2wikimultihopqa": official.twowiki(root / "2wiki_dev.json", n=4),
        "musique": official.musique(root / "musique_ans_v1.0_dev.jsonl", n=4),
        "triviaqa": official.triviaqa(root / "triviaqa", n=4),
        "nq_open": official.nq_open(root / "nq-open.jsonl", n=4),
        "conflictqa": official.conflictqa(root / "conflictQA-strategyQA-chatgpt.json", n=4),
        "fever": fever,
        "flashrag": flash,
        "bcas": _first_rows(Path(load_dataset("hotpotqa").path), root / "bcas.jsonl", 4),
    }
    corpora = {"fever": str(wiki), "flashrag": str(corpus), "nq_open": str(corpus)}
    return {name: (f"{name}:{path}", corpora.get(name)) for name, path in files.items()}


def _annotation_values(spec: str) -> set[str]:
    """Strings of the items' annotations (meta) that are not also question or passage text."""
    ds = load_dataset(spec)
    values: set[str] = set()

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, dict):
            for v in value.values():
                yield from walk(v)
        elif isinstance(value, list):
            for v in value:
                yield from walk(v)
        elif isinstance(value, str) and len(value) >= 12:
            yield value

    for item in ds.items[:1]:
        shown = " ".join([item.question, *(f"{d.title} {d.text}" for d in item.documents)])
        values.update(v for v in walk(item.meta) if v not in shown)
    return values


def test_every_format_reader_is_covered() -> None:
    names = {"hotpotqa", "2wikimultihopqa", "musique", "triviaqa", "nq_open", "conflictqa", "fever", "flashrag", "bcas"}
    assert set(FORMATS) <= names, f"a format reader without an official file here: {set(FORMATS) - names}"


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_no_annotation_read_by_a_format_reader_reaches_a_prompt(name: str, tmp_path: Path) -> None:
    spec, corpus = _official_files(tmp_path / "files")[name]
    texts = _prompts(tmp_path / "run", spec, corpus)
    assert not _leaks(texts, set(ROLE_TITLES)), "a ConflictQA role name reached a prompt"
    assert not _leaks(texts, _annotation_values(spec)), "an annotation value reached a prompt"
