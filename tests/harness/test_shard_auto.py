"""``--bcas-shard auto`` from scheduler variables, shards in RUN/shard-K-of-N/, the merge's checks.

The promise (issue 27): a Slurm array and a Kubernetes Indexed Job, played here as local
processes with their variables, each task against its own loopback server, write one
shard each under one run folder; ``bcas merge RUN`` joins them into
the records of the unsharded run; shards that are not parts of one run are refused,
naming the shard and the field.  The server answers as the ``mock`` backend's ``random``
variant over HTTP (:mod:`bcas.testing.mock_server`); retrieval is the real BM25 index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from bcas.cli import main as bcas_main
from bcas.harness.merge import find_shards
from bcas.shard import Shard, ShardError, parse_shard, shard_number
from bcas.testing.fault_server import FaultServer
from bcas.testing.mock_server import mock_reply
from bcas.testing.project import budget_grid, codename_items, grid_project, preload, read_records
from tests.support.deploy_runs import lasting_summary

preload("bcas.harness.merge", "bcas.harness.estimate")

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
SCHEDULER_VARS = (
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_ARRAY_TASK_COUNT",
    "JOB_COMPLETION_INDEX",
    "BCAS_SHARD_INDEX",
    "BCAS_SHARD_COUNT",
)
VOLATILE = {"run_id", "created_at", "latency_s", "timing"}  # where and when an answer was made, not what it is
SERVED = "mock-random"


def _lasting(value: object) -> object:
    """``value`` without timing and provenance fields, at any depth (a step has its own latency)."""
    if isinstance(value, dict):
        return {k: _lasting(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_lasting(v) for v in value]
    return value


def answers(run: Path) -> dict[tuple, object]:
    """Records by answer identity, without timing and provenance fields."""
    out = {}
    for rec in read_records(run):
        key = tuple(rec[k] for k in ("model_fingerprint", "config_id", "dataset_hash", "item_id", "prompt_hash"))
        out[(*key, rec["epoch"])] = _lasting(rec)
    return out


# -- the scheduler's variables ---------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "3"}, (1, 3)),  # --array=0-2, MIN unset: 0
        ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"}, (3, 3)),
        (  # --array=1-3: the array does not start at 0
            {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "3"},
            (1, 3),
        ),
        (  # --array=10-16:3 -> tasks 10, 13, 16
            {"SLURM_ARRAY_TASK_ID": "13", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_MAX": "16"}
            | {"SLURM_ARRAY_TASK_STEP": "3", "SLURM_ARRAY_TASK_COUNT": "3"},
            (2, 3),
        ),
        ({"JOB_COMPLETION_INDEX": "1", "BCAS_SHARD_COUNT": "2"}, (2, 2)),
        ({"BCAS_SHARD_INDEX": "3", "BCAS_SHARD_COUNT": "4"}, (4, 4)),
        ({"JOB_COMPLETION_INDEX": "1", "BCAS_SHARD_INDEX": "1", "BCAS_SHARD_COUNT": "2"}, (2, 2)),  # agree
    ],
)
def test_auto_reads_the_schedulers_variables(env: dict[str, str], expected: tuple[int, int]) -> None:
    shard = parse_shard("auto", env)
    assert shard is not None and (shard.index, shard.count) == expected
    assert shard.source and shard.folder == f"shard-{expected[0]}-of-{expected[1]}"
    assert shard == Shard(*expected)  # where it came from is not part of what it is


def test_auto_with_the_count_as_an_option() -> None:
    assert parse_shard("auto/2", {"JOB_COMPLETION_INDEX": "0"}) == Shard(1, 2)
    assert parse_shard(" AUTO / 3 ", {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"}) == Shard(3, 3)


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("auto", {}, "auto found no shard in the environment"),
        ("auto", {"JOB_COMPLETION_INDEX": "1"}, "set BCAS_SHARD_COUNT"),
        ("auto", {"JOB_COMPLETION_INDEX": "2", "BCAS_SHARD_COUNT": "2"}, "expected an index from 0 to 1"),
        ("auto", {"SLURM_ARRAY_TASK_ID": "1"}, "neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX"),
        ("auto", {"SLURM_ARRAY_TASK_COUNT": "3"}, "SLURM_ARRAY_TASK_ID is not"),
        ("auto", {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "3"}, "SLURM_ARRAY_TASK_ID='x'"),
        (
            "auto",
            {"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "9"}
            | {"SLURM_ARRAY_TASK_COUNT": "3"},
            "an array with gaps",
        ),
        ("auto", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3"}, "past the array's last task"),
        (
            "auto",
            {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "9"}
            | {"SLURM_ARRAY_TASK_STEP": "2"},
            "not in the array",
        ),
        (
            "auto",
            {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2", "JOB_COMPLETION_INDEX": "1"}
            | {"BCAS_SHARD_COUNT": "2"},
            "name different shards",
        ),
        ("auto", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2", "BCAS_SHARD_COUNT": "3"}, "but"),
        ("auto/3", {"JOB_COMPLETION_INDEX": "0", "BCAS_SHARD_COUNT": "2"}, "auto/3 disagrees with BCAS_SHARD_COUNT=2"),
        ("auto/0", {"JOB_COMPLETION_INDEX": "0"}, "at least one shard"),
        ("autox", {}, "expected K/N"),
    ],
)
def test_auto_refuses_missing_or_inconsistent_variables(text: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(ShardError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_shard(text, env)


# -- played as local processes ---------------------------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout-like folder: benchmarks/ with a small BM25 grid over 12 codename items."""
    root = tmp_path_factory.mktemp("home")
    (root / "pytest.ini").write_text("[pytest]\n")
    bench = root / "benchmarks"
    grid_project(bench, budget_grid("tiny", [bench / "tiny.jsonl"]), datasets={"tiny.jsonl": codename_items(12)})
    return root


def clean_env(home: Path, machine: str, **extra: str) -> dict[str, str]:
    """The environment of one process, as on its own machine: no scheduler variables but those
    given, its own generation cache (a shared one would mark answers as cache hits)."""
    env = {k: v for k, v in os.environ.items() if k not in SCHEDULER_VARS and not k.startswith("PYTEST_")}
    env.update(PYTHONPATH=str(REPO), BCAS_CACHE_DIR=str(home / "cache" / machine), **extra)
    return env


def suite(base_url: str, report: Path, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "benchmarks",
        "--bcas-grid",
        "tiny",
        "--bcas-model",
        f"openai:{SERVED}",
        "--bcas-base-url",
        base_url,
        "--bcas-report",
        str(report),
        "-p",
        "no:cacheprovider",
        "-q",
        *more,
    ]


@pytest.fixture(scope="module")
def unsharded(home: Path) -> Path:
    run = home / "whole"
    with FaultServer(reply=mock_reply("random"), model=SERVED) as server:
        done = subprocess.run(
            suite(server.base_url, run), cwd=home, env=clean_env(home, "whole"), capture_output=True, text=True
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(read_records(run)) == 24  # 12 items x 2 configurations
    return run


@pytest.mark.proof_stage  # three shard processes and a merge, most of a minute: CI's required proof stage
def test_kubernetes_indexed_job_played_locally_merges_to_the_unsharded_run(home: Path, unsharded: Path) -> None:
    job = next(
        d for d in yaml.safe_load_all((REPO / "deploy/k8s/bcas-shards-job.yaml").read_text()) if d["kind"] == "Job"
    )
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][-3:] == ["-m", "pytest", "benchmarks"] and "--bcas-shard=auto" in container["args"]
    run = home / "k8s-run"
    servers = [FaultServer(reply=mock_reply("random"), model=SERVED).start() for _ in range(2)]
    try:
        procs = [
            subprocess.Popen(
                suite(server.base_url, run, "--bcas-shard", "auto"),
                cwd=home,
                env=clean_env(home, f"k8s-{index}", JOB_COMPLETION_INDEX=str(index), BCAS_SHARD_COUNT="2"),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for index, server in enumerate(servers)
        ]
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for server in servers:
            server.stop()
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out[-3000:]
    assert all(server.requests > 1 for server in servers)  # each index asked its own server
    assert [p.name for p in find_shards(run)] == ["shard-1-of-2", "shard-2-of-2"]
    for k, folder in enumerate(find_shards(run), start=1):
        session = json.loads((folder / "run.json").read_text())["sessions"][0]
        assert session["shard"] == f"{k}/2"
        assert session["shard_source"] == f"JOB_COMPLETION_INDEX={k - 1}, BCAS_SHARD_COUNT=2"
        assert {r["item_id"] for r in read_records(folder)} == {
            r["item_id"] for r in read_records(unsharded) if shard_number(r["item_id"], 2) == k
        }

    assert bcas_main(["merge", str(run)]) == 0  # the parent folder: its shards are found
    assert answers(run) == answers(unsharded)
    assert lasting_summary(run) == lasting_summary(unsharded)
    assert any(not r["correct_em"] for r in read_records(run))  # random spans: a real comparison


@dataclass
class SlurmArray:
    run: Path
    env: dict[str, str]  # the batch scripts' environment (as submit.sh exports it)
    log: Path  # the vllm stand-ins' request counts
    outputs: list[str]


@pytest.fixture(scope="module")
def slurm_array(home: Path, tmp_path_factory: pytest.TempPathFactory) -> SlurmArray:
    """deploy/slurm/bcas-shards.sbatch played as a 3-task array (--array=1-3), the tasks at once,
    each starting its own stand-in for `vllm serve` (tests/support/fake_vllm.py)."""
    from bcas.processes import free_port

    tmp = tmp_path_factory.mktemp("slurm")
    (tmp / "bin").mkdir()
    vllm = tmp / "bin" / "vllm"
    vllm.write_text(
        f"#!{sys.executable}\nimport runpy, sys\n"
        f"sys.argv[0] = 'vllm'\nrunpy.run_path({str(REPO / 'tests/support/fake_vllm.py')!r}, run_name='__main__')\n"
    )
    vllm.chmod(0o755)
    run, log = home / "slurm-run", tmp / "vllm.log"
    env = clean_env(
        home,
        "unused",
        PATH=f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
        BCAS_HOME=str(home),
        BCAS_DEPLOY=str(REPO / "deploy/slurm"),
        BCAS_RUN=str(run),
        BCAS_SERVE_MODEL=SERVED,
        BCAS_PYTHON=sys.executable,
        BCAS_ARGS="--bcas-grid tiny -q",
        VLLM_START_TIMEOUT="60",
        FAKE_VLLM_LOG=str(log),
        SLURM_ARRAY_JOB_ID="77",
        TMPDIR=str(tmp),
    )
    del env["BCAS_CACHE_DIR"]  # the scripts' default: node-local, $TMPDIR/bcas-cache-$SLURM_JOB_ID
    array = {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "3", "SLURM_ARRAY_TASK_COUNT": "3"}
    tasks = [
        subprocess.Popen(
            ["bash", str(REPO / "deploy/slurm/bcas-shards.sbatch")],
            cwd=tmp,
            env=env
            | array
            | {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_JOB_ID": f"77{task}", "VLLM_PORT": str(free_port())},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for task in (1, 2, 3)
    ]
    outputs = [t.communicate(timeout=600)[0] for t in tasks]
    for task, out in zip(tasks, outputs, strict=True):
        assert task.returncode == 0, out[-3000:]
    return SlurmArray(run, env, log, outputs)


def _merge_job(array: SlurmArray, **extra: str) -> subprocess.CompletedProcess[str]:
    from bcas.processes import free_port

    env = array.env | {"VLLM_PORT": str(free_port()), "SLURM_JOB_ID": "78"} | extra
    script = str(REPO / "deploy/slurm/bcas-merge.sbatch")
    done = subprocess.run(["bash", script], cwd=array.log.parent, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.proof_stage  # the batch scripts' shard runs, most of a minute: CI's required proof stage
def test_slurm_array_played_locally_through_the_batch_scripts(slurm_array: SlurmArray, unsharded: Path) -> None:
    for out in slurm_array.outputs:
        assert "vllm_up: mock-random served at http://127.0.0.1:" in out
    served = [line.split() for line in slurm_array.log.read_text().splitlines()]
    assert len(served) == 3 and len({port for port, _, _ in served}) == 3  # three servers, one per task
    assert all(int(calls) > 0 for _, _, calls in served)  # each answered its task's items
    run = slurm_array.run
    assert [p.name for p in find_shards(run)] == ["shard-1-of-3", "shard-2-of-3", "shard-3-of-3"]
    first = json.loads((run / "shard-1-of-3" / "run.json").read_text())["sessions"][0]
    assert first["shard"] == "1/3" and first["shard_source"].startswith("SLURM_ARRAY_TASK_ID=1 (MIN=1")

    merge = _merge_job(slurm_array)  # no BCAS_BASELINE: merge only
    assert "merged 3 run folders" in merge.stdout and "no BCAS_BASELINE, no gate" in merge.stdout
    assert answers(run) == answers(unsharded)
    assert lasting_summary(run) == lasting_summary(unsharded)


@pytest.mark.slow
def test_slurm_merge_job_gates_without_asking_again(slurm_array: SlurmArray, unsharded: Path) -> None:
    """bcas-merge.sbatch with a baseline: merge, then the suite on the merged folder gates it."""
    merge = _merge_job(slurm_array, BCAS_BASELINE=str(unsharded))
    assert "merged 3 run folders" in merge.stdout and "overall: PASS" in merge.stdout
    assert answers(slurm_array.run) == answers(unsharded)
    # The gate's run found every answer recorded: its server answered 1-token preflight probes only.
    _, probes, calls = slurm_array.log.read_text().splitlines()[-1].split()
    assert int(probes) >= 1 and calls == "0" and len(read_records(slurm_array.run)) == 24
    sessions = json.loads((slurm_array.run / "run.json").read_text())["sessions"]
    assert sessions[-1]["shard"] is None and sessions[-1]["exit_status"] == 0
    assert sessions[-1]["options"]["baseline"]["value"] == str(unsharded)


# -- the merge's checks (in-process runs of the mock backend) ----------------------------


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.Pytester]:
    for name in SCHEDULER_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(
        pytester.path, budget_grid("tiny", [pytester.path / "tiny.jsonl"]), datasets={"tiny.jsonl": codename_items(12)}
    )
    yield pytester


def _shard(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run: Path, index: int, *more: str) -> None:
    monkeypatch.setenv("BCAS_SHARD_INDEX", str(index))
    monkeypatch.setenv("BCAS_SHARD_COUNT", "2")
    result = project.runpytest(
        "--bcas-grid", "tiny", "--bcas-shard", "auto", "--bcas-report", str(run), "-p", "no:cacheprovider", *more
    )
    assert result.ret == 0, result.stdout.str()[-3000:]


def test_merge_refuses_shards_of_another_model_or_option_naming_shard_and_field(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    gold = ("--bcas-model", "mock:gold")
    odd_model, odd_option = project.path / "odd-model", project.path / "odd-option"
    _shard(project, monkeypatch, odd_model, 0, *gold)
    _shard(project, monkeypatch, odd_model, 1, "--bcas-model", "mock:random")
    shutil.copytree(odd_model / "shard-1-of-2", odd_option / "shard-1-of-2")  # the same first shard
    _shard(project, monkeypatch, odd_option, 1, *gold, "--bcas-limit", "10")

    assert bcas_main(["merge", str(odd_model)]) == 2
    err = capsys.readouterr().err
    assert f"shard 2/2 ({odd_model / 'shard-2-of-2'}): models is " in err
    assert "option --bcas-model is" in err and "shard 1/2" in err
    assert bcas_main(["merge", str(odd_option)]) == 2
    err = capsys.readouterr().err
    assert f'shard 2/2 ({odd_option / "shard-2-of-2"}): option --bcas-limit is "10"' in err
    assert "dataset hash of" in err  # a limit draws another subset: another dataset hash
    assert not (odd_option / "records.jsonl").exists()

    # --allow-mismatch merges and writes what differed into the merged run.json.
    assert bcas_main(["merge", str(odd_option), "--allow-mismatch"]) == 0
    assert "mismatch (--allow-mismatch): shard 2/2" in capsys.readouterr().out
    manifest = json.loads((odd_option / "run.json").read_text())
    assert {m["field"] for m in manifest["mismatches"]} >= {"option --bcas-limit"}
    assert all(m["shard"] == "2/2" for m in manifest["mismatches"])
    assert [m["shard"] for m in manifest["merged_from"]] == ["1/2", "2/2"]


def test_merge_partial_names_the_missing_shard(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    run = project.path / "run"
    _shard(project, monkeypatch, run, 1, "--bcas-model", "mock:gold")
    assert bcas_main(["merge", str(run)]) == 2
    assert "shards ['1/2'] are missing" in capsys.readouterr().err
    assert bcas_main(["merge", str(run), "--partial"]) == 0
    assert "missing shards (--partial): 1/2" in capsys.readouterr().out
    assert json.loads((run / "run.json").read_text())["missing_shards"] == ["1/2"]
    # The other shard arrives: merging again replaces the partial merge.
    _shard(project, monkeypatch, run, 0, "--bcas-model", "mock:gold")
    assert bcas_main(["merge", str(run)]) == 0
    assert len(read_records(run)) == 24 and "missing_shards" not in json.loads((run / "run.json").read_text())


def test_auto_without_variables_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--bcas-grid", "tiny", "--bcas-model", "mock:gold", "--bcas-shard", "auto")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--bcas-shard: auto found no shard in the environment" in result.stderr.str()


def test_estimate_splits_the_run_as_the_shards_will(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    gold = ("--bcas-model", "mock:gold", "--bcas-grid", "tiny", "-p", "no:cacheprovider")
    est = project.runpytest(*gold, "--bcas-shard", "1/2", "--bcas-estimate", "--bcas-report", str(project.path / "e"))
    assert est.ret == 0, est.stdout.str()[-3000:]
    rows = {}
    for line in est.stdout.lines:
        parts = line.split()
        if parts and parts[0] in ("1/2", "2/2"):
            rows[parts[0]] = (int(parts[1]), int(parts[2]))
    # The estimate's items and calls per shard are those the two shard runs make.
    for k in (1, 2):
        run = project.path / f"s{k}"
        done = project.runpytest(*gold, "--bcas-shard", f"{k}/2", "--bcas-report", str(run))
        assert done.ret == 0
        recs = read_records(run)
        assert rows[f"{k}/2"] == (len(recs), sum(r["llm_calls"] for r in recs)), (k, rows)
    assert sum(items for items, _ in rows.values()) == 24
    assert "the array takes about" in est.stdout.str()
