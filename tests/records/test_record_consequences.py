"""What a user loses when the record layer breaks: fields of an answer, old runs, readable files.

Each test names the consequence it guards: a record that drops what the pipeline measured,
an old run that no longer reads as old, a damaged file that is read as if whole, a
warning that says nothing, a DataFrame without its columns.
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
from dataclasses import replace

import pytest

from bcas.records import (
    LEGACY_PREFIX,
    Answer,
    AnswerIdentity,
    Grades,
    Record,
    RecordError,
    ResultStore,
    build_record,
    load_records,
    read_records_file,
    to_dataframe,
)
from bcas.records.manifest import read_manifest, served_by_fingerprint
from tests.support.ascii_locale import ascii_locale

ANSWER = Answer(
    prediction="Ada Lovelace", method="madara", model="pipeline-model", label="pipeline-label",
    searches_used=3, tokens_in=1234, tokens_out=56, tokens_reasoning=7, llm_calls=4, early_stop=True,
    stop_reason="max_searches", latency_s=2.5, retries=1, error=None,
    steps=[{"kind": "search", "query": "first programmer", "tokens_in": 600, "tokens_out": 20}],
    extra={"treatment": "sda", "selected": [1, 3]},
)  # fmt: skip
IDENTITY = AnswerIdentity(
    run_id="run-7", config_id="cfg-9", config={"budget": {"max_searches": 3}}, dataset="hotpotqa",
    dataset_hash="dh-1", item_id="q42", question="Who wrote the first program?", answers=["Ada Lovelace", "Ada"],
    model_fingerprint="fp-abc", prompt_hash="ph-def", epoch=2, seed=11, model="record-model", label="record-label",
)  # fmt: skip
GRADES = Grades(correct_em=True, f1=0.8, judge={"verdict": True, "agreement": 0.75, "tokens_in": 90})


def test_a_record_keeps_everything_its_answer_identity_and_grades_said():
    """A run's records are all a report, a gate and a resume see: every field must arrive."""
    record = build_record(ANSWER, IDENTITY, GRADES, extra={"case": "c1"}, created_at=123.0)
    assert record.run_id == "run-7" and record.config_id == "cfg-9"
    assert record.config == {"budget": {"max_searches": 3}}
    assert (record.model, record.label) == ("record-model", "record-label")  # the identity's labels win
    assert (record.dataset, record.dataset_hash, record.item_id) == ("hotpotqa", "dh-1", "q42")
    assert record.question == "Who wrote the first program?" and record.answers == ["Ada Lovelace", "Ada"]
    assert record.prediction == "Ada Lovelace"
    assert record.correct_em is True and record.f1 == 0.8
    assert record.judge_verdict is True and record.judge == GRADES.judge
    assert (record.searches_used, record.tokens_in, record.tokens_out) == (3, 1234, 56)
    assert (record.tokens_reasoning, record.llm_calls, record.retries) == (7, 4, 1)
    assert record.early_stop is True and record.stop_reason == "max_searches"
    assert record.latency_s == 2.5 and record.error is None
    assert record.steps == ANSWER.steps and record.method == "madara"
    assert record.extra == {"treatment": "sda", "selected": [1, 3], "case": "c1"}
    assert record.created_at == 123.0
    assert (record.model_fingerprint, record.prompt_hash, record.epoch, record.seed) == ("fp-abc", "ph-def", 2, 11)
    assert record.key == ("fp-abc", "cfg-9", "dh-1", "q42", "ph-def", 2)
    # and it survives the file: what is written is what is read
    assert Record.from_dict(json.loads(record.to_json())) == record


def test_an_errored_answer_is_recorded_as_an_error_and_retried_on_resume(tmp_path):
    """An answer that failed (a server error, a crash of the engine) must keep its error: as a
    plain wrong answer it would count against the model's accuracy and never run again."""
    failed = build_record(replace(ANSWER, prediction="", error="server said 503"), IDENTITY, GRADES)
    assert failed.error == "server said 503"
    store = ResultStore(tmp_path)
    store.append(failed)
    assert failed.key not in store.done_keys(include_errors=False)
    assert failed.key in store.done_keys()


def test_a_run_folder_written_under_a_utf8_locale_reads_under_an_ascii_one(tmp_path, monkeypatch):
    """Run folders move between machines; one whose locale is plain ASCII (``LC_ALL=C`` without
    Python's UTF-8 coercion) must still read a manifest with non-ASCII text.  The locale's
    default is what ``io.text_encoding`` gives a text read without an encoding; here it is ASCII."""

    manifest = {"sessions": [{"models": [{"fingerprint": "fp", "served": "modèle-ü"}]}]}
    (tmp_path / "run.json").write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    ascii_locale(monkeypatch)
    assert read_manifest(tmp_path) == manifest


def test_without_labels_in_the_identity_the_pipelines_own_labels_stand():
    identity = replace(IDENTITY, model=None, label=None)
    record = build_record(ANSWER, identity, Grades(correct_em=False, f1=0.0), created_at=1.0)
    assert (record.model, record.label) == ("pipeline-model", "pipeline-label")
    assert record.judge is None and record.judge_verdict is None  # no judge ran: no verdict
    assert record.correct_em is False and record.f1 == 0.0
    assert record.extra == ANSWER.extra  # no run fields added


def test_a_records_time_is_when_it_was_built_unless_given(monkeypatch):
    monkeypatch.setattr("bcas.records.build.time.time", lambda: 1_700_000_000.0)
    assert build_record(ANSWER, IDENTITY, GRADES).created_at == 1_700_000_000.0
    assert build_record(ANSWER, IDENTITY, GRADES, created_at=5.0).created_at == 5.0


def test_answer_replace_changes_only_what_it_names():
    changed = ANSWER.replace(prediction="Babbage", tokens_out=9)
    assert (changed.prediction, changed.tokens_out) == ("Babbage", 9)
    assert changed.steps == ANSWER.steps and changed.method == "madara" and ANSWER.prediction == "Ada Lovelace"


def _plain_dict(**changes) -> dict:
    record = build_record(ANSWER, IDENTITY, GRADES, created_at=1.0)
    return {**record.to_dict(), **changes}


def test_an_old_record_reads_as_old_and_never_matches_a_new_answer():
    """A 0.1.0 record (schema 1) must not be taken for an answer of today's model and prompt."""
    data = _plain_dict(schema_version=1, extra={"treatment": "nf"})
    for field in ("model_fingerprint", "prompt_hash"):
        del data[field]
    old = Record.from_dict(data)
    assert old.legacy
    assert old.model_fingerprint == LEGACY_PREFIX + "record-model"
    assert old.prompt_hash == "legacy"
    assert old.extra == {"treatment": "nf", "upgraded_from_schema": 1}  # its own fields kept, the upgrade said
    # no model field at all: the marker still says legacy, with nothing after it
    data["model"] = ""
    assert Record.from_dict(data).model_fingerprint == LEGACY_PREFIX
    # a current record is not upgraded
    assert "upgraded_from_schema" not in Record.from_dict(_plain_dict()).extra


def test_fields_a_newer_version_added_are_kept_beside_the_records_own_extra():
    record = Record.from_dict(_plain_dict(new_field={"x": 1}))
    assert record.extra == {"treatment": "sda", "selected": [1, 3], "unknown": {"new_field": {"x": 1}}}
    with pytest.raises(RecordError, match="question"):
        Record.from_dict({k: v for k, v in _plain_dict().items() if k != "question"})


def test_record_lines_are_strict_utf8_json(tmp_path):
    """Other tools (jq, pandas, a browser) read records.jsonl: no NaN, text as written, one compact line."""
    record = build_record(ANSWER, replace(IDENTITY, question="Wer baute Zürich?"), GRADES, created_at=1.0)
    line = record.to_json()
    assert "Zürich" in line and "\n" not in line
    store = ResultStore(tmp_path / "run")
    store.append(record)
    assert "Wer baute Zürich?".encode() in store.path.read_bytes()
    with pytest.raises(ValueError):
        record.replace(f1=math.nan).to_json()


def test_the_record_file_is_readable_by_others_and_not_executable(tmp_path):
    old = os.umask(0o022)
    try:
        store = ResultStore(tmp_path / "run")
        store.append(build_record(ANSWER, IDENTITY, GRADES, created_at=1.0))
    finally:
        os.umask(old)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o644


def test_a_store_in_a_new_nested_folder_is_created(tmp_path):
    store = ResultStore(tmp_path / "reports" / "a" / "b", worker="gw3")
    store.append(build_record(ANSWER, IDENTITY, GRADES, created_at=1.0))
    assert store.worker == "gw3" and store.path.name == "records.gw3.jsonl"
    assert [r.item_id for r in load_records(tmp_path / "reports" / "a" / "b")] == ["q42"]


def _lines(*records: Record) -> str:
    return "".join(r.to_json() + "\n" for r in records)


def _item(item: str, **changes) -> Record:
    return build_record(ANSWER, IDENTITY, GRADES, created_at=1.0).replace(item_id=item, **changes)


def test_a_blank_line_inside_a_file_does_not_hide_the_records_after_it(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(_item("q1").to_json() + "\n\n" + _lines(_item("q2"), _item("q3")))
    assert [r.item_id for r in read_records_file(path)] == ["q1", "q2", "q3"]


def test_a_torn_last_line_is_skipped_and_the_warning_names_file_and_line(tmp_path, caplog):
    path = tmp_path / "records.jsonl"
    path.write_text(_lines(_item("q1"), _item("q2")) + '{"run_id": "cut off')
    with caplog.at_level(logging.WARNING, logger="bcas.records.store"):
        assert [r.item_id for r in read_records_file(path)] == ["q1", "q2"]
    assert f"{path}:3: torn last line without newline" in caplog.text
    # a damaged (not JSON) last line ending in a newline: skipped too, named with its line
    path.write_text(_lines(_item("q1")) + "{not json\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bcas.records.store"):
        assert [r.item_id for r in read_records_file(path)] == ["q1"]
    assert f"{path}:2: torn last line (not valid JSON" in caplog.text
    # and a last line that is JSON but no record: skipped, the same way, with the reason
    path.write_text(_lines(_item("q1")) + json.dumps({"a": 1}) + "\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bcas.records.store"):
        assert [r.item_id for r in read_records_file(path)] == ["q1"]
    assert f"{path}:2: torn last line (record lacks required fields" in caplog.text


def test_damage_before_the_last_line_stops_the_read_with_file_line_and_reason(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(_lines(_item("q1")) + "[1, 2]\n" + _lines(_item("q3")))
    with pytest.raises(RecordError, match=rf"^{path}:2: expected a JSON object, got list; the file is damaged$"):
        read_records_file(path)
    path.write_text(_lines(_item("q1")) + json.dumps({"a": 1}) + "\n" + _lines(_item("q3")))
    with pytest.raises(RecordError, match=rf"^{path}:2: record lacks required fields"):
        read_records_file(path)


def test_loading_a_folder_without_records_or_a_missing_path_says_which(tmp_path):
    with pytest.raises(RecordError, match=rf"^{tmp_path} holds no records\*\.jsonl files$"):
        load_records(tmp_path)
    with pytest.raises(RecordError, match=rf"^{tmp_path / 'nope'} does not exist$"):
        load_records(tmp_path / "nope")


def test_repair_truncates_only_the_torn_tail_and_says_how_much(tmp_path, caplog):
    root = tmp_path / "run"
    root.mkdir()
    whole = _lines(_item("q1"), _item("q2"))
    (root / "records.jsonl").write_bytes(whole.encode() + b'{"torn": 12345')
    with caplog.at_level(logging.WARNING, logger="bcas.records.store"):
        store = ResultStore(root)
    assert store.path.read_bytes() == whole.encode()  # both whole records kept, the torn tail gone
    assert store.repaired == [f"{store.path}: torn last line without newline (14 bytes) truncated"]
    assert store.repaired[0] in caplog.text
    # a last line that ends in a newline but is no record: only it goes
    (root / "records.jsonl").write_bytes(whole.encode() + b'{"half": \n')
    assert ResultStore(root).path.read_bytes() == whole.encode()
    # a file whose only whole record is its first line keeps it
    (root / "records.jsonl").write_bytes(_lines(_item("q1")).encode() + b"{bad}\n")
    assert [r.item_id for r in ResultStore(root).records()] == ["q1"]
    # a file that starts with an empty line, then one bad line: the bad line goes, the empty one stays
    (root / "records.jsonl").write_bytes(b"\n{bad}\n")
    assert ResultStore(root).path.read_bytes() == b"\n"


def test_records_without_deduplication_show_every_version(tmp_path):
    store = ResultStore(tmp_path / "run")
    store.extend([_item("q1"), _item("q1", prediction="again")])
    assert [r.prediction for r in store.records(deduplicate=False)] == ["Ada Lovelace", "again"]
    assert [r.prediction for r in store.records()] == ["again"]


def test_merging_into_a_run_without_a_main_file_keeps_every_worker_answer(tmp_path):
    root = tmp_path / "run"
    ResultStore(root, worker="gw0").append(_item("q1"))
    ResultStore(root, worker="gw1").extend([_item("q2"), _item("q1")])
    merged = ResultStore(root).merge()
    assert [r.item_id for r in load_records(merged, deduplicate=False)] == ["q1", "q2"]
    assert not list(root.glob("records.gw*.jsonl"))
    # a worker answer that replaces an error is the one kept, and merged only once
    ResultStore(root, worker="gw0").append(_item("q3", error="timeout", prediction=""))
    ResultStore(root, worker="gw1").extend([_item("q3"), _item("q3")])
    final = {r.item_id: r for r in load_records(ResultStore(root).merge())}
    assert final["q3"].error is None and final["q3"].prediction == "Ada Lovelace"


def test_the_dataframe_has_every_column_and_the_judges_agreement(tmp_path):
    store = ResultStore(tmp_path / "run")
    store.extend([_item("q1"), _item("q2", judge=None, judge_verdict=None)])
    for source in (store.root, store.records()):
        frame = to_dataframe(source)
        assert list(frame["item_id"]) == ["q1", "q2"]
        assert list(frame.columns[-2:]) == ["n_steps", "judge_agreement"]
        assert {"model_fingerprint", "cost_usd", "tokens_reasoning"} <= set(frame.columns)
        assert frame["judge_agreement"].iloc[0] == 0.75 and math.isnan(frame["judge_agreement"].iloc[1])
        assert list(frame["n_steps"]) == [1, 1]
    empty = to_dataframe([])
    assert "judge_agreement" in empty.columns and len(empty) == 0


def test_the_manifest_is_read_only_when_it_is_one(tmp_path):
    assert read_manifest(tmp_path) is None  # none
    (tmp_path / "run.json").write_text("{not json")
    assert read_manifest(tmp_path) is None  # unreadable
    (tmp_path / "run.json").write_text(json.dumps({"sessions": {}}))
    assert read_manifest(tmp_path) is None  # not a manifest
    (tmp_path / "run.json").write_text(json.dumps([1]))
    assert read_manifest(tmp_path) is None
    (tmp_path / "run.json").write_text(json.dumps({"sessions": [{"id": "s1"}]}))
    assert read_manifest(str(tmp_path)) == {"sessions": [{"id": "s1"}]}


def test_what_served_each_fingerprint_is_the_latest_sessions_word():
    manifest = {
        "sessions": [
            {"models": {"a": {"fingerprint": "fp1", "served": "old-name"}, "b": {"fingerprint": "fp2"}}},
            "not a session",
            {"models": ["not", "a", "mapping"]},
            {"models": {"a": {"fingerprint": "fp1", "served": "new-name"}, "c": {"served": "no-fingerprint"}}},
            {"models": {"d": "not an entry", "e": {"fingerprint": 7, "served": 8}}},
        ]
    }
    assert served_by_fingerprint(manifest) == {"fp1": "new-name", "7": "8"}
    assert served_by_fingerprint(None) == {} and served_by_fingerprint({"sessions": None}) == {}


def test_a_folder_holding_old_records_refuses_new_answers_naming_the_file(tmp_path):
    """New answers added beside 0.1.0 records could not be told apart from them later: the
    store refuses, names the file and says what to do; a folder of today's records is writable."""
    store = ResultStore(tmp_path)
    store.append(build_record(ANSWER, IDENTITY, GRADES, created_at=1.0))
    store.check_writable()  # today's records only
    old = _plain_dict(schema_version=1)
    for field in ("model_fingerprint", "prompt_hash"):
        del old[field]
    worker = tmp_path / "records.gw1.jsonl"
    worker.write_text(json.dumps(old) + "\n", encoding="utf-8")
    with pytest.raises(RecordError) as refused:
        store.check_writable()
    assert str(refused.value) == (
        f"{worker} holds records written by bcas 0.1.0 (record schema 1, no model fingerprint or prompt hash); "
        "new answers cannot be told apart from them. Use another run folder (--bcas-report DIR) or move the "
        "old records away; they still read (upgraded) for reports"
    )
