"""What a user of sharded runs loses when the shard arithmetic or the merge checks break.

A scheduler's variables read wrongly run an item twice or never; a merge that joins the
wrong folders, or says the wrong thing about them, reports a run that was never made.
Run folders here are written by hand (records and run.json), so each test is quick.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bcas.config import Budget, RetrievalConfig, RunConfig
from bcas.grids import GRIDS, Grid, GridEntry, register_grid
from bcas.harness.merge import MergeError, MergeSummary, find_shards, merge_runs
from bcas.records import Record
from bcas.records.case_status import CaseStatus, append_case_status, read_case_statuses
from bcas.shard import Shard, ShardError, parse_shard, shard_from_env, shard_number
from tests.support.ascii_locale import ascii_locale

SLURM = "SLURM_ARRAY_TASK_"


def _shard(env: dict[str, str], text: str = "auto") -> Shard:
    shard = parse_shard(text, env)
    assert shard is not None
    return shard


# -- the shard a task runs -------------------------------------------------------------


def test_a_shard_names_itself_and_its_folder() -> None:
    shard = Shard(3, 12)
    assert (shard.label, shard.folder) == ("3/12", "shard-3-of-12")
    assert Shard(1, 1).owns("anything")  # one shard holds every item
    with pytest.raises(ShardError, match=r"shard 0/2: expected K/N with 1 <= K <= N"):
        Shard(0, 2)
    with pytest.raises(ShardError, match=r"shard 1/0"):
        Shard(1, 0)
    with pytest.raises(ShardError, match="a run has at least one shard, got 0"):
        shard_number("x", 0)


def test_no_option_means_no_sharding_and_spaces_and_case_are_forgiven() -> None:
    assert parse_shard("") is None and parse_shard("   ") is None and parse_shard(None) is None
    assert parse_shard(" 2 / 3 ") == Shard(2, 3)
    assert _shard({"BCAS_SHARD_INDEX": " 1 ", "BCAS_SHARD_COUNT": " 2 "}, "Auto") == Shard(2, 2)
    assert _shard({"BCAS_SHARD_INDEX": "0"}, "auto / 4") == Shard(1, 4)


def test_an_empty_variable_counts_as_unset() -> None:
    # A scheduler template that exports an empty variable has not named a shard with it.
    env = {"BCAS_SHARD_INDEX": "1", "BCAS_SHARD_COUNT": "2", "JOB_COMPLETION_INDEX": "  ", f"{SLURM}ID": ""}
    assert _shard(env) == Shard(2, 2)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({f"{SLURM}ID": "5", f"{SLURM}MIN": "5", f"{SLURM}MAX": "5"}, (1, 1)),  # --array=5: one task
        ({f"{SLURM}ID": "7", f"{SLURM}MIN": "5", f"{SLURM}MAX": "7"}, (3, 3)),  # the last task is a shard
        ({f"{SLURM}ID": "9", f"{SLURM}MIN": "3", f"{SLURM}MAX": "9", f"{SLURM}STEP": "3"}, (3, 3)),
        ({f"{SLURM}ID": "8", f"{SLURM}MIN": "2", f"{SLURM}COUNT": "4", f"{SLURM}STEP": "2"}, (4, 4)),
        ({f"{SLURM}ID": "1", f"{SLURM}COUNT": "2", f"{SLURM}STEP": ""}, (2, 2)),  # STEP unset: 1
        ({f"{SLURM}ID": "0", f"{SLURM}MIN": "0", f"{SLURM}MAX": "1"}, (1, 2)),
    ],
)
def test_every_task_of_a_slurm_array_gets_its_own_shard(env: dict[str, str], expected: tuple[int, int]) -> None:
    shard = _shard(env)
    assert (shard.index, shard.count) == expected
    assert shard.source is not None and shard.source.startswith(f"{SLURM}ID={env[f'{SLURM}ID']} (MIN=")


def test_all_tasks_of_an_array_cover_every_shard_once() -> None:
    for low, step, tasks in ((0, 1, 4), (1, 1, 3), (10, 3, 5)):
        ids = [low + i * step for i in range(tasks)]
        high = ids[-1]
        env = {f"{SLURM}MIN": str(low), f"{SLURM}MAX": str(high), f"{SLURM}STEP": str(step)}
        got = [_shard({**env, f"{SLURM}ID": str(i)}) for i in ids]
        assert [s.index for s in got] == list(range(1, tasks + 1))
        assert {s.count for s in got} == {tasks}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({f"{SLURM}ID": "3", f"{SLURM}MIN": "5", f"{SLURM}MAX": "4"}, "SLURM_ARRAY_TASK_MAX is below"),
        ({f"{SLURM}ID": "3", f"{SLURM}MIN": "5", f"{SLURM}MAX": "9"}, "the task ID is not in the array"),
        (
            {f"{SLURM}ID": "1", f"{SLURM}COUNT": "2", f"{SLURM}STEP": "0"},
            "SLURM_ARRAY_TASK_STEP='0': expected a whole number >= 1",
        ),
        ({f"{SLURM}ID": "0", f"{SLURM}COUNT": "0"}, "SLURM_ARRAY_TASK_COUNT='0': expected a whole number >= 1"),
        ({f"{SLURM}ID": "-1", f"{SLURM}COUNT": "2"}, "SLURM_ARRAY_TASK_ID='-1': expected a whole number >= 0"),
        ({f"{SLURM}ID": "4", f"{SLURM}MIN": "2", f"{SLURM}COUNT": "2"}, r"past the array's last task \(3\)"),
        ({f"{SLURM}ID": "8", f"{SLURM}MIN": "2", f"{SLURM}COUNT": "3", f"{SLURM}STEP": "2"}, r"last task \(6\)"),
        ({f"{SLURM}MAX": "3"}, "SLURM_ARRAY_TASK_MAX is set but SLURM_ARRAY_TASK_ID is not"),
        ({f"{SLURM}MIN": "1", f"{SLURM}COUNT": "3"}, "SLURM_ARRAY_TASK_MIN is set but"),
        (
            {f"{SLURM}ID": "1", f"{SLURM}MAX": "3", f"{SLURM}COUNT": "2"},
            "holds 4 tasks, not COUNT.*submit a contiguous range \\(e.g. --array=0-7 for 8 shards\\)$",
        ),
        ({"BCAS_SHARD_INDEX": "-1", "BCAS_SHARD_COUNT": "2"}, "BCAS_SHARD_INDEX='-1'"),
        (
            {"BCAS_SHARD_INDEX": "2", "BCAS_SHARD_COUNT": "2"},
            r"BCAS_SHARD_INDEX=2 with BCAS_SHARD_COUNT=2: expected an index from 0 to 1",
        ),
        ({"BCAS_SHARD_INDEX": "0", "BCAS_SHARD_COUNT": "0"}, "BCAS_SHARD_COUNT='0': expected a whole number >= 1"),
        (
            {"BCAS_SHARD_INDEX": "0"},
            "BCAS_SHARD_INDEX=0 is set but the shard count is not.*its completions\\) or give --bcas-shard auto/N$",
        ),
        ({}, r"expected a Slurm array task \(SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT\)"),
    ],
)
def test_a_task_outside_its_array_is_refused_with_the_variable_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ShardError, match=message):
        parse_shard("auto", env)


def test_a_run_of_one_shard_is_a_shard_like_any_other() -> None:
    """``auto/1`` (a scheduler array of one task) is one shard holding every item, not an error."""
    assert _shard({f"{SLURM}ID": "0", f"{SLURM}COUNT": "1"}, "auto/1") == Shard(1, 1)
    with pytest.raises(ShardError, match="auto/0: a run has at least one shard"):
        parse_shard("auto/0", {})


def test_the_count_given_on_the_command_line_wins_agreement() -> None:
    # auto/N names the array's size: a scheduler that says otherwise is refused, naming both.
    with pytest.raises(ShardError, match=r"is an array of 3 tasks, but N=2 \(auto/N\)"):
        shard_from_env({f"{SLURM}ID": "0", f"{SLURM}COUNT": "3"}, 2)
    with pytest.raises(ShardError, match=r"JOB_COMPLETION_INDEX=2 with N=2 \(auto/N\)"):
        shard_from_env({"JOB_COMPLETION_INDEX": "2"}, 2)
    assert shard_from_env({"JOB_COMPLETION_INDEX": "1", "BCAS_SHARD_COUNT": "2"}, 2) == Shard(2, 2)
    both = shard_from_env({f"{SLURM}ID": "1", f"{SLURM}COUNT": "2", "BCAS_SHARD_INDEX": "1"}, 2)
    assert both == Shard(2, 2) and both.source is not None
    assert "SLURM_ARRAY_TASK_ID=1" in both.source and "; BCAS_SHARD_INDEX=1, N=2 (auto/N)" in both.source
    with pytest.raises(ShardError, match=r"-> 1/2; BCAS_SHARD_INDEX=1, BCAS_SHARD_COUNT=2 -> 2/2"):
        shard_from_env({f"{SLURM}ID": "0", f"{SLURM}COUNT": "2", "BCAS_SHARD_INDEX": "1", "BCAS_SHARD_COUNT": "2"})
    with pytest.raises(ShardError, match="got 'x/2'"):
        parse_shard("x/2", {})


# -- joining shard folders -------------------------------------------------------------


def _record(item: str, **fields: object) -> Record:
    base: dict = dict(
        run_id="run", config_id="cfg", model="m", dataset="toy", dataset_hash="dh", item_id=item,
        question="Who?", answers=["Ann"], prediction="Ann", correct_em=True, f1=1.0, label="bm25/s1/t2k",
        searches_used=1, tokens_in=10, tokens_out=5, llm_calls=2, stop_reason="answered", model_fingerprint="fp",
    )  # fmt: skip
    base.update(fields)
    return Record(**base)


def _run(folder: Path, shard: str | None, items: list[str], **session: object) -> Path:
    folder.mkdir(parents=True)
    (folder / "records.jsonl").write_text("".join(_record(i).to_json() + "\n" for i in items))
    manifest = {"schema_version": 1, "sessions": [{"shard": shard, **session}]}
    (folder / "run.json").write_text(json.dumps(manifest))
    return folder


def test_find_shards_orders_by_count_then_index_numerically(tmp_path: Path) -> None:
    for name in ("shard-10-of-12", "shard-2-of-12", "shard-1-of-3", "notes", "shard-x-of-2"):
        (tmp_path / name).mkdir()
    (tmp_path / "shard-3-of-3").write_text("a file, not a shard")
    assert [p.name for p in find_shards(tmp_path)] == ["shard-1-of-3", "shard-2-of-12", "shard-10-of-12"]
    assert find_shards(tmp_path / "absent") == [] and find_shards(tmp_path / "shard-3-of-3") == []


def test_merging_the_shards_of_a_folder_writes_the_run_into_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _run(run / "shard-1-of-2", "1/2", ["a", "b"], settings={"grids": ["g1"]})
    _run(run / "shard-2-of-2", "2/2", ["c"], settings={"grids": ["g1", "g2"]})
    (run / "shard-1-of-2" / "rsc").mkdir()
    (run / "shard-1-of-2" / "rsc" / "probe.json").write_text("{}")
    (run / "shard-1-of-2" / "rsc" / "probe.jsonl").write_text("")
    (run / "shard-1-of-2" / "rsc" / "notes.txt").write_text("not a profile")
    (run / "shard-2-of-2" / "rsc").mkdir()
    (run / "shard-2-of-2" / "rsc" / "probe.json").write_text('{"other": 1}')
    with pytest.raises(MergeError, match=r'grids is \["g1", "g2"\]'):
        merge_runs([run])  # the shards ran different grids: not one run
    summary = merge_runs([run], allow_mismatch=True)
    assert summary.out == run and summary.shards == ["1/2", "2/2"]
    assert (summary.records_in, summary.records_out, summary.profiles) == (3, 3, 1)
    assert sorted(p.name for p in (run / "rsc").iterdir()) == ["probe.json", "probe.jsonl"]
    assert (run / "rsc" / "probe.json").read_text() == "{}"  # the first input's
    assert summary.warnings == [f"{run / 'shard-2-of-2' / 'rsc' / 'probe.json'}: another input holds a different "
                                "file of the same name; kept the first"]  # fmt: skip
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["merged_from"] == [
        {"run": str(run / "shard-1-of-2"), "shard": "1/2"},
        {"run": str(run / "shard-2-of-2"), "shard": "2/2"},
    ]
    assert [(m["shard"], m["field"]) for m in manifest["mismatches"]] == [("2/2", "grids")]
    assert "missing_shards" not in manifest and manifest["schema_version"] == 1
    lines = summary.lines()
    assert lines[0] == f"merged 2 run folders: {run / 'shard-1-of-2'} (1/2), {run / 'shard-2-of-2'} (2/2)"
    assert lines[1] == f"records: 3 answers (3 records read) -> {run / 'records.jsonl'}"
    assert lines[2] == "RSC profiles: 1" and lines[-1].startswith("warning: ")
    assert lines[3].startswith("mismatch (--allow-mismatch): shard 2/2") and lines[4].startswith("report: ")
    # Merging again replaces the merged records rather than refusing them as the run's own.
    assert merge_runs([run], allow_mismatch=True).records_out == 3


def test_summary_lines_name_what_was_left_out() -> None:
    summary = MergeSummary(Path("out"), [Path("a")], [None], 2, 1, 0, Path("out/index.html"), ["w"], ["2/3", "3/3"])
    assert summary.lines() == [
        "merged 1 run folders: a (unsharded)",
        "records: 1 answers (2 records read) -> out/records.jsonl",
        "RSC profiles: 0",
        "missing shards (--partial): 2/3, 3/3; their items are not in this run",
        "report: out/index.html",
        "warning: w",
    ]


def test_merge_refuses_folders_that_are_not_one_sharded_run(tmp_path: Path) -> None:
    one = _run(tmp_path / "one", "1/2", ["a"])
    plain = _run(tmp_path / "plain", None, ["b"])
    out = tmp_path / "out"
    cases = [
        ([], out, "give at least one run folder to merge"),
        ([plain], None, "holds no shard-K-of-N folders: give the shard folders and --out DIR"),
        ([one, plain], out, "plain: not a shard .its run.json records no --bcas-shard., while the other folders are"),
        ([one, tmp_path / "absent"], out, "absent: not a run folder"),
        ([one], one, "is one of the inputs"),
    ]
    for runs, target, message in cases:
        with pytest.raises(MergeError, match=message):
            merge_runs(runs, target)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MergeError, match="empty: holds no records"):
        merge_runs([tmp_path / "empty"], out)
    mixed = _run(tmp_path / "mixed", "1/2", ["c"])
    manifest = json.loads((mixed / "run.json").read_text())
    manifest["sessions"].append({"shard": "2/2"})
    (mixed / "run.json").write_text(json.dumps(manifest))
    with pytest.raises(MergeError, match=r"its sessions ran different shards \['1/2', '2/2'\]"):
        merge_runs([mixed], out)
    misnamed = _run(tmp_path / "shard-2-of-2", "1/2", ["d"])
    with pytest.raises(MergeError, match="the folder is named for another shard than its run.json's 1/2"):
        merge_runs([misnamed], out, partial=True)
    own = _run(tmp_path / "own", None, ["e"])
    with pytest.raises(MergeError, match="own already holds records of its own"):
        merge_runs([plain], own)
    assert not out.exists()


def test_plain_runs_merge_and_a_named_folder_that_agrees_is_accepted(tmp_path: Path) -> None:
    first = _run(tmp_path / "first", None, ["a", "b"])
    second = _run(tmp_path / "second", None, ["b", "c"])
    summary = merge_runs([first, second], tmp_path / "out")
    assert (summary.records_in, summary.records_out, summary.shards) == (4, 3, [None, None])
    named = _run(tmp_path / "shard-1-of-2", "1/2", ["a"])
    assert merge_runs([named], tmp_path / "partial", partial=True).missing == ["2/2"]


def test_records_without_a_fingerprint_are_not_merged(tmp_path: Path) -> None:
    old = _run(tmp_path / "old", None, [])
    old_record = {k: v for k, v in _record("a").to_dict().items() if k != "model_fingerprint"} | {"schema_version": 1}
    (old / "records.jsonl").write_text(json.dumps(old_record) + "\n")
    with pytest.raises(MergeError, match="records written by bcas 0.1.0"):
        merge_runs([old], tmp_path / "out")
    assert not (tmp_path / "out" / "records.jsonl").exists()


@pytest.fixture
def two_grids() -> Iterator[str]:
    """Two registered grids that share a configuration: its answers belong to both."""
    config = RunConfig(budget=Budget(max_searches=1, max_total_tokens=2000), retrieval=RetrievalConfig(mode="bm25"))
    for name in ("shared-one", "shared-two"):
        register_grid(Grid(name, (GridEntry("bcas", config, reference=True),), datasets=("toy.jsonl",)))
    yield replace(config, seed=0).config_id
    for name in ("shared-one", "shared-two"):
        del GRIDS[name]


def test_the_merged_report_shows_every_grid_the_shards_ran(tmp_path: Path, two_grids: str) -> None:
    """A run under two grids records each answer under the grid it ran for; the merged summary must
    still show both grids' rows, as the unsharded run's does (the grids come from run.json)."""
    run = tmp_path / "run"
    for k, items in ((1, ["a", "b"]), (2, ["c"])):
        folder = _run(run / f"shard-{k}-of-2", f"{k}/2", [], settings={"grids": ["shared-one", "shared-two"]})
        records = [_record(i, config_id=two_grids, extra={"grid": "shared-one"}) for i in items]
        (folder / "records.jsonl").write_text("".join(r.to_json() + "\n" for r in records))
    merge_runs([run])
    rows = json.loads((run / "summary.json").read_text())["rows"]
    assert sorted((row["grid"], row["n"]) for row in rows) == [("shared-one", 3), ("shared-two", 3)]


def test_a_merge_of_runs_from_before_grids_were_recorded_reports_the_grids_of_the_records(
    tmp_path: Path, two_grids: str
) -> None:
    """Folders whose run.json names no grids (written before it did) still merge into a report
    of the grids their answers were recorded under."""
    run = tmp_path / "run"
    for k, items in ((1, ["a", "b"]), (2, ["c"])):
        folder = _run(run / f"shard-{k}-of-2", f"{k}/2", [])
        records = [_record(i, config_id=two_grids, extra={"grid": "shared-two"}) for i in items]
        (folder / "records.jsonl").write_text("".join(r.to_json() + "\n" for r in records))
    summary = merge_runs([run])
    rows = json.loads((run / "summary.json").read_text())["rows"]
    assert sorted((row["grid"], row["n"]) for row in rows) == [("shared-two", 3)]
    assert summary.report is not None and summary.report.is_file()


def test_a_merge_of_shards_that_answered_nothing_writes_no_report_and_says_so(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for k in (1, 2):
        _run(run / f"shard-{k}-of-2", f"{k}/2", [])
    summary = merge_runs([run])
    assert (summary.records_out, summary.report) == (0, None)
    assert not (run / "index.html").exists()


def test_a_merge_keeps_non_ascii_answers_and_paths_under_an_ascii_locale(tmp_path: Path, monkeypatch) -> None:
    """A C-locale cluster node merges what other nodes wrote in UTF-8: every answer and the folder
    names in run.json come through as written.  ``io.text_encoding`` stands for the locale here."""

    run = tmp_path / "läufe"
    _run(run / "shard-1-of-2", "1/2", ["a"])
    _run(run / "shard-2-of-2", "2/2", ["b"])
    for k in (1, 2):
        path = run / f"shard-{k}-of-2" / "records.jsonl"
        path.write_text(path.read_text().replace('"Ann"', '"Zoë"'), encoding="utf-8")
    ascii_locale(monkeypatch)
    merge_runs([run])
    merged = [json.loads(line) for line in (run / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["item_id"], r["prediction"], r["answers"]) for r in merged] == [
        ("a", "Zoë", ["Zoë"]),
        ("b", "Zoë", ["Zoë"]),
    ]
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert [m["run"] for m in manifest["merged_from"]] == [str(run / "shard-1-of-2"), str(run / "shard-2-of-2")]


def test_merge_errors_are_whole_sentences_a_user_can_act_on(tmp_path: Path) -> None:
    """Each refusal says what is wrong and what to do, whole: a message cut or garbled leaves
    a CI log a user cannot act on."""
    one = _run(tmp_path / "shard-1-of-2", "1/2", ["a"])
    again = _run(tmp_path / "again", "1/2", ["b"])
    plain = _run(tmp_path / "plain", None, ["c"])
    out = tmp_path / "out"

    def refusal(*args: object, **kwargs: object) -> str:
        with pytest.raises(MergeError) as caught:
            merge_runs(*args, **kwargs)  # type: ignore[arg-type]
        return str(caught.value)

    assert refusal([], out) == "give at least one run folder to merge"
    assert refusal([one, again], out) == f"shard 1/2 is given twice: {one} and {again}"
    assert refusal([one], out) == (
        "shards ['2/2'] are missing (given: ['1/2']); the merged run would lack their items. "
        "Pass --partial to merge what is there"
    )  # the default is to refuse: a Python caller gets no silently partial run
    plain2 = _run(tmp_path / "plain2", None, ["d"])
    assert refusal([one, plain, plain2], out) == (
        f"{plain}, {plain2}: not a shard (its run.json records no --bcas-shard), while the other folders are; "
        "merge the shards of one run only"
    )
    first = _run(tmp_path / "m" / "shard-1-of-2", "1/2", ["a"], settings={"grids": ["g1"]}, bcas={"version": "1"})
    second = _run(tmp_path / "m" / "shard-2-of-2", "2/2", ["e"], settings={"grids": ["g1", "g2"]},
                  bcas={"version": "2"})  # fmt: skip
    message = refusal([first, second], out)
    head, *shown, tail = message.split("\n")
    assert head == "the folders are not parts of one run (2 difference(s)):"
    assert [line[:12] for line in shown] == ["  shard 2/2 "] * 2  # one difference a line, indented
    assert "bcas version" in shown[0] and "grids" in shown[1]
    assert tail == (
        "rerun the odd shard with the others' options and models, or pass --allow-mismatch to merge "
        "anyway (the differences are written into the merged run.json)"
    )
    old = _run(tmp_path / "old", None, [])
    legacy = {k: v for k, v in _record("a").to_dict().items() if k != "model_fingerprint"} | {"schema_version": 1}
    (old / "records.jsonl").write_text(json.dumps(legacy) + "\n")
    assert refusal([old], out) == (
        "an input holds records written by bcas 0.1.0 (no model fingerprint); they cannot be "
        "told apart from new answers and are not merged"
    )
    assert not out.exists()


def test_a_merge_reads_every_kind_of_input_and_writes_where_it_is_told(tmp_path: Path) -> None:
    """An input may hold only RSC profiles or only a run.json; the merged run
    goes into --out even when a folder of shards is given, parents made; every profile file
    is copied, past one skipped or already there."""
    run = tmp_path / "run"
    _run(run / "shard-1-of-2", "1/2", ["a"])
    _run(run / "shard-2-of-2", "2/2", ["b"])
    rsc1, rsc2 = run / "shard-1-of-2" / "rsc", run / "shard-2-of-2" / "rsc"
    rsc1.mkdir()
    (rsc1 / "probe.json").write_text("{}")
    rsc2.mkdir()
    (rsc2 / "a.json.partial").write_text("cut off")  # not a profile, sorted first
    (rsc2 / "probe.json").write_text("{}")  # the same file: already there
    (rsc2 / "z.json").write_text('{"z": 1}')  # after both
    elsewhere = tmp_path / "deep" / "er" / "merged"
    summary = merge_runs([run], elsewhere)
    assert summary.out == elsewhere and (elsewhere / "records.jsonl").is_file()
    assert sorted(p.name for p in (elsewhere / "rsc").iterdir()) == ["probe.json", "z.json"]
    assert summary.profiles == 2 and not (run / "records.jsonl").exists()
    only_rsc = tmp_path / "only-rsc"
    (only_rsc / "rsc").mkdir(parents=True)
    (only_rsc / "rsc" / "p.json").write_text("{}")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "run.json").write_text('{"schema_version": 1, "sessions": []}')  # a run.json and nothing else
    both = merge_runs([only_rsc, bare], tmp_path / "out2")
    assert both.profiles == 1 and both.records_out == 0 and both.shards == [None, None]


def test_a_case_that_failed_on_one_shard_failed_in_the_merged_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for k, items, status in ((1, ["a", "b"], "failed"), (2, ["c"], "passed")):
        folder = _run(run / f"shard-{k}-of-2", f"{k}/2", items, settings={"grids": ["g1"]})
        reason = "1 items ended in error" if status == "failed" else ""
        append_case_status(
            folder, CaseStatus("m-toy-bm25/s1/t2k", "g1", "m", "toy", "bm25/s1/t2k", status, reason, "fp", "cfg")
        )
    merge_runs([run])
    (merged,) = read_case_statuses(run)
    assert (merged.status, merged.reason) == ("failed", "1 items ended in error")
    (row,) = json.loads((run / "summary.json").read_text())["rows"]
    assert row["status"] == "failed" and row["accuracy"] is None
