"""Sharded runs (--bcas-shard K/N) and joining them (bcas merge RUN... --out DIR).

The promise: N shard runs, merged, give the records and the report of the unsharded
run, record for record (timing fields and run_id aside).  Models are the ``mock``
backend (gold and random answers); retrieval is the real BM25 index over a small file.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest

from bcas.cli import main as bcas_main
from bcas.shard import Shard, ShardError, parse_shard, shard_number
from bcas.testing.project import budget_grid, codename_items, grid_project, preload, read_records
from tests.support.deploy_runs import lasting_summary, lasting_summary_csv

preload("bcas.harness.merge")

pytest_plugins = ["pytester"]

# Timing and provenance: where and when an answer was made, not what it is.
VOLATILE = {"run_id", "created_at", "latency_s", "timing"}


def _items(n: int) -> list[dict]:
    """Codename items; every third one's codename is beta instead of alpha."""
    rows = codename_items(n)
    for row in rows[::3]:
        row["answers"] = ["beta"]
        row["documents"][0]["text"] = row["documents"][0]["text"].replace("alpha", "beta")
    return rows


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(
        pytester.path, budget_grid("shardy", [pytester.path / "tiny.jsonl"]), datasets={"tiny.jsonl": _items(24)}
    )
    return pytester


RUN = [
    "--bcas-model",
    "mock:gold",
    "--bcas-model",
    "mock:random",
    "--bcas-grid",
    "shardy",
    "--bcas-epochs",
    "2",
    "--bcas-limit",
    "16",
    "-p",
    "no:cacheprovider",
]


def _key(rec: dict) -> tuple:
    return (
        rec["model_fingerprint"],
        rec["config_id"],
        rec["dataset_hash"],
        rec["item_id"],
        rec["prompt_hash"],
        rec["epoch"],
    )


def _answer(rec: dict) -> dict:
    """A record without its timing and provenance fields (the steps keep everything else)."""
    return {k: v for k, v in rec.items() if k not in VOLATILE}


def test_shard_numbers_partition_ids_stably() -> None:
    ids = [f"item-{i}" for i in range(400)]
    for count in (1, 2, 3, 7):
        owners = [[s for s in range(1, count + 1) if Shard(s, count).owns(i)] for i in ids]
        assert all(len(o) == 1 for o in owners)  # every id in exactly one shard
        sizes = [sum(o == [s] for o in owners) for s in range(1, count + 1)]
        assert min(sizes) > 0.6 * len(ids) / count  # no shard starves
    # The documented formula, independently: the first 8 bytes of sha256, big-endian, mod N, plus one.
    # Several ids and counts, so a shard that agrees under another byte order or slice by chance
    # (``5a8b2c1e`` is shard 1 of 5 both big- and little-endian) cannot pass for all of them.
    for key in ("5a8b2c1e", "q1", "item-17", "hotpot/5ab3b0bf", "ünïcode-id", "", "x" * 300):
        digest = hashlib.sha256(key.encode("utf-8")).digest()
        (first_eight,) = struct.unpack(">Q", digest[:8])
        for count in (1, 2, 3, 5, 7, 10, 16, 97, 1000):
            assert shard_number(key, count) == 1 + first_eight % count, (key, count)
    assert parse_shard("2/4") == Shard(2, 4) and parse_shard(" 1 / 1 ") == Shard(1, 1) and parse_shard(None) is None
    for bad in ("0/2", "3/2", "2", "a/b", "1/0"):
        with pytest.raises(ShardError):
            parse_shard(bad)


def test_two_shards_merged_equal_the_unsharded_run(project: pytest.Pytester) -> None:
    whole, one, two, merged = (project.path / n for n in ("whole", "s1", "s2", "merged"))
    project.runpytest(*RUN, "--bcas-report", str(whole)).assert_outcomes(passed=4)
    project.runpytest(*RUN, "--bcas-report", str(one), "--bcas-shard", "1/2").assert_outcomes(passed=4)
    project.runpytest(*RUN, "--bcas-report", str(two), "--bcas-shard", "2/2").assert_outcomes(passed=4)

    # The shards split the items: disjoint, both non-empty, together all of them.
    items = {p: {r["item_id"] for r in read_records(p)} for p in (whole, one, two)}
    assert items[one] and items[two] and not items[one] & items[two]
    assert items[one] | items[two] == items[whole] and len(items[whole]) == 16  # a subset of 24: drawn before sharding
    assert all(Shard(1, 2).owns(i) for i in items[one])
    # Same dataset hash and config ids as the unsharded run (a shard filters, it does not re-draw).
    ids = {p: {(r["dataset_hash"], r["config_id"]) for r in read_records(p)} for p in (whole, one, two)}
    assert ids[one] == ids[two] == ids[whole]
    assert json.loads((one / "run.json").read_text())["sessions"][0]["shard"] == "1/2"
    assert json.loads((whole / "run.json").read_text())["sessions"][0]["shard"] is None

    assert bcas_main(["merge", str(one), str(two), "--out", str(merged)]) == 0
    expected = {_key(r): _answer(r) for r in read_records(whole)}
    got = {_key(r): _answer(r) for r in read_records(merged)}
    assert len(read_records(merged)) == len(got) == 2 * 2 * 16 * 2  # models x configs x items x epochs, once each
    assert got.keys() == expected.keys()
    for key, rec in expected.items():
        assert got[key] == rec, key
    assert any(not r["correct_em"] for r in read_records(merged))  # mock:random answers wrong: a real comparison

    # The report: the same summary rows and comparisons as the unsharded run's, and a rendered page.
    assert lasting_summary(merged) == lasting_summary(whole)
    assert lasting_summary_csv(merged) == lasting_summary_csv(whole)
    assert (merged / "index.html").is_file()
    manifest = json.loads((merged / "run.json").read_text())
    assert [m["shard"] for m in manifest["merged_from"]] == ["1/2", "2/2"]
    assert sorted(s["shard"] for s in manifest["sessions"]) == ["1/2", "2/2"]


def test_merge_refuses_a_missing_or_repeated_shard(project: pytest.Pytester, capsys: pytest.CaptureFixture) -> None:
    one, two = project.path / "s1", project.path / "s2"
    small = ["--bcas-model", "mock:gold", "--bcas-grid", "shardy", "-p", "no:cacheprovider"]
    project.runpytest(*small, "--bcas-report", str(one), "--bcas-shard", "1/2").assert_outcomes(passed=2)
    project.runpytest(*small, "--bcas-report", str(two), "--bcas-shard", "1/3").assert_outcomes(passed=2)
    assert bcas_main(["merge", str(one), "--out", str(project.path / "m")]) == 2
    assert "shards ['2/2'] are missing" in capsys.readouterr().err
    assert bcas_main(["merge", str(one), str(one), "--out", str(project.path / "m")]) == 2
    assert "shard 1/2 is given twice" in capsys.readouterr().err
    assert bcas_main(["merge", str(one), str(two), "--out", str(project.path / "m")]) == 2
    assert "shards of different counts [2, 3]" in capsys.readouterr().err
    assert bcas_main(["merge", str(one), str(two)]) == 2
    assert "give --out DIR" in capsys.readouterr().err
    assert not (project.path / "m" / "records.jsonl").exists()
    # --partial joins what is there: shard 1/2's answers, nothing invented.
    assert bcas_main(["merge", str(one), "--out", str(project.path / "m"), "--partial"]) == 0
    assert {r["item_id"] for r in read_records(project.path / "m")} == {r["item_id"] for r in read_records(one)}


def test_bad_shard_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest(*RUN, "--bcas-shard", "3/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--bcas-shard: shard 3/2: expected K/N with 1 <= K <= N" in result.stderr.str()
