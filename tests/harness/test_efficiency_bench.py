"""benchmarks/perf/bench_harness_efficiency.py: its figures agree with the records and the JUnit times it reads."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "perf" / "bench_harness_efficiency.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_harness_efficiency", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_cached_steps_and_judge_tokens_are_split_from_the_generated_calls():
    record = {
        "tokens_in": 130,
        "tokens_out": 13,
        "llm_calls": 3,
        "steps": [
            {"tokens_in": 100, "tokens_out": 10, "calls": 2, "cached": False},
            {"tokens_in": 30, "tokens_out": 3, "calls": 1, "cached": True},
        ],
        "judge": {"tokens_in": 7, "tokens_out": 1, "llm_calls": 1},
    }
    fresh, cached = _bench().record_tokens(record)
    assert fresh == [(2, 100, 10), (1, 7, 1)]
    assert cached == [(1, 30, 3)]
    # a record without a per-call ledger counts as its totals
    fresh, cached = _bench().record_tokens({"tokens_in": 5, "tokens_out": 2, "llm_calls": 1, "steps": []})
    assert (fresh, cached) == ([(1, 5, 2)], [])


ROW = re.compile(r"^\s+(in all|\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$")


@pytest.mark.slow  # three smoke cases of one item on the embedded model, then raw llama.cpp speeds: minutes
def test_printed_tokens_times_and_efficiency_match_the_records_of_one_item_per_case(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--limit", "1", "--prompts", "2", "--gen-tokens", "16", "--keep", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    speeds = re.search(r"prompt processing ([\d.]+) tokens/s .*greedy generation ([\d.]+) tokens/s", text)
    assert speeds, text
    pp, tg = float(speeds.group(1)), float(speeds.group(2))
    rows = {m.group(1): m.groups()[1:] for m in map(ROW.match, text.splitlines()) if m}
    total = rows.pop("in all")
    assert len(rows) == 3, text  # smoke's three HotpotQA cases
    records = _bench().read_records(tmp_path / "run")
    assert len(records) == 3 and {r["dataset"] for r in records} == {"hotpotqa"}
    times = {
        c.get("name", "")[len("test_case[") : -1]: float(c.get("time", 0))
        for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    }
    steps = [s for r in records for s in r["steps"]]
    assert steps and all("tokens_in" in s and "tokens_out" in s for s in steps)
    fresh = [s for s in steps if not s.get("cached")]
    judged = [r["judge"] for r in records if r.get("judge")]
    prompt = sum(s["tokens_in"] for s in fresh) + sum(j.get("tokens_in", 0) for j in judged)
    completion = sum(s["tokens_out"] for s in fresh) + sum(j.get("tokens_out", 0) for j in judged)
    assert (int(total[2]), int(total[3])) == (prompt, completion)  # the totals it prints are the records'
    # each record's totals are the sum of its steps (one step per model call)
    assert sum(r["tokens_in"] for r in records) == sum(s["tokens_in"] for s in steps)
    assert sum(r["tokens_out"] for r in records) == sum(s["tokens_out"] for s in steps)
    assert int(total[1]) == sum(s.get("calls", 1) for s in fresh) + sum(j.get("llm_calls", 0) for j in judged)
    for case_id, (items, _, p, c, _, raw, wall, eff) in rows.items():
        assert int(items) == 1
        assert float(wall) == pytest.approx(times[case_id], abs=0.051)  # the case's pytest duration
        rounding = 0.051 + int(p) * 0.005 / pp**2 + int(c) * 0.005 / tg**2  # speeds printed to 2 decimals
        assert float(raw) == pytest.approx(int(p) / pp + int(c) / tg, abs=rounding)
        exact = (int(p) / pp + int(c) / tg) / times[case_id]  # from the speeds as printed, to 2 decimals
        assert float(eff) == pytest.approx(exact, rel=0.03, abs=0.006)
    assert sum(int(r[2]) for r in rows.values()) == int(total[2])
    assert float(total[6]) == pytest.approx(sum(times[c] for c in rows), abs=0.051 * len(rows))
    assert re.search(r"load average [\d. ]+ before, [\d. ]+ after", text)
    assert "FIGURE " in text and "NOT measured" not in text
