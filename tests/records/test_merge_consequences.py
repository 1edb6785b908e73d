"""Merging the per-worker record files of a run (``ResultStore.merge``): no grade is lost.

Under pytest-xdist each worker appends to ``records.<worker>.jsonl``; a worker that
judged an answer already in ``records.jsonl`` appends it again with its new grade
(``bcas.grading.grade_record``).  The merged run must keep that grade.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bcas.cli import main as bcas
from bcas.records import Record, ResultStore, load_records

GRADE = "judge:sha256:abc|prompt:0123456789abcdef|x1"


def _answer(item: str) -> Record:
    return Record(
        run_id="run", config_id="cfg", model="m", dataset="toy", dataset_hash="dh", item_id=item,
        question="Who?", answers=["Ann"], prediction="Ann", correct_em=True, f1=1.0, label="bm25/s1/t2k",
        searches_used=1, tokens_in=10, tokens_out=5, llm_calls=2, stop_reason="answered",
    )  # fmt: skip


def _graded(record: Record, grade: str, verdict: bool) -> Record:
    details = {"verdict": verdict, "judge": grade}
    return record.replace(judge=details, judge_verdict=verdict, grades={**record.grades, grade: details})


def test_a_grade_written_by_a_worker_survives_the_merge(tmp_path: Path) -> None:
    root = tmp_path / "run"
    main = ResultStore(root)
    main.append(_answer("q0"))
    main.append(_answer("q1"))
    ResultStore(root, worker="gw0").append(_graded(_answer("q0"), GRADE, False))
    ResultStore(root, worker="gw1").append(_answer("q1"))  # the same answer again, nothing new
    merged = main.merge()
    final = {r.item_id: r for r in load_records(merged)}
    assert set(final["q0"].grades) == {GRADE} and final["q0"].judge_verdict is False
    assert final["q1"].grades == {} and final["q1"].judge_verdict is None
    assert len(load_records(merged, deduplicate=False)) == 3  # only the record that adds a grade was appended
    # a second judge's grade from another worker is kept beside the first
    second = "judge:sha256:def|prompt:0123456789abcdef|x1"
    ResultStore(root, worker="gw1").append(_graded(final["q0"], second, True))
    final = {r.item_id: r for r in load_records(main.merge())}
    assert set(final["q0"].grades) == {GRADE, second}


def test_a_later_failure_never_replaces_an_answer(tmp_path: Path) -> None:
    """A rerun that fails on an item already answered must not turn that answer into an error."""
    store = ResultStore(tmp_path / "run")
    store.append(_answer("q0"))
    store.append(_answer("q0").replace(prediction="", stop_reason="error", error="ModelError: timeout"))
    (kept,) = load_records(store.root)
    assert kept.error is None and kept.prediction == "Ann"
    # and a retry that succeeds replaces a failure
    store.append(_answer("q1").replace(prediction="", stop_reason="error", error="ModelError: timeout"))
    store.append(_answer("q1"))
    assert {r.item_id: r.error for r in load_records(store.root)} == {"q0": None, "q1": None}
    # an item that failed twice reports its latest failure (what the retry ran into)
    store.append(_answer("q2").replace(prediction="", stop_reason="error", error="ModelError: timeout"))
    store.append(_answer("q2").replace(prediction="", stop_reason="error", error="ModelError: context full"))
    assert {r.item_id: r.error for r in load_records(store.root)}["q2"] == "ModelError: context full"


def test_worker_files_merge_to_the_same_records_whatever_the_listing_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers that graded one answer differently: the merged run must not depend on the file system."""
    merged = []
    original = Path.glob
    for reverse in (False, True):
        root = tmp_path / f"run-{reverse}"
        ResultStore(root).append(_answer("q0"))
        ResultStore(root, worker="gw0").append(_graded(_answer("q0"), GRADE, False))
        ResultStore(root, worker="gw1").append(_graded(_answer("q0"), GRADE, True))

        def glob(self: Path, pattern: str, _reverse: bool = reverse) -> Iterator[Path]:
            return iter(sorted(original(self, pattern), reverse=_reverse))

        monkeypatch.setattr(Path, "glob", glob)
        (rec,) = load_records(ResultStore(root).merge())
        monkeypatch.setattr(Path, "glob", original)
        merged.append(rec.judge_verdict)
    assert merged[0] == merged[1]


def test_records_of_two_models_from_the_first_schema_stay_apart(tmp_path: Path) -> None:
    # records written before fingerprints existed carry only a model name: upgraded on
    # read, two models' answers to one item must keep two identities, or one model's
    # answers would stand for the other's in a comparison
    import json

    base = {"run_id": "r", "config_id": "c", "dataset": "hotpotqa", "dataset_hash": "h", "item_id": "q1",
            "question": "?", "answers": ["a"], "prediction": "a", "correct_em": True, "f1": 1.0}  # fmt: skip
    lines = [json.dumps({**base, "model": name}) for name in ("smollm2-135m", "qwen3-8b")]
    (tmp_path / "records.jsonl").write_text("\n".join(lines) + "\n")
    first, second = load_records(tmp_path)
    assert first.model_fingerprint == "legacy:smollm2-135m" and second.model_fingerprint == "legacy:qwen3-8b"


@pytest.mark.parametrize("keep", [False, True])
def test_bcas_merge_removes_the_worker_files_unless_asked_to_keep_them(
    tmp_path: Path, keep: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bcas merge RUN``: the worker files are folded into records.jsonl and removed; with
    ``--keep`` they are left as they were.  Either way records.jsonl holds every answer."""
    root = tmp_path / "run"
    ResultStore(root).append(_answer("q0"))
    ResultStore(root, worker="gw0").append(_answer("q1"))
    ResultStore(root, worker="gw1").append(_answer("q2"))
    workers = {"records.gw0.jsonl": (root / "records.gw0.jsonl").read_bytes(),
               "records.gw1.jsonl": (root / "records.gw1.jsonl").read_bytes()}  # fmt: skip
    assert bcas(["merge", str(root), *(["--keep"] if keep else [])]) == 0
    assert capsys.readouterr().out.strip() == str(root / "records.jsonl")
    left = {p.name: p.read_bytes() for p in root.glob("records.*.jsonl")}
    assert left == (workers if keep else {}), sorted(left)
    assert sorted(r.item_id for r in load_records(root / "records.jsonl", deduplicate=False)) == ["q0", "q1", "q2"]
