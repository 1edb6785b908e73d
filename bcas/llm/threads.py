"""How many llama.cpp threads an embedded engine gets: the usable cores, shared.

llama.cpp's own default (half the machine's CPUs for generation, all of them for
prompt batches) ignores the CPU affinity a scheduler or container gives the process
and every other engine running beside it.  Several engines spinning on the same few
cores collapse throughput (0.8 tokens/s measured under load 7 against about 40 quiet,
issue 35), so an engine's share is

    usable cores (``os.sched_getaffinity``) // (xdist workers × engines in this process)

at least one.  ``PYTEST_XDIST_WORKER_COUNT`` (set by pytest-xdist in each worker)
counts the workers; the engines already open in this process, plus the one being
made, count the engines (the agent's model, a judge, a second model).  An engine
opened earlier keeps the share it was given.  ``BCAS_THREADS`` (a positive integer)
or an explicit ``n_threads`` overrides the rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from bcas.llm.base import ModelError

ENV_VAR = "BCAS_THREADS"


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def engine_threads(engines: int = 1, env: Mapping[str, str] | None = None, cores: int | None = None) -> int:
    """Threads for one engine when ``engines`` run in this process (see the module docstring)."""
    env = os.environ if env is None else env
    override = env.get(ENV_VAR, "").strip()
    if override:
        if not override.isdigit() or int(override) < 1:
            raise ModelError(f"{ENV_VAR} must be a positive integer, got {override!r}")
        return int(override)
    workers = env.get("PYTEST_XDIST_WORKER_COUNT", "").strip()
    n_workers = int(workers) if workers.isdigit() and int(workers) > 0 else 1
    total = usable_cores() if cores is None else cores
    return max(1, total // (n_workers * max(1, engines)))
