"""The shards of a bcas run as Ray tasks, then their merge (and, with --baseline, the gate).

Submit it to a Ray cluster whose nodes have bcas installed and see one run folder::

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python deploy/ray/bcas_ray_job.py --shards 8 --run /shared/runs/ss-qwen3-8b \\
        --base-url http://vllm.internal:8000/v1 --model openai:Qwen/Qwen3-8B \\
        -- --bcas-grid search_scaling --bcas-concurrency 32

Each task runs ``python -m pytest benchmarks ... --bcas-shard auto`` with
``BCAS_SHARD_INDEX`` (0-based) and ``BCAS_SHARD_COUNT`` in its environment, so shard K of
N writes into ``RUN/shard-K-of-N/``; the model is served apart (a vLLM server or a Ray
Serve deployment of vLLM behind one OpenAI-compatible URL; repeat --base-url for several).
When every task has ended, ``bcas merge RUN`` joins the shards (it
refuses missing shards and shards that disagree); with ``--baseline`` the suite then runs
once more, unsharded, on the merged folder to gate it (nothing is asked again but the
preflight).  ``--local`` runs the same commands as local processes instead of Ray tasks
(Ray is not imported): a dry run of the job on one machine.

Change: --shards, --cpus-per-shard (a shard is I/O bound on the server; its retrieval
indexes want a few cores), --run (storage every node mounts), --model/--base-url, and
the suite's options after ``--``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence

INDEX_VAR = "BCAS_SHARD_INDEX"
COUNT_VAR = "BCAS_SHARD_COUNT"


def shard_command(args: argparse.Namespace, shard: bool = True, gate: bool = False) -> list[str]:
    """The pytest command line of one shard (``shard``) or of the gate on the merged run."""
    cmd = [sys.executable, "-m", "pytest", args.tests, "--bcas-model", args.model, "--bcas-report", args.run]
    for url in args.base_url:
        cmd += ["--bcas-base-url", url]
    if shard:
        cmd += ["--bcas-shard", "auto"]
    if gate:
        cmd += ["--bcas-baseline", args.baseline]
    return [*cmd, "-p", "no:cacheprovider", *args.suite]


def shard_env(index: int, count: int) -> dict[str, str]:
    """The environment of shard ``index`` (0-based) of ``count``: what --bcas-shard auto reads."""
    return {**os.environ, INDEX_VAR: str(index), COUNT_VAR: str(count)}


NO_CLUSTER = (
    "no Ray cluster to join at --address auto: start one with `ray start --head --num-cpus N` "
    "(then run this again), or use --address local for a cluster inside this job on this machine"
)


class ShardKilled(RuntimeError):
    """A shard's pytest was killed by a signal: Ray runs the task again (``--retries``), and
    the new pytest resumes the shard's folder (answers already recorded are not asked again)."""


def _die_with_parent() -> None:
    """In the shard's pytest: be killed when the task's worker process dies (Linux), so a
    retried task never runs beside a leftover pytest writing the same shard folder."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run_shard(command: Sequence[str], index: int, count: int, cwd: str) -> int:
    """Run one shard to its end; its exit status (1: a case failed, 2+: it could not run).

    A pytest killed by a signal raises :class:`ShardKilled` instead, which Ray retries."""
    done = subprocess.run(list(command), env=shard_env(index, count), cwd=cwd, check=False, preexec_fn=_die_with_parent)
    if done.returncode < 0:
        print(f"shard {index + 1}/{count}: pytest killed by signal {-done.returncode}", flush=True)
        raise ShardKilled(f"shard {index + 1}/{count} killed by signal {-done.returncode}")
    print(f"shard {index + 1}/{count}: pytest exited {done.returncode}", flush=True)
    return done.returncode


def run_shards(args: argparse.Namespace) -> list[int]:
    command, cwd = shard_command(args), os.getcwd()
    if args.local:
        return [run_shard(command, k, args.shards, cwd) for k in range(args.shards)]
    import ray  # only on a Ray cluster

    if args.address == "local":  # a cluster inside this job, on this machine's --num-cpus
        ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False)
    else:
        try:
            ray.init(address=args.address)
        except ConnectionError as exc:
            raise SystemExit(NO_CLUSTER if args.address == "auto" else f"Ray cluster {args.address}: {exc}") from None
    task = ray.remote(num_cpus=args.cpus_per_shard, max_retries=args.retries, retry_exceptions=[ShardKilled])
    return list(ray.get([task(run_shard).remote(command, k, args.shards, cwd) for k in range(args.shards)]))


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, required=True, help="N: how many shards (Ray tasks)")
    parser.add_argument("--run", required=True, help="the run folder, on storage every node mounts")
    parser.add_argument("--model", required=True, help="--bcas-model of every shard, e.g. openai:Qwen/Qwen3-8B")
    parser.add_argument("--base-url", action="append", default=[], help="the model server's /v1 URL (repeatable)")
    parser.add_argument("--baseline", default=None, help="gate the merged run against this run folder or JSON")
    parser.add_argument("--tests", default="benchmarks", help="the test folder (default: benchmarks)")
    parser.add_argument(
        "--address",
        default="auto",
        help="the Ray cluster (default auto: the one this job runs in); local: a cluster inside this job",
    )
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the --address local cluster")
    parser.add_argument("--cpus-per-shard", type=float, default=4.0)
    parser.add_argument("--retries", type=int, default=1, help="Ray retries of a shard whose process was killed")
    parser.add_argument("--local", action="store_true", help="run the shards as local processes, one by one")
    parser.add_argument("suite", nargs="*", help="the suite's options, after --")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    statuses = run_shards(args)
    crashed = [k + 1 for k, status in enumerate(statuses) if status not in (0, 1)]
    merged = subprocess.run([sys.executable, "-m", "bcas", "merge", args.run], check=False).returncode
    if merged != 0:
        print(f"merge failed (exit {merged}); shards that could not run: {crashed or 'none'}", file=sys.stderr)
        return merged
    if args.baseline:
        return subprocess.run(shard_command(args, shard=False, gate=True), check=False).returncode
    return 1 if any(status != 0 for status in statuses) else 0


if __name__ == "__main__":
    raise SystemExit(main())
