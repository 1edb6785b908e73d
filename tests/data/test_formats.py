"""bcas.formats: the official and FlashRAG layouts, detection, streaming, file:line errors.

The files are written in each official layout from the shipped samples
(tests/support/official.py), so a reader that loses or changes a field shows up as
a difference from the sample it was written from.
"""

from __future__ import annotations

import json
import shutil
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.data import DatasetError, load_dataset
from bcas.formats import detect_format
from bcas.formats import stream as stream_mod
from bcas.formats.stream import iter_json_array, iter_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support import official  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("official")
    claims, _ = official.fever(root / "fever" / "paper_dev.jsonl", root / "fever" / "wiki-pages")
    flash, _, _ = official.flashrag_pair(root / "flashrag")
    return {
        "hotpotqa": official.hotpotqa(root / "hotpot_dev_distractor_v1.json"),
        "2wikimultihopqa": official.twowiki(root / "2wiki" / "dev.json"),
        "musique": official.musique(root / "musique_ans_v1.0_dev.jsonl"),
        "triviaqa": official.triviaqa(root / "triviaqa-rc"),
        "fever": claims,
        "nq_open": official.nq_open(root / "NQ-open.dev.jsonl"),
        "conflictqa": official.conflictqa(root / "conflictQA-strategyQA-chatgpt.json"),
        "flashrag": flash,
    }


TASKS = {
    "hotpotqa": ("multi-hop", "qa"),
    "2wikimultihopqa": ("multi-hop", "qa"),
    "musique": ("multi-hop", "qa"),
    "triviaqa": ("factoid", "qa"),
    "fever": ("fact-verification", "label"),
    "nq_open": ("factoid", "qa"),
    "conflictqa": ("yes-no-conflict", "label"),
    "flashrag": ("factoid", "qa"),
}


@pytest.mark.parametrize("fmt", sorted(TASKS))
def test_each_official_file_is_detected_and_loads(files: dict[str, Path], fmt: str) -> None:
    path = files[fmt]
    assert detect_format(path).name == fmt
    detected = load_dataset(path)
    named = load_dataset(f"{fmt}:{path}")
    assert named.hash == detected.hash and len(named) == len(detected) > 0
    assert (named.task, named.scoring) == TASKS[fmt]
    for item in named.items:
        assert item.question.strip() and item.answers
        assert set(item.supporting) <= {d.id for d in item.documents}


def _docs(item: Any) -> list[tuple[str, str, str]]:
    return [(d.id, d.title, d.text) for d in item.documents]


@pytest.mark.parametrize("fmt", ["hotpotqa", "2wikimultihopqa", "musique"])
def test_multihop_layouts_reproduce_the_sample_they_were_written_from(files: dict[str, Path], fmt: str) -> None:
    loaded = load_dataset(files[fmt])
    sample = load_dataset(fmt)
    for got, want in zip(loaded.items, sample.items, strict=False):
        assert (got.id, got.question, got.answers) == (want.id, want.question, want.answers)
        assert _docs(got) == _docs(want)
        assert got.supporting == want.supporting
        assert set(got.gold) == {d.title for d in want.documents if d.id in want.supporting}


def test_triviaqa_reads_evidence_files_and_entity_titles(files: dict[str, Path], tmp_path: Path) -> None:
    ds = load_dataset(files["triviaqa"])
    sample = {it.id: it for it in load_dataset("triviaqa").items}
    for item in ds.items:
        want = sample[item.id]
        assert [(d.title, d.text) for d in item.documents] == [(d.title, d.text) for d in want.documents[:3]]
        assert item.gold == tuple(dict.fromkeys(d.title for d in want.documents[:3]))
        assert item.answers[0] == want.answers[0]
        for doc_id in item.supporting:  # distant supervision: the page contains an answer alias
            text = next(d.text for d in item.documents if d.id == doc_id).casefold()
            assert any(a.casefold() in text for a in item.answers)
    # Without the evidence folder the same file gives questions with gold titles only.
    alone = tmp_path / "wikipedia-dev.json"
    shutil.copy(files["triviaqa"], alone)
    bare = load_dataset(f"triviaqa:{alone}")
    assert all(not it.documents for it in bare.items)
    assert [it.gold for it in bare.items] == [it.gold for it in ds.items]


def test_fever_claims_carry_their_evidence_pages(files: dict[str, Path]) -> None:
    ds = load_dataset(files["fever"])
    sample = {str(it.meta["fever_id"]): it for it in load_dataset("fever").items}
    for item in ds.items:
        want = sample[item.id]
        assert item.answers == want.answers and item.question == want.question and not item.documents
        assert set(item.gold) == {official.fever_page_id(t) for t, _ in want.meta["gold_evidence_pages"]}


def test_conflictqa_gold_side_agrees_with_the_sample(tmp_path: Path) -> None:
    path = official.conflictqa(tmp_path / "conflictQA-strategyQA-chatgpt.json", n=200)
    ds = load_dataset(path)
    sample = load_dataset("conflictqa").items[:200]
    assert [it.answers for it in ds.items] == [it.answers for it in sample]
    agree = sum(a.meta["gold_side"] == b.meta["gold_side"] for a, b in zip(ds.items, sample, strict=True))
    assert agree >= 0.95 * len(sample)
    for item in ds.items:
        assert len(item.documents) == 4 and len(item.supporting) in (0, 2)


def test_conflictqa_popqa_ground_truths_are_answers(tmp_path: Path) -> None:
    row = {
        "question": "What is George Rankin's occupation?",
        "popularity": 142,
        "ground_truth": ["politician", "political leader"],
        "memory_answer": "He is a photographer.",
        "parametric_memory": "As a photographer ...",
        "counter_answer": "He is a politician.",
        "counter_memory": "Rankin has been in politics ...",
        "parametric_memory_aligned_evidence": "A portfolio.",
        "counter_memory_aligned_evidence": "Major General George James Rankin was a politician.",
    }
    path = tmp_path / "conflictQA-popQA-chatgpt.json"
    path.write_text(json.dumps(row) + "\n")
    ds = load_dataset(path)
    assert (ds.task, ds.scoring) == ("factoid", "qa")
    item = ds.items[0]
    assert item.answers == ("politician", "political leader") and item.meta["gold_side"] == "counter"
    assert [d.text for d in item.documents if d.id in item.supporting] == [
        "Rankin has been in politics ...",
        "Major General George James Rankin was a politician.",
    ]
    # The side is an annotation, never a title: a title reaches the prompt.
    assert [d.title for d in item.documents] == ["", "", "", ""]
    assert item.meta["sides"] == ["memory", "memory", "counter", "counter"]


def test_nq_open_ids_by_position_and_retrieval_contexts(files: dict[str, Path], tmp_path: Path) -> None:
    ds = load_dataset(files["nq_open"])
    sample = load_dataset("nq_open").items
    assert [it.id for it in ds.items] == [f"nq_open-{n}" for n in range(len(ds))]
    assert [(it.question, it.answers) for it in ds.items] == [(it.question, it.answers) for it in sample[: len(ds)]]
    row = {
        "question": "who wrote it",
        "answers": ["Ann"],
        "nq_annotated_gold": {"title": "Ann (writer)"},
        "ctxs": [
            {"id": "9", "title": "Other", "text": "x y", "hasanswer": False, "isgold": False},
            {"id": "3", "title": "Ann (writer)", "text": "Ann wrote it.", "hasanswer": True, "isgold": True},
        ],
    }
    path = tmp_path / "nq-open-oracle.jsonl"
    path.write_text(json.dumps(row) + "\n")
    item = load_dataset(f"nq_open:{path}").items[0]
    assert [d.title for d in item.documents] == ["Other", "Ann (writer)"]
    assert item.supporting == ("nq_open-0::1",) and item.gold == ("Ann (writer)",)


def test_flashrag_dataset_is_questions_with_gold_titles(files: dict[str, Path], tmp_path: Path) -> None:
    ds = load_dataset(files["flashrag"])
    assert ds.name == "hotpotqa-dev"
    sample = load_dataset("hotpotqa").items
    for got, want in zip(ds.items, sample, strict=False):
        assert not got.documents and got.answers == want.answers
        assert set(got.gold) == {d.title for d in want.documents if d.id in want.supporting}
    # FlashRAG's HotpotQA copies keep the distractor context in metadata (columnar form).
    it = sample[0]
    meta = {
        "context": {
            "title": [d.title for d in it.documents],
            "sentences": [official.sentences(d.text) for d in it.documents],
        },
        "supporting_facts": {"title": [d.title for d in it.documents if d.id in it.supporting], "sent_id": [0, 0]},
    }
    path = tmp_path / "with_context.jsonl"
    path.write_text(
        json.dumps({"id": it.id, "question": it.question, "golden_answers": list(it.answers), "metadata": meta}) + "\n"
    )
    got = load_dataset(f"flashrag:{path}").items[0]
    assert _docs(got) == _docs(it) and got.supporting == it.supporting


def test_hash_depends_on_content_not_on_layout_or_location(files: dict[str, Path], tmp_path: Path) -> None:
    path = files["hotpotqa"]
    rows = json.loads(path.read_text())
    compact = tmp_path / "elsewhere" / "hotpot.json"
    compact.parent.mkdir()
    compact.write_text(json.dumps(rows, separators=(",", ":")))
    assert load_dataset(f"hotpotqa:{compact}").hash == load_dataset(path).hash
    rows[3]["answer"] = rows[3]["answer"] + " (changed)"
    compact.write_text(json.dumps(rows))
    assert load_dataset(f"hotpotqa:{compact}").hash != load_dataset(path).hash


# --- detection -------------------------------------------------------------------


def test_a_record_that_fits_two_layouts_is_an_error_listing_them(tmp_path: Path) -> None:
    path = tmp_path / "hotpot_test_fullwiki_v1.json"
    path.write_text(json.dumps([{"_id": "a1", "question": "q?", "context": [["T", ["s."]]]}]))
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    assert "ambiguous" in str(err.value) and "2wikimultihopqa, hotpotqa" in str(err.value)
    assert f"{path}:1" in str(err.value)
    with pytest.raises(DatasetError, match="missing field 'answer'"):
        load_dataset(f"hotpotqa:{path}")  # naming the layout settles it (the test split has no answers)


def test_unknown_layout_lists_the_formats(tmp_path: Path) -> None:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps({"_id": "q1", "text": "a BEIR query"}) + "\n")
    with pytest.raises(DatasetError, match=r"no known dataset layout.*flashrag.*nq_open"):
        load_dataset(path)
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_dataset("nosuchformat:" + str(path))


# --- malformed variants: file, line, field ------------------------------------------


def _array(path: Path, rows: list[Any]) -> Path:
    """One element per line: element ``i`` (0-based) starts on line ``i + 2``."""
    path.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    return path


def _lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _hotpot(i: int, **kw: Any) -> dict[str, Any]:
    row = {
        "_id": f"h{i}",
        "question": f"q{i}?",
        "answer": "a",
        "supporting_facts": [["T", 0]],
        "context": [["T", ["A sentence."]], ["U", ["Another."]]],
        "level": "easy",
        "type": "bridge",
    }
    row.update(kw)
    return row


def _trivia(tmp: Path, answer: dict[str, Any]) -> Path:
    (tmp / "evidence" / "wikipedia").mkdir(parents=True)
    data = [
        {
            "QuestionId": "t1",
            "Question": "q?",
            "Answer": {"Value": "x", "Aliases": ["x"]},
            "EntityPages": [{"Filename": "missing.txt", "Title": "X"}],
        },
        {"QuestionId": "t2", "Question": "q2?", "Answer": answer, "EntityPages": []},
    ]
    path = tmp / "qa" / "wikipedia-dev.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"Data": data}, indent=1))
    return path


MALFORMED = {
    "hotpotqa-missing-question": (
        lambda t: _array(t / "h.json", [_hotpot(0), _hotpot(1, question=None), _hotpot(2)]),
        3,
        "question",
    ),
    "hotpotqa-context-not-a-pair": (
        lambda t: _array(t / "h.json", [_hotpot(0), _hotpot(1), _hotpot(2, context=[["T", ["s"]], ["U"]])]),
        4,
        "context[1]",
    ),
    "hotpotqa-duplicate-id": (lambda t: _array(t / "h.json", [_hotpot(0), _hotpot(0)]), 3, "id"),
    "2wiki-answer-not-a-string": (lambda t: _array(t / "w.json", [_hotpot(0, evidences=[], answer=7)]), 2, "answer"),
    "musique-bad-flag": (
        lambda t: _lines(
            t / "m.jsonl",
            [
                {
                    "id": "m1",
                    "question": "q?",
                    "answer": "a",
                    "paragraphs": [{"title": "T", "paragraph_text": "p", "is_supporting": "yes"}],
                }
            ],
        ),
        1,
        "paragraphs[0].is_supporting",
    ),
    "fever-unknown-label": (
        lambda t: _lines(
            t / "f.jsonl",
            [
                {"id": 1, "claim": "c", "label": "SUPPORTS", "evidence": [[[1, 1, "P", 0]]]},
                {"id": 2, "claim": "c", "label": "MAYBE", "evidence": []},
            ],
        ),
        2,
        "label",
    ),
    "fever-short-evidence": (
        lambda t: _lines(t / "f.jsonl", [{"id": 1, "claim": "c", "label": "REFUTES", "evidence": [[[1, 1, "P"]]]}]),
        1,
        "evidence[0][0]",
    ),
    "nq-open-empty-answers": (
        lambda t: _lines(t / "n.jsonl", [{"question": "q", "answer": ["a"]}, {"question": "q2", "answer": []}]),
        2,
        "answer",
    ),
    "conflictqa-both-truths": (
        lambda t: _lines(
            t / "c.json",
            [
                {
                    "question": "q?",
                    "ground_truth": ["True", "False"],
                    "memory_answer": "m",
                    "counter_answer": "c",
                    "parametric_memory": "p",
                    "counter_memory": "c",
                    "parametric_memory_aligned_evidence": "e",
                    "counter_memory_aligned_evidence": "e",
                }
            ],
        ),
        1,
        "ground_truth",
    ),
    "flashrag-metadata-not-object": (
        lambda t: _lines(t / "dev.jsonl", [{"id": "1", "question": "q", "golden_answers": ["a"], "metadata": []}]),
        1,
        "metadata",
    ),
    "triviaqa-missing-evidence-file": (lambda t: _trivia(t, {"Value": "y"}), 3, "EntityPages[0].Filename"),
}
FORMAT_OF = {
    "hotpotqa": "hotpotqa",
    "2wiki": "2wikimultihopqa",
    "musique": "musique",
    "fever": "fever",
    "nq": "nq_open",
    "conflictqa": "conflictqa",
    "flashrag": "flashrag",
    "triviaqa": "triviaqa",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_variant_names_file_line_and_field(tmp_path: Path, case: str) -> None:
    write, line, field = MALFORMED[case]
    path = write(tmp_path)
    fmt = FORMAT_OF[case.split("-")[0]]
    with pytest.raises(DatasetError) as err:
        load_dataset(f"{fmt}:{path}")
    assert err.value.path == str(path) and err.value.line == line and err.value.field == field, str(err.value)
    assert f"{path}:{line}: field '{field}'" in str(err.value)


def test_triviaqa_answer_fields_are_named_with_their_parent(tmp_path: Path) -> None:
    path = _trivia(tmp_path, {"Aliases": ["y"]})
    (tmp_path / "evidence" / "wikipedia" / "missing.txt").write_text("x marks it")
    lines = path.read_text().splitlines()
    starts = lines.index(next(ln for ln in lines if '"t2"' in ln))  # the line before it opens the element
    with pytest.raises(DatasetError) as err:
        load_dataset(f"triviaqa:{path}")
    assert err.value.field == "Answer.Value" and err.value.line == starts, str(err.value)


def test_invalid_json_inside_a_pretty_printed_array_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    text = json.dumps([_hotpot(0), _hotpot(1)], indent=2)
    lines = text.splitlines()
    bad = next(i for i, ln in enumerate(lines) if '"h1"' in ln)
    lines[bad] = lines[bad].rstrip(",")  # drop the comma after the second element's id
    path.write_text("\n".join(lines))
    with pytest.raises(DatasetError) as err:
        load_dataset(f"hotpotqa:{path}")
    assert err.value.line == bad + 2 and "invalid JSON" in str(err.value)


# --- the streaming reader ------------------------------------------------------------


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_mod, "CHUNK_CHARS", 5)


def test_strings_with_brackets_quotes_and_escapes_across_chunk_edges(tmp_path: Path, tiny_chunks: None) -> None:
    values = [{"a": "]}[{", "b": 'q"uote\\', "c": ['\\"', "é\u2028✓"]}, [], {}, "s]", 1.5e3, None, [[["deep"]]]]
    path = tmp_path / "a.json"
    path.write_text("[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in values) + "\n]")
    got = list(iter_json_array(path))
    assert [v for _, v in got] == values
    assert [line for line, _ in got] == list(range(2, 2 + len(values)))


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=12),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
            max_leaves=8,
        ),
        max_size=6,
    ),
    indent=st.sampled_from([None, 1, 3]),
    chunk=st.integers(min_value=1, max_value=17),
)
def test_streamed_array_equals_json_loads(values: list[Any], indent: int | None, chunk: int) -> None:
    import tempfile

    old = stream_mod.CHUNK_CHARS
    stream_mod.CHUNK_CHARS = chunk
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "v.json"
            path.write_text(json.dumps(values, indent=indent, ensure_ascii=False), encoding="utf-8")
            assert [v for _, v in iter_json_array(path)] == values
            wrapped = Path(tmp) / "w.json"
            wrapped.write_text(json.dumps({"x": {"y": [1]}, "Data": values, "z": "]"}, indent=indent))
            assert [v for _, v in iter_json_array(wrapped, member="Data")] == values
    finally:
        stream_mod.CHUNK_CHARS = old


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[\n{"a": 1},\n{"a": 2}\n', 4, "expected ',' or ']', got end of file"),
        ('[\n{"a": 1},\n]', 3, "unexpected ']'"),
        ('[\n{"a": "open\n', 2, "not closed"),
        ("[1, 2]\n[3]", 2, "extra data"),
        ('{"a": 1}', 1, "expected a JSON array"),
    ],
)
def test_structural_faults_name_their_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(DatasetError) as err:
        list(iter_json_array(path))
    assert err.value.line == line and message in str(err.value), str(err.value)


def test_missing_member_and_jsonl_by_suffix(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{\n "Version": 1\n}')
    with pytest.raises(DatasetError, match="missing field 'Data'"):
        list(iter_json_array(path, member="Data"))
    lines = tmp_path / "x.jsonl"
    lines.write_text("[1]\n[2]\n")  # a .jsonl file is JSON Lines even when a line is an array
    assert [v for _, v in iter_records(lines)] == [[1], [2]]


def _peak_streaming(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_json_array(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


def test_streaming_holds_one_chunk_and_one_element_whatever_the_file_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream_mod, "CHUNK_CHARS", 1 << 16)
    row = {"_id": "", "question": "q" * 200, "context": [["T", ["word " * 80] * 4]] * 3}
    peaks, sizes = [], []
    for n in (500, 2000):
        path = tmp_path / f"big{n}.json"
        path.write_text(json.dumps([{**row, "_id": str(i)} for i in range(n)]))
        count, peak = _peak_streaming(path)
        assert count == n
        peaks.append(peak)
        sizes.append(path.stat().st_size)
    assert sizes[1] > 7_000_000
    # Four times the file, not four times the memory: the peak is a buffer and an element.
    assert peaks[1] < 1.5 * peaks[0] and peaks[1] < sizes[1] / 10, (peaks, sizes)
