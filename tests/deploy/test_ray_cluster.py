"""The Ray job on a real local Ray cluster (``--address local``, 2 CPUs).

The promises: the merge of the job's 2 shards of the smoke grid equals the unsharded run
answer for answer; a shard whose pytest is killed mid-run is run again by Ray and the
merge still equals it; ``--address auto`` with no cluster is one line saying what to do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.deploy_runs import ROOT, SUITE, answers, launch_env
from support.skips import skip_if_no_ray

RAY_JOB = ROOT / "deploy" / "ray" / "bcas_ray_job.py"

pytestmark = skip_if_no_ray


def _shard_pytests(run_dir: Path, index: int) -> list[int]:
    """The pids of shard ``index``'s pytest of this run (found by its environment and command line)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"pytest" in cmdline
            and str(run_dir).encode() in cmdline
            and f"BCAS_SHARD_INDEX={index}".encode() in environ
        ):
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow  # a Ray cluster and three runs of the smoke grid: minutes on 2 busy cores
def test_ray_job_merge_equals_unsharded_with_a_killed_shard_retried(tmp_path: Path) -> None:
    env = launch_env(tmp_path)
    whole = tmp_path / "whole"
    reference = [sys.executable, "-m", "pytest", "benchmarks", "--bcas-model", "mock:gold", "--bcas-report"]
    done = subprocess.run(
        [*reference, str(whole), *SUITE, "-p", "no:cacheprovider", "-q"], cwd=ROOT, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stdout.decode()[-3000:]

    run = tmp_path / "sharded"
    job = [sys.executable, str(RAY_JOB), "--address", "local", "--num-cpus", "2", "--cpus-per-shard", "1"]
    job += ["--shards", "2", "--retries", "2", "--run", str(run), "--model", "mock:gold", "--", *SUITE]
    log = tmp_path / "job.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(job, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        killed = False
        deadline = time.monotonic() + 900
        shard_records = run / "shard-1-of-2" / "records.jsonl"
        while proc.poll() is None and time.monotonic() < deadline:
            if not killed and shard_records.is_file() and shard_records.stat().st_size > 0:
                for pid in _shard_pytests(run, 0):  # shard 1's pytest, mid-run: some answers written
                    os.kill(pid, signal.SIGKILL)
                    killed = True
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text[-4000:]
    assert killed, "shard 1 ended before it could be killed mid-run"
    assert "shard 1/2: pytest killed by signal 9" in text  # the kill happened inside the task ...
    assert "shard 1/2: pytest exited 0" in text  # ... and Ray ran the task again to its end
    assert answers(run) == answers(whole)


def test_address_auto_without_a_cluster_is_one_line(tmp_path: Path) -> None:
    env = launch_env(tmp_path)
    env["RAY_TMPDIR"] = str(tmp_path / "ray")  # no cluster file of any other session
    job = [sys.executable, str(RAY_JOB), "--shards", "2", "--run", str(tmp_path / "run"), "--model", "mock:gold"]
    done = subprocess.run(job, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("no Ray cluster to join at --address auto")
    assert "ray start --head" in lines[-1] and "--address local" in lines[-1]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()  # no shard ran


# One smoke case (BM25, one search, 2k tokens: the cheapest), 2 items: one per shard.
EMBEDDED_SUITE = [*SUITE, "-k", "hotpotqa-bm25/s1/t2k", "--bcas-no-cache"]


@pytest.mark.slow  # the embedded model answers 4 times (2 items, sharded and not): minutes on 2 busy cores
def test_ray_job_on_the_embedded_model_merge_equals_unsharded(tmp_path: Path) -> None:
    """Both runs generate (``--bcas-no-cache``: the second cannot copy the first's answers
    from the generation cache); a 1-CPU cluster and one CPU per shard, so the shards run
    one after another and one llama.cpp engine (one thread) runs at a time."""
    env = launch_env(tmp_path)
    whole = tmp_path / "whole"
    reference = [sys.executable, "-m", "pytest", "benchmarks", "--bcas-model", "embedded", "--bcas-report"]
    done = subprocess.run(
        [*reference, str(whole), *EMBEDDED_SUITE, "-p", "no:cacheprovider", "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
    )
    assert done.returncode == 0, done.stdout.decode()[-3000:]

    run = tmp_path / "sharded"
    job = [sys.executable, str(RAY_JOB), "--address", "local", "--num-cpus", "1", "--cpus-per-shard", "1"]
    job += ["--shards", "2", "--run", str(run), "--model", "embedded", "--", *EMBEDDED_SUITE]
    done = subprocess.run(job, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "shard 1/2: pytest exited 0" in done.stdout and "shard 2/2: pytest exited 0" in done.stdout
    merged = answers(run)
    assert merged == answers(whole) and len(merged) == 2
    assert all(key[0].startswith("gguf:sha256:") for key in merged)  # the embedded GGUF answered
    assert all(rec["tokens_out"] > 0 for rec in merged.values())  # generated, not a test double
    for k in (1, 2):  # each shard answered one of the two items
        assert len((run / f"shard-{k}-of-2" / "records.jsonl").read_text().splitlines()) == 1
