"""Identical records before and after the harness redesign, and from now on.

The golden files hold the records of the ``smoke`` grid, with the fields that depend on
the run rather than the answers left out (timings, run id, worker), as they were written
by the code before the redesign into layers, one registry and one executor:

* ``golden/smoke_mock.jsonl``: the whole smoke grid on ``mock:gold`` and ``mock:random``
  (70 records);
* ``golden/smoke_embedded_1*.jsonl``: the smoke grid on the embedded SmolLM2 default,
  one item per dataset, no generation cache (7 records; ``slow``: about 3-5 minutes), one
  file per host kind (``support/golden.py``: llama.cpp's kernels follow the CPU's features,
  and 4 of the 7 records differed between two hosts).  A run equals its host's golden
  where one is recorded, and agrees with every host's golden on the identity of each
  answer (on a host kind with no golden only that, with a warning).

A change that alters any answer, grade, ledger, configuration id or identity fails here.
When a change is meant to alter records (a new prompt, a new default), regenerate the
files with ``python tests/support/update_golden.py`` and say so in the commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from support.golden import IDENTITY_FIELDS, embedded_goldens, host_key, read_normalised

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"
MOCK_ARGS = ("--bcas-model", "mock:gold", "--bcas-model", "mock:random")
EMBEDDED_ARGS = ("--bcas-limit", "1", "--bcas-no-cache")


def run_smoke(tmp_path: Path, *args: str) -> Path:
    run_dir = tmp_path / "run"
    env = {**os.environ, "BCAS_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "pytest", "benchmarks", "--bcas-grid", "smoke", *args,
               "--bcas-report", str(run_dir), "-q", "-p", "no:cacheprovider"]  # fmt: skip
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return run_dir / "records.jsonl"


def assert_same(golden: Path, records: Path) -> None:
    want, got = read_normalised(golden), read_normalised(records)
    assert sorted(got) == sorted(want), (sorted(set(want) - set(got))[:3], sorted(set(got) - set(want))[:3])
    for key, record in want.items():
        differing = sorted(f for f in set(record) | set(got[key]) if record.get(f) != got[key].get(f))
        assert not differing, f"{key}: fields differ from the golden record: {differing}"


def test_smoke_grid_on_mock_models_gives_the_golden_records(tmp_path: Path) -> None:
    assert_same(GOLDEN / "smoke_mock.jsonl", run_smoke(tmp_path, *MOCK_ARGS))


def assert_same_identities(golden: Path, records: Path) -> None:
    """The answers a host cannot change: the same keys, each with the same identity fields."""
    want, got = read_normalised(golden), read_normalised(records)
    assert sorted(got) == sorted(want), (golden.name, sorted(set(want) ^ set(got))[:3])
    for key, record in want.items():
        differing = [f for f in IDENTITY_FIELDS if record.get(f) != got[key].get(f)]
        assert not differing, f"{golden.name}: {key}: identity fields differ: {differing}"


@pytest.mark.slow
def test_smoke_grid_on_the_embedded_default_gives_the_golden_records(tmp_path: Path) -> None:
    records = run_smoke(tmp_path, *EMBEDDED_ARGS)
    goldens = embedded_goldens(GOLDEN, "smoke_embedded_1")
    assert goldens, "no embedded golden file"
    assert_matches_a_golden(records, goldens, GOLDEN / f"smoke_embedded_1.{host_key()}.jsonl")


def assert_matches_a_golden(records: Path, goldens: list[Path], own: Path) -> None:
    """Every golden's identities, and all the fields of ``own`` where this host has one.

    A host kind with no golden of its own is held to the identities only (with a warning
    naming the command that writes its golden): its kernels may round differently from
    every recorded host, so another host's answers are no reference for it."""
    for golden in goldens:
        assert_same_identities(golden, records)
    if own.is_file():
        assert_same(own, records)
        return
    got = read_normalised(records)
    if not any(read_normalised(g) == got for g in goldens):
        warnings.warn(
            f"no embedded golden for this host kind ({own.name}): identities checked, answers not; "
            "python tests/support/update_golden.py writes one",
            stacklevel=2,
        )


def test_a_run_must_equal_its_own_hosts_golden_when_there_is_one(tmp_path: Path) -> None:
    """Mutation check of the host choice: another host's answers pass only where this host has no golden."""
    lines = (GOLDEN / "smoke_mock.jsonl").read_text(encoding="utf-8").splitlines()
    first, other = tmp_path / "first.jsonl", tmp_path / "other.jsonl"
    first.write_text("\n".join(lines) + "\n", encoding="utf-8")
    other.write_text("\n".join([lines[0].replace('"prediction": "', '"prediction": "x', 1), *lines[1:]]) + "\n")
    with pytest.warns(UserWarning, match="identities checked"):  # no own golden, none equal: identities only
        assert_matches_a_golden(other, [first], tmp_path / "absent.jsonl")
    assert_matches_a_golden(other, [first, other], tmp_path / "absent.jsonl")  # equal to a host's: no warning
    with pytest.raises(AssertionError, match="prediction"):
        assert_matches_a_golden(other, [first, other], first)  # its own host's golden differs
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0].replace('"config_id": "', '"config_id": "x', 1), *lines[1:]]) + "\n")
    with pytest.raises(AssertionError):
        assert_matches_a_golden(broken, [first, broken], broken)  # an identity no host can change


def test_the_comparison_sees_a_changed_answer(tmp_path: Path) -> None:
    """Mutation check: one changed prediction in an otherwise golden file is reported."""
    lines = (GOLDEN / "smoke_mock.jsonl").read_text(encoding="utf-8").splitlines()
    changed = lines[0].replace('"prediction": "', '"prediction": "x', 1)
    assert changed != lines[0]
    edited = tmp_path / "records.jsonl"
    edited.write_text("\n".join([changed, *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="prediction"):
        assert_same(GOLDEN / "smoke_mock.jsonl", edited)


def test_every_hosts_embedded_golden_has_the_same_answers_and_says_its_host() -> None:
    """The hosts' embedded goldens differ only where kernels can (not in identities), and each is in hosts.json."""
    goldens = embedded_goldens(GOLDEN, "smoke_embedded_1")
    hosts = json.loads((GOLDEN / "hosts.json").read_text(encoding="utf-8"))
    assert {g.name for g in goldens} == set(hosts), (sorted(hosts), [g.name for g in goldens])
    for golden in goldens[1:]:
        assert_same_identities(goldens[0], golden)
    assert goldens and host_key().startswith("simd-")
