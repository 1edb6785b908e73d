"""Records, the append-only ResultStore, price sheets and the reprice CLI."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from bcas.records import (
    DEFAULT_PRICES,
    PriceError,
    Record,
    RecordError,
    ResultStore,
    load_price_sheet,
    load_records,
    reprice,
    reprice_record,
    to_dataframe,
)

REPO = Path(__file__).resolve().parents[2]


def key(config_id: str, item_id: str) -> tuple[str, str, str, str, str, int]:
    """The answer identity of a ``make_record`` record (no fingerprint, no prompt hash, epoch 0)."""
    return ("", config_id, "dh", item_id, "", 0)


def make_record(item_id: str = "q1", config_id: str = "cfg", *, error: str | None = None, **changes: object) -> Record:
    fields: dict[str, object] = dict(
        run_id="run",
        config_id=config_id,
        model="gpt-4o-mini",
        dataset="hotpotqa",
        dataset_hash="dh",
        item_id=item_id,
        question="Who?",
        answers=["Chief of Protocol"],
        prediction="Chief of Protocol",
        correct_em=True,
        f1=1.0,
        label="bm25/s3/t16k",
        searches_used=3,
        tokens_in=12_345,
        tokens_out=6_789,
        llm_calls=5,
        stop_reason="answered" if error is None else "error",
        error=error,
        steps=[{"kind": "search", "query": "x", "tokens_in": 1, "tokens_out": 2, "retrieved": ["d#0"]}],
    )
    fields.update(changes)
    return Record(**fields)  # type: ignore[arg-type]


SECOND_SHEET = """
default = "alt"
[sheets.alt]
search_per_call = 0.01
[sheets.alt.models."gpt-4o-mini"]
input_per_mtok = 1.0
output_per_mtok = 2.0
[sheets.alt.models."judge-x"]
input_per_mtok = 10.0
output_per_mtok = 20.0
aliases = ["the-judge"]
"""


# -- records ---------------------------------------------------------------------------


def test_record_round_trips_through_json() -> None:
    record = make_record(
        judge={"verdict": True, "model": "m", "tokens_in": 3}, extra={"treatment": "SDA", "scores": [[1, 2, 3]]}
    )
    line = record.to_json()
    assert "\n" not in line
    again = Record.from_dict(json.loads(line))
    assert again == record
    assert again.key == key("cfg", "q1")


def test_record_from_dict_keeps_unknown_fields_and_rejects_missing_ones() -> None:
    data = make_record().to_dict()
    data["rsc_profile_id"] = "p1"
    assert Record.from_dict(data).extra["unknown"] == {"rsc_profile_id": "p1"}
    del data["prediction"]
    with pytest.raises(RecordError, match="prediction"):
        Record.from_dict(data)


# -- price sheets ------------------------------------------------------------------------


def test_shipped_price_sheet() -> None:
    sheet = load_price_sheet()
    assert sheet.name == "list"
    assert sheet.price_for("smollm2-135m-instruct-q4_1").input_per_mtok == 0.0
    judge = sheet.price_for("gpt-4o-mini-2024-07-18")  # the BCAS judge model, dated id
    assert (judge.input_per_mtok, judge.output_per_mtok) == (0.15, 0.60)
    assert sheet.price_for("openai/gpt-4.1-mini").output_per_mtok == 1.60
    assert load_price_sheet("batch").price_for("gpt-4o-mini").input_per_mtok == 0.075
    assert load_price_sheet(f"{DEFAULT_PRICES}:batch").name == "batch"
    with pytest.raises(PriceError, match="no price for model 'mystery-7b'"):
        sheet.price_for("mystery-7b")


def test_cost_matches_hand_arithmetic(tmp_path: Path) -> None:
    record = make_record()
    listed = reprice_record(record, load_price_sheet("list"))
    # 12,345 in x $0.15/M + 6,789 out x $0.60/M + 3 searches x $0
    assert listed.cost_usd == pytest.approx(0.00185175 + 0.0040734)
    assert listed.price_sheet == "list"
    alt_path = tmp_path / "alt.toml"
    alt_path.write_text(SECOND_SHEET)
    alt = reprice_record(record, load_price_sheet(alt_path))
    # 12,345 x $1/M + 6,789 x $2/M + 3 x $0.01
    assert alt.cost_usd == pytest.approx(0.012345 + 0.013578 + 0.03)
    judged = make_record(judge={"model": "the-judge", "tokens_in": 1000, "tokens_out": 10, "verdict": True})
    assert reprice_record(judged, load_price_sheet(alt_path)).judge["cost_usd"] == pytest.approx(0.01 + 0.0002)
    assert reprice_record(judged, load_price_sheet("list")).judge["cost_usd"] is None  # judge not on that sheet


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("x = 1", "no \\[sheets"),
        ('[sheets.a]\n[sheets.a.models."m"]\ninput_per_mtok = "cheap"\noutput_per_mtok = 1', "must be a number"),
        ('[sheets.a]\n[sheets.a.models."m"]\ninput_per_mtok = -1\noutput_per_mtok = 1', "must be >= 0"),
        ("[sheets.a]\nsearch_per_call = 0", "needs at least one"),
        ("not toml [", "not valid TOML"),
    ],
)
def test_bad_price_sheets_are_reported(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(toml)
    with pytest.raises(PriceError, match=message):
        load_price_sheet(path)


def test_reprice_cli_recomputes_without_rerunning(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "run")
    store.append(reprice_record(make_record("q1"), load_price_sheet("list")))
    store.append(
        reprice_record(make_record("q2", tokens_in=1_000_000, tokens_out=0, searches_used=0), load_price_sheet("list"))
    )
    sheet = tmp_path / "alt.toml"
    sheet.write_text(SECOND_SHEET)
    out = tmp_path / "repriced.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bcas", "reprice", str(store.path), "--prices", str(sheet), "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    costs = {r.item_id: r.cost_usd for r in load_records(out)}
    assert costs["q1"] == pytest.approx(0.055923)
    assert costs["q2"] == pytest.approx(1.0)
    assert "total: 1.055923 USD over 2 of 2 records" in proc.stdout
    # the stored records are untouched
    assert {r.price_sheet for r in load_records(store.path)} == {"list"}
    bad = subprocess.run(
        [sys.executable, "-m", "bcas", "reprice", str(store.path), "--prices", "nonexistent-sheet"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "no sheet 'nonexistent-sheet'" in bad.stderr


def test_reprice_function_is_pure() -> None:
    records = [make_record("a"), make_record("b")]
    out = reprice(records, load_price_sheet("batch"))
    assert [r.cost_usd for r in records] == [None, None]
    assert out[0].cost_usd == pytest.approx((12_345 * 0.075 + 6_789 * 0.30) / 1e6)


# -- the store ---------------------------------------------------------------------------


def test_append_resume_and_dataframe(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "run")
    store.append(make_record("q1"))
    store.append(make_record("q2", config_id="other"))
    lines = store.path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["run_id"] == "run" for line in lines)
    again = ResultStore(tmp_path / "run")
    assert again.done_keys() == {key("cfg", "q1"), key("other", "q2")}
    frame = to_dataframe(tmp_path / "run")
    assert list(frame["item_id"]) == ["q1", "q2"]
    assert frame["tokens_in"].sum() == 2 * 12_345
    assert frame["n_steps"].tolist() == [1, 1]
    assert {"correct_em", "f1", "judge_verdict", "cost_usd", "steps"} <= set(frame.columns)


def test_error_records_can_be_retried(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "run")
    store.append(make_record("q1", error="ModelError: timeout", prediction=""))
    assert store.done_keys() == {key("cfg", "q1")}
    assert store.done_keys(include_errors=False) == set()
    store.append(make_record("q1"))
    (only,) = store.records()
    assert only.error is None and only.prediction == "Chief of Protocol"


@pytest.mark.parametrize("tail", [b'{"run_id": "run", "config_id": "cf', b"garbage\n", b'{"run_id": 1}\n'])
def test_torn_last_line_is_detected_reported_and_truncated(tmp_path: Path, tail: bytes) -> None:
    store = ResultStore(tmp_path / "run")
    store.append(make_record("q1"))
    good = store.path.read_bytes()
    with open(store.path, "ab") as handle:
        handle.write(tail)
    assert len(load_records(store.path)) == 1  # readers skip it, never parse it as a record
    reopened = ResultStore(tmp_path / "run")
    assert len(reopened.repaired) == 1 and str(store.path) in reopened.repaired[0]
    assert store.path.read_bytes() == good
    reopened.append(make_record("q2"))
    assert [r.item_id for r in load_records(store.path)] == ["q1", "q2"]


def test_damage_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(make_record("q1").to_json() + "\nnot json\n" + make_record("q2").to_json() + "\n")
    with pytest.raises(RecordError, match=r"records.jsonl:2: not valid JSON"):
        load_records(path)


def _append_many(root: str, worker: str | None, start: int, count: int) -> None:
    store = ResultStore(root, worker=worker)
    for i in range(start, start + count):
        # large steps make a torn or interleaved write likely if appends were not atomic
        store.append(make_record(f"q{i}", steps=[{"kind": "search", "output": "x" * 20_000, "n": i}]))


def test_concurrent_appends_from_several_processes(tmp_path: Path) -> None:
    root = str(tmp_path / "run")
    ResultStore(root)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(root, None, w * 40, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = (tmp_path / "run" / "records.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 161
    records = [Record.from_dict(json.loads(line)) for line in lines[:-1]]
    assert sorted(int(r.item_id[1:]) for r in records) == list(range(160))
    assert all(len(r.steps[0]["output"]) == 20_000 for r in records)


def test_worker_files_merge_without_duplicates(tmp_path: Path) -> None:
    root = tmp_path / "run"
    main = ResultStore(root)
    main.append(make_record("q0"))
    main.append(make_record("q1", error="ModelError: boom", prediction=""))
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_append_many, args=(str(root), "gw0", 0, 3)),  # q0 duplicates, q1 fixes the error
        ctx.Process(target=_append_many, args=(str(root), "gw1", 3, 3)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert main.done_keys() == {key("cfg", f"q{i}") for i in range(6)}
    merged = main.merge()
    assert sorted(p.name for p in root.glob("records*.jsonl")) == ["records.jsonl"]
    raw = load_records(merged, deduplicate=False)
    assert sorted(r.item_id for r in raw) == ["q0", "q1", "q1", "q2", "q3", "q4", "q5"]
    final = {r.item_id: r for r in load_records(merged)}
    assert len(final) == 6 and final["q1"].error is None
    assert main.merge() == merged and len(load_records(merged, deduplicate=False)) == 7  # idempotent


def test_bad_worker_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="worker name"):
        ResultStore(tmp_path, worker="../evil")
