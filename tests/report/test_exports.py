"""Exports: ``records.parquet`` beside ``records.jsonl``, a run without pyarrow, and per-case JUnit properties."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bcas.records import to_dataframe
from bcas.run.exports import PARQUET_FILE, write_parquet
from tests.support.mockruns import make_project
from tests.support.reports import NON_LATIN, grid_records, hostile_records

pq = pytest.importorskip("pyarrow.parquet")
pytest_plugins = ["pytester"]


def test_parquet_holds_the_records_field_for_field(tmp_path: Path) -> None:
    records = grid_records("search_scaling", n_items=4) + hostile_records()[:11]  # hostile, non-Latin, 100k chars
    records[0] = {**records[0], "cost_usd": None, "extra": {**records[0]["extra"], "price_missing": {"model": "m"}}}
    path = write_parquet(tmp_path, records)
    assert path == tmp_path / PARQUET_FILE
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == len(records)
    for row, rec in zip(rows, records, strict=True):
        for name, value in rec.items():
            if name in ("config", "judge", "steps", "extra", "grades", "timing"):
                assert (None if row[name + "_json"] is None else json.loads(row[name + "_json"])) == value, name
            else:
                assert row[name] == value, name
    assert rows[0]["cost_usd"] is None  # unknown stays unknown, never 0
    assert all(any(sample in row["question"] for row in rows) for sample in NON_LATIN)


def test_a_run_writes_parquet_and_junit_properties(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # in this process (a fresh interpreter per run costs seconds); its own generation cache
    monkeypatch.setenv("BCAS_CACHE_DIR", str(pytester.path / "cache"))
    project = make_project(pytester.path)
    junit = project / "junit.xml"
    result = pytester.runpytest(
        "test_grids.py", "-p", "no:cacheprovider", "--bcas-model", "mock:gold", "--bcas-grid", "brief",
        "--bcas-prices", "prices.toml", "--bcas-report", "out", f"--junitxml={junit}", "-q",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    out = project / "out"
    assert f"parquet: {Path('out') / PARQUET_FILE}" in result.stdout.str()
    frame = to_dataframe(out)
    table = pq.read_table(out / PARQUET_FILE).to_pandas()
    assert sorted(table["item_id"] + table["config_id"]) == sorted(frame["item_id"] + frame["config_id"])
    assert table["cost_usd"].sum() == pytest.approx(frame["cost_usd"].sum())

    rows = {r["label"]: r for r in json.loads((out / "summary.json").read_text())["rows"]}
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == 2
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        row = rows[props["bcas_case"].split("-hotpotqa-")[1]]
        assert props["bcas_metric"] == row["metric"]
        assert float(props["bcas_accuracy"]) == pytest.approx(row["accuracy"], abs=1e-4)
        assert float(props["bcas_ci_low"]) == pytest.approx(row["ci_lo"], abs=1e-4)
        assert float(props["bcas_ci_high"]) == pytest.approx(row["ci_hi"], abs=1e-4)
        assert props["bcas_interval"] == "95% wilson" and int(props["bcas_n"]) == row["n"] == 6
        assert float(props["bcas_cost_usd"]) == pytest.approx(row["cost_usd"], abs=1e-6)


def test_without_pyarrow_the_run_says_so_and_keeps_the_jsonl(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyarrow made unimportable for the run (in this process: a None entry in sys.modules
    # fails its import as an uninstalled package does)
    monkeypatch.setenv("BCAS_CACHE_DIR", str(pytester.path / "cache"))
    project = make_project(pytester.path)
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    result = pytester.runpytest(
        "test_grids.py", "-p", "no:cacheprovider", "--bcas-model", "mock:gold", "--bcas-grid", "brief",
        "--bcas-prices", "prices.toml", "--bcas-report", "plain", "-q",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
    assert "parquet: not written: pyarrow is not installed (pip install 'bcas[parquet]')" in result.stdout.str()
    assert (project / "plain" / "records.jsonl").is_file() and not (project / "plain" / PARQUET_FILE).exists()
