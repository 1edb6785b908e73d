"""bcas.data: registered datasets, ad-hoc files, content hash, seeded subsets, errors."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from bcas.data import DATASETS, DatasetError, content_hash, load_dataset

# Item counts of fixtures/data/README.md.
EXPECTED_ITEMS = {
    "hotpotqa": 400,
    "2wikimultihopqa": 82,
    "musique": 200,
    "triviaqa": 50,
    "fever": 345,
    "conflictqa": 1000,
    "conflictqa_strategyqa": 1000,  # the same StrategyQA part, under its own name
    "nq_open": 800,
}


def test_registry_is_the_documented_set() -> None:
    assert set(DATASETS) == set(EXPECTED_ITEMS)


@pytest.mark.parametrize("name", sorted(EXPECTED_ITEMS))
def test_registered_dataset_loads(name: str) -> None:
    ds = load_dataset(name)
    assert len(ds) == EXPECTED_ITEMS[name]
    assert ds.name == name and ds.task == DATASETS[name].task and ds.scoring == DATASETS[name].scoring
    assert len(ds.hash) == 64
    ids = [item.id for item in ds.items]
    assert len(set(ids)) == len(ids)
    for item in ds.items:
        assert item.question.strip() and item.answers and item.documents
        doc_ids = {d.id for d in item.documents}
        assert set(item.supporting) <= doc_ids
    if DATASETS[name].scoring == "label":
        golds = {a for item in ds.items for a in item.answers}
        assert golds <= ({"SUPPORTS", "REFUTES"} if name == "fever" else {"yes", "no"})


def test_documents_collection_is_deduplicated() -> None:
    ds = load_dataset("conflictqa")
    docs = ds.documents
    assert len({(d.title, d.text) for d in docs}) == len(docs)
    assert len(docs) <= sum(len(i.documents) for i in ds.items)


# --- ad-hoc files -----------------------------------------------------------------


def _item(i: int, **overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": f"q{i}",
        "question": f"Question number {i}?",
        "answers": [f"answer {i}", f"alias {i}"],
        "documents": [
            {"id": f"q{i}::0", "title": f"Title {i}", "text": f"Gold text {i}."},
            {"id": f"q{i}::1", "title": "Other", "text": f"Distractor {i}."},
        ],
        "supporting": [f"q{i}::0"],
        "meta": {"n": i},
    }
    obj.update(overrides)
    return obj


def _write(path: Path, objs: list[Any]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def test_adhoc_jsonl_loads(tmp_path: Path) -> None:
    path = _write(tmp_path / "mine.jsonl", [_item(i) for i in range(3)])
    ds = load_dataset(path)
    assert ds.name == "mine" and ds.scoring == "qa" and len(ds) == 3
    first = ds.items[0]
    assert first.id == "q0" and first.answers == ("answer 0", "alias 0")
    assert [d.id for d in first.documents] == ["q0::0", "q0::1"]
    assert first.supporting == ("q0::0",) and first.meta == {"n": 0}
    assert load_dataset(str(path)).hash == ds.hash  # str and Path agree


def test_a_byte_order_mark_before_the_first_line_is_dropped(tmp_path: Path) -> None:
    """Editors and Python's utf-8-sig write a BOM first: the file loads, the same as without it."""
    plain = _write(tmp_path / "plain.jsonl", [_item(i) for i in range(3)])
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    with_bom, without = load_dataset(marked), load_dataset(plain)
    assert [i.id for i in with_bom.items] == ["q0", "q1", "q2"]
    assert with_bom.items == without.items and with_bom.hash == without.hash
    # Any other layout too: detected from its first record (a FlashRAG line), or streamed as a JSON array.
    from bcas.formats.stream import iter_records

    flashrag = tmp_path / "dev.jsonl"
    flashrag.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "f0", "question": "Q?", "golden_answers": ["a"]}).encode())
    assert load_dataset(flashrag).items[0].id == "f0"
    array = tmp_path / "array.json"
    array.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"n": 1}, {"n": 2}]).encode())
    assert [obj for _, obj in iter_records(array)] == [{"n": 1}, {"n": 2}]
    # Only before the first line: elsewhere the bytes are not JSON and the error names the line.
    late = tmp_path / "late.jsonl"
    late.write_bytes(plain.read_bytes() + b"\xef\xbb\xbf" + json.dumps(_item(9)).encode() + b"\n")
    with pytest.raises(DatasetError, match=r"late\.jsonl:4: invalid JSON"):
        load_dataset(late)


def test_adhoc_file_named_like_a_registered_dataset(tmp_path: Path) -> None:
    path = _write(tmp_path / "fever.jsonl", [_item(0)])
    ds = load_dataset(path)
    assert len(ds) == 1 and ds.path == str(path)


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "blank.jsonl"
    path.write_text(json.dumps(_item(0)) + "\n\n  \n" + json.dumps(_item(1)) + "\n", encoding="utf-8")
    assert [i.id for i in load_dataset(path).items] == ["q0", "q1"]


def test_unknown_name_and_missing_file() -> None:
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_dataset("no_such_dataset")
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset("/nonexistent/dir/x.jsonl")


# --- hash ---------------------------------------------------------------------------


def test_hash_is_stable_and_independent_of_loader(tmp_path: Path) -> None:
    objs = [_item(i) for i in range(4)]
    path = _write(tmp_path / "h.jsonl", objs)
    # Recompute from the documented definition: sha256 over canonical JSON lines.
    h = hashlib.sha256()
    for o in objs:
        canonical = {k: o[k] for k in ("id", "question", "answers", "documents", "supporting", "meta")}
        h.update(json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    assert load_dataset(path).hash == h.hexdigest()
    assert load_dataset(path).hash == h.hexdigest()


def test_hash_ignores_formatting_but_not_content(tmp_path: Path) -> None:
    objs = [_item(i) for i in range(3)]
    compact = _write(tmp_path / "a.jsonl", objs)
    spaced = tmp_path / "b.jsonl"
    spaced.write_text("".join(json.dumps(o, indent=None, separators=(" , ", " : ")) + "\n" for o in objs))
    assert load_dataset(compact).hash == load_dataset(spaced).hash

    changed = [dict(o) for o in objs]
    changed[1] = _item(1, answers=["answer 1", "alias one"])
    assert load_dataset(_write(tmp_path / "c.jsonl", changed)).hash != load_dataset(compact).hash
    reordered = [objs[1], objs[0], objs[2]]
    assert load_dataset(_write(tmp_path / "d.jsonl", reordered)).hash != load_dataset(compact).hash


def test_reload_sees_rewritten_file_with_same_size_and_mtime(tmp_path: Path) -> None:
    # A file replaced by one of equal size and restored mtime (rsync -t, tar, cp -p)
    # must not be served from the in-process cache.
    path = _write(tmp_path / "same.jsonl", [_item(0, question="Who wrote it AAA?")])
    before = load_dataset(path)
    stat = path.stat()
    _write(path, [_item(0, question="Who wrote it BBB?")])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    after = load_dataset(path)
    assert after.items[0].question == "Who wrote it BBB?"
    assert after.hash != before.hash


# --- subsets --------------------------------------------------------------------------


def test_subsets_are_seeded_stable_nested_and_ordered() -> None:
    full = load_dataset("hotpotqa")
    five = load_dataset("hotpotqa", limit=5, seed=0)
    ten = load_dataset("hotpotqa", limit=10, seed=0)
    assert len(five) == 5 and len(ten) == 10
    assert [i.id for i in five.items] == [i.id for i in load_dataset("hotpotqa", limit=5, seed=0).items]
    assert {i.id for i in five.items} < {i.id for i in ten.items}
    order = {item.id: k for k, item in enumerate(full.items)}
    assert [order[i.id] for i in ten.items] == sorted(order[i.id] for i in ten.items)  # file order kept
    assert five.hash == content_hash(five.items) != full.hash
    other = load_dataset("hotpotqa", limit=10, seed=1)
    assert {i.id for i in other.items} != {i.id for i in ten.items}


def test_subset_limits_at_the_edges() -> None:
    full = load_dataset("triviaqa")
    assert load_dataset("triviaqa", limit=50).hash == full.hash
    assert load_dataset("triviaqa", limit=10_000).hash == full.hash
    assert len(load_dataset("triviaqa", limit=0)) == 0
    with pytest.raises(ValueError, match="limit must be >= 0"):
        load_dataset("triviaqa", limit=-1)


# --- bad input: each error names file, line and field ----------------------------------


def _bad(i: int, **overrides: Any) -> dict[str, Any]:
    return _item(i, **overrides)


BAD_ITEM_CASES = {
    "missing question": ({k: v for k, v in _item(1).items() if k != "question"}, "question", "missing field"),
    "empty question": (_bad(1, question="   "), "question", "must not be empty"),
    "question not a string": (_bad(1, question=7), "question", "must be a string"),
    "answers empty list": (_bad(1, answers=[]), "answers", "non-empty list"),
    "answers a string": (_bad(1, answers="Paris"), "answers", "non-empty list"),
    "answers hold a number": (_bad(1, answers=["Paris", 3]), "answers", "non-empty list"),
    "answers hold an empty string": (_bad(1, answers=["Paris", " "]), "answers", "non-empty list"),
    "no documents": (_bad(1, documents=[]), "documents", "non-empty list"),
    "documents missing": ({k: v for k, v in _item(1).items() if k != "documents"}, "documents", "missing field"),
    "empty document text": (
        _bad(1, documents=[{"id": "q1::0", "title": "T", "text": ""}], supporting=[]),
        "documents[0].text",
        "must not be empty",
    ),
    "document text missing": (
        _bad(1, documents=[{"id": "q1::0", "title": "T"}], supporting=[]),
        "documents[0].text",
        "missing field 'documents[0].text'",
    ),
    "duplicate document id within an item": (
        _bad(
            1,
            documents=[{"id": "q1::0", "title": "A", "text": "x"}, {"id": "q1::0", "title": "B", "text": "y"}],
            supporting=[],
        ),
        "documents[1].id",
        "duplicate document id 'q1::0'",
    ),
    "supporting names no document": (_bad(1, supporting=["q1::9"]), "supporting", "names no document"),
    "supporting not a list": (_bad(1, supporting="q1::0"), "supporting", "list of document ids"),
    "meta not an object": (_bad(1, meta=[1]), "meta", "must be an object"),
    "empty id": (_bad(1, id=""), "id", "non-empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_ITEM_CASES))
def test_bad_item_names_file_line_and_field(tmp_path: Path, case: str) -> None:
    bad, field, message = BAD_ITEM_CASES[case]
    path = _write(tmp_path / "bad.jsonl", [_item(0), bad])  # the fault is on line 2
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 2, field)
    text = str(err)
    named = f"missing field '{field}'" if message.startswith("missing field") else f"field '{field}' "
    assert text.startswith(f"{path}:2: {named}")
    assert message in text


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(_item(0)) + "\n" + json.dumps(_item(1)) + "\n" + '{"id": "q2", "question": \n')
    with pytest.raises(DatasetError, match=rf"^{path}:3: invalid JSON") as info:
        load_dataset(path)
    assert info.value.line == 3


def test_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = _write(tmp_path / "list.jsonl", [_item(0), [1, 2]])
    with pytest.raises(DatasetError, match=rf"^{path}:2: expected JSONL: one JSON object per line, got a JSON array"):
        load_dataset(path)


def test_duplicate_item_id_names_both_lines(tmp_path: Path) -> None:
    second = _item(5, id="q0")
    second["documents"] = [{"id": "other::0", "title": "", "text": "t"}]
    second["supporting"] = []
    path = _write(tmp_path / "dup.jsonl", [_item(0), _item(1), second])
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert (info.value.line, info.value.field) == (3, "id")
    assert str(info.value) == f"{path}:3: field 'id' duplicate item id 'q0' (first on line 1)"


def test_one_document_id_with_different_text_across_items(tmp_path: Path) -> None:
    second = _item(1)
    second["documents"][1]["id"] = "q0::1"
    path = _write(tmp_path / "dupdoc.jsonl", [_item(0), second])
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert (info.value.line, info.value.field) == (2, "documents.id")
    assert "document id 'q0::1' has a different text than on line 1" in str(info.value)


def test_identical_document_shared_by_several_items_is_one_document(tmp_path: Path) -> None:
    first, second = _item(0), _item(1)
    second["documents"][1] = dict(first["documents"][1])  # the same paragraph, same id, in both items
    ds = load_dataset(_write(tmp_path / "shared.jsonl", [first, second]))
    assert [d.id for d in ds.items[1].documents].count(first["documents"][1]["id"]) == 1
    ids = [d.id for d in ds.documents]
    assert len(ids) == len(set(ids)) == 3  # the collection keeps one copy


def test_non_utf8_bytes_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    good = json.dumps(_item(0)).encode() + b"\n"
    bad = json.dumps(_item(1, question="Caf\u00e9?"), ensure_ascii=False).encode("latin-1") + b"\n"
    path.write_bytes(good + bad)
    with pytest.raises(DatasetError, match=rf"^{path}:2: is not valid UTF-8 \(byte offset \d+\)") as info:
        load_dataset(path)
    assert info.value.line == 2


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(DatasetError, match=rf"^{path}: holds no items"):
        load_dataset(path)


# --- gold references, names, the command line -------------------------------------------


def test_gold_references_are_validated_and_hashed_only_when_present(tmp_path: Path) -> None:
    plain = load_dataset(_write(tmp_path / "plain.jsonl", [_item(0)]))
    assert plain.items[0].gold == () and "gold" not in plain.items[0].canonical()
    with_gold = load_dataset(_write(tmp_path / "gold.jsonl", [_item(0, gold=["Page A", "12"])]))
    assert with_gold.items[0].gold == ("Page A", "12") and with_gold.hash != plain.hash
    assert with_gold.items[0].gold_refs() == {"Page A", "12", "Title 0"}  # plus the supporting title
    with pytest.raises(DatasetError) as info:
        load_dataset(_write(tmp_path / "bad.jsonl", [_item(0), _item(1, gold=["ok", 3])]))
    assert (info.value.line, info.value.field) == (2, "gold")


def test_dataset_names_and_labels(tmp_path: Path) -> None:
    from bcas.data import dataset_label, dataset_name

    assert dataset_name(Path("/d/nq/dev.jsonl")) == "nq-dev"
    assert dataset_name(Path("/d/hotpot_dev_distractor_v1.json")) == "hotpot_dev_distractor_v1"
    assert dataset_name(Path("/d/my data (v2).jsonl")) == "my-data-v2-"
    assert dataset_label("hotpotqa") == "hotpotqa"
    assert dataset_label("flashrag:/x/triviaqa/test.jsonl") == "triviaqa-test"
    assert dataset_label("/x/mine.jsonl") == "mine"


def test_command_line_lists_formats_and_loads_a_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bcas.cli import main as bcas_main
    from bcas.formats import FORMATS

    assert bcas_main(["data", "check", "--formats"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(FORMATS)
    path = _write(tmp_path / "mine.jsonl", [_item(i) for i in range(2)])
    assert bcas_main(["data", "check", f"bcas:{path}"]) == 0
    out = capsys.readouterr().out
    assert load_dataset(path).hash in out
    assert bcas_main(["data", "check", f"hotpotqa:{path}"]) == 2  # read as the wrong layout: a field error, exit 2
    assert "missing field '_id'" in capsys.readouterr().err


# --- what a user's own file is told (issue 18) ------------------------------------------


def test_file_of_ours_with_label_answers_is_a_label_task(tmp_path: Path) -> None:
    claims = load_dataset(
        _write(tmp_path / "claims.jsonl", [_item(0, answers=["SUPPORTS"]), _item(1, answers=["REFUTES"])])
    )
    assert (claims.task, claims.scoring) == ("fact-verification", "label")
    yes_no = load_dataset(_write(tmp_path / "yn.jsonl", [_item(0, answers=["yes"]), _item(1, answers=["no"])]))
    assert (yes_no.task, yes_no.scoring) == ("yes-no-conflict", "label")
    qa = load_dataset(_write(tmp_path / "qa.jsonl", [_item(0), _item(1, answers=["yes"])]))
    assert (qa.task, qa.scoring) == ("factoid", "qa")


NOT_JSONL = {
    "csv": ("my.csv", "id,question,answers\nq1,Where?,Paris\n", ("expected JSONL: one JSON object per line", "CSV")),
    "pretty JSON array": (
        "arr.jsonl",
        "[\n" + json.dumps(_item(0)) + "\n]\n",
        ("expected JSONL: one JSON object per line", "JSON array"),
    ),
    "one-line JSON array": (
        "arr1.jsonl",
        json.dumps([_item(0)]) + "\n",
        ("expected JSONL: one JSON object per line, got a JSON array",),
    ),
    "misspelt answers": (
        "typo.jsonl",
        json.dumps({k if k != "answers" else "answer": v for k, v in _item(0).items()}) + "\n",
        ("missing field 'answers'", "did you mean 'answers'?"),
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_JSONL))
def test_a_file_that_is_not_our_jsonl_says_what_is_expected(tmp_path: Path, case: str) -> None:
    name, text, words = NOT_JSONL[case]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert info.value.line == 1
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_named_entries_and_files_named_alike(tmp_path: Path) -> None:
    from bcas.data import dataset_label, unique_specs

    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    one = _write(tmp_path / "x" / "data.jsonl", [_item(0)])
    two = _write(tmp_path / "y" / "data.jsonl", [_item(1)])
    specs = unique_specs([str(one), str(two), "hotpotqa", f"mine={one}"])
    assert [dataset_label(s) for s in specs] == ["x-data", "y-data", "hotpotqa", "mine"]
    assert [load_dataset(s, limit=1).name for s in specs[:2]] == ["x-data", "y-data"]
    assert load_dataset(f"mine={one}").name == "mine"
    assert unique_specs([str(one), "hotpotqa"]) == [str(one), "hotpotqa"]  # no clash, no rename
    with pytest.raises(DatasetError, match="registered dataset"):
        load_dataset(f"hotpotqa={one}")
