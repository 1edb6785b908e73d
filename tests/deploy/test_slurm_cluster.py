"""The shipped Slurm scripts on a real one-node Slurm cluster (deploy/slurm/local-cluster.sh:
munge, slurmctld and slurmd on localhost, 2 CPUs), submitted as a user would.

The promises: ``submit.sh`` (the shard array and the merge job after it) on the smoke grid
with ``mock:gold`` leaves a merged run equal, answer for answer, to the unsharded run; an
array task cancelled with ``scancel`` mid-run and resumed by submitting the same command
again loses nothing; the cluster script stops everything it started."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.deploy_runs import ROOT, SUITE, answers, launch_env

CLUSTER = ROOT / "deploy" / "slurm" / "local-cluster.sh"
SUBMIT = ROOT / "deploy" / "slurm" / "submit.sh"
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel")

pytestmark = [
    pytest.mark.skipif(
        any(shutil.which(t) is None for t in TOOLS) or os.geteuid() != 0,
        reason="needs slurm-wlm and munge (apt-get install -y slurm-wlm munge) and root",
    ),
    pytest.mark.slow,  # a cluster and three runs of the smoke grid: minutes on 2 busy cores
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a one-node cluster started for this test; stopped at the end."""
    env = launch_env(tmp_path)
    env.update(BCAS_SLURM_DIR=str(tmp_path / "slurm"), BCAS_SLURM_PORT=str(_free_port()), BCAS_SLURM_CPUS="2")
    env["SLURM_CONF"] = str(tmp_path / "slurm" / "slurm.conf")
    try:
        subprocess.run(["bash", str(CLUSTER), "start"], env=env, check=True, timeout=180)
        yield env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop"], env=env, check=False, timeout=120)
        for name in ("slurmd", "slurmctld", "munged"):  # the stop left nothing running
            assert not (tmp_path / "slurm" / f"{name}.pid").exists()


def _submit(env: dict[str, str], run: Path) -> str:
    submit_env = {
        **env,
        "SHARDS": "2",
        "BCAS_RUN": str(run),
        "BCAS_MODEL": "mock:gold",
        "BCAS_PYTHON": sys.executable,
        "BCAS_ARGS": " ".join(SUITE),
        # the scripts ask for a GPU node; this one has 2 CPUs and no GPU
        "SBATCH_ARGS": f"--gpus-per-node=0 --cpus-per-task=1 --mem=1G --chdir={run}",
    }
    run.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["bash", str(SUBMIT)], env=submit_env, check=True, capture_output=True, text=True)
    assert out.stdout.startswith("submitted: shards ")
    return out.stdout.split()[2]  # the array's job id


def _wait_empty(env: dict[str, str], timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True, check=True).stdout
        if not queue.strip():
            return
        time.sleep(1)
    raise AssertionError("the jobs did not finish")


def _whole(env: dict[str, str], tmp_path: Path) -> Path:
    whole = tmp_path / "whole"
    command = [sys.executable, "-m", "pytest", "benchmarks", "--bcas-model", "mock:gold", "--bcas-report", str(whole)]
    done = subprocess.run([*command, *SUITE, "-p", "no:cacheprovider", "-q"], cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == 0, done.stdout.decode()[-3000:]
    return whole


def test_submit_sh_merge_equals_unsharded_and_scancel_resumes(slurm: dict[str, str], tmp_path: Path) -> None:
    whole = _whole(slurm, tmp_path)

    run = tmp_path / "run"
    _submit(slurm, run)
    _wait_empty(slurm)
    assert answers(run) == answers(whole)

    cancelled = tmp_path / "cancelled"
    array = _submit(slurm, cancelled)
    shard_records = cancelled / "shard-1-of-2" / "records.jsonl"
    deadline = time.monotonic() + 600
    while not (shard_records.is_file() and shard_records.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    subprocess.run(["scancel", f"{array}_0"], env=slurm, check=True)  # array task 0, mid-run
    _wait_empty(slurm)
    assert len(answers(cancelled / "shard-1-of-2")) < len(answers(whole)) // 2 + 1
    _submit(slurm, cancelled)  # the same command again: the cancelled shard resumes
    _wait_empty(slurm)
    assert answers(cancelled) == answers(whole)
