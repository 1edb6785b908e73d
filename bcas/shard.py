"""Sharded runs: a deterministic partition of a run's items over N machines or CI jobs.

``--bcas-shard K/N`` (``1 <= K <= N``) runs, in every case, only the items whose id
hashes to shard ``K``: ``1 + (first 8 bytes of sha256(item id), big-endian) mod N``.
The hash is computed from the id's UTF-8 bytes alone, so every machine, Python
version and process assigns an item to the same shard, all epochs of an item land on
one shard, and the N shards together hold every item exactly once.

A shard is a filter on which items of a case run, nothing more: the item subset
(``--bcas-limit``, ``--bcas-seed``) is drawn first, over the whole dataset, so the
dataset hash, configuration ids and answer identities are those of the unsharded run
and ``bcas merge SHARD_RUN... --out RUN`` (:mod:`bcas.harness.merge`)
joins the shards' records into the unsharded run's.  A case without per-item records
(the RSC probe) runs whole on the one shard its case id hashes to.

``--bcas-shard auto`` (or ``auto/N``) reads K and N from the scheduler that started the
process (:func:`shard_from_env`), so one command line serves every task of an array:

* Slurm job arrays: ``SLURM_ARRAY_TASK_ID`` with ``SLURM_ARRAY_TASK_MIN`` (0 when
  unset), ``SLURM_ARRAY_TASK_STEP`` (1 when unset), and ``SLURM_ARRAY_TASK_COUNT`` or
  ``SLURM_ARRAY_TASK_MAX``: ``K = (ID - MIN) / STEP + 1``; an array with gaps
  (``--array=1,4,9``) is refused, its IDs do not number the shards;
* Kubernetes Indexed Jobs: ``JOB_COMPLETION_INDEX`` (0-based), ``K = index + 1``, with N
  from ``BCAS_SHARD_COUNT`` (the Job sets it to its ``completions``) or ``auto/N``;
* anything else, Ray tasks included: ``BCAS_SHARD_INDEX`` (0-based) and
  ``BCAS_SHARD_COUNT``, set by the launcher for each task (``deploy/ray/``).

When several of these are set they must name the same shard; ``BCAS_SHARD_COUNT`` and
the ``/N`` of ``auto/N`` must agree with every count found.  Such a shard writes into
``RUN/shard-K-of-N/`` (:attr:`Shard.folder`) under the run folder every task is given.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_AUTO = re.compile(r"^\s*auto\s*(?:/\s*(?P<count>\d+)\s*)?$", re.IGNORECASE)
SHARD_FOLDER = re.compile(r"^shard-(?P<index>\d+)-of-(?P<count>\d+)$")
COUNT_VAR = "BCAS_SHARD_COUNT"
INDEX_VAR = "BCAS_SHARD_INDEX"
SLURM_VARS = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_COUNT")
KUBERNETES_VAR = "JOB_COMPLETION_INDEX"


class ShardError(ValueError):
    """A shard specification is malformed; the message says what was expected."""


def shard_number(key: str, count: int) -> int:
    """The shard (1-based, of ``count``) that ``key`` (an item id) belongs to."""
    if count < 1:
        raise ShardError(f"a run has at least one shard, got {count}")
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return 1 + int.from_bytes(digest[:8], "big") % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based).

    ``source``: where ``--bcas-shard auto`` found it (the variables and their values);
    ``None`` for a shard given as K/N.
    """

    index: int
    count: int
    source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ShardError(f"shard {self.index}/{self.count}: expected K/N with 1 <= K <= N")

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def folder(self) -> str:
        """The shard's folder under a shared run folder: ``shard-K-of-N``."""
        return f"shard-{self.index}-of-{self.count}"

    def owns(self, key: str) -> bool:
        """Whether the item (or case) with id ``key`` runs on this shard."""
        return shard_number(key, self.count) == self.index


def _whole(env: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ShardError(f"{name}={raw!r}: expected a whole number >= {minimum}")
    return value


def _slurm(env: Mapping[str, str]) -> Shard | None:
    """A Slurm array task: K from the task ID's place in the array (min, step), N its size."""
    task = _whole(env, "SLURM_ARRAY_TASK_ID")
    if task is None:
        stray = [name for name in SLURM_VARS[1:] if env.get(name)]
        if stray:
            raise ShardError(f"{stray[0]} is set but SLURM_ARRAY_TASK_ID is not; is this a Slurm array task?")
        return None
    low = _whole(env, "SLURM_ARRAY_TASK_MIN") or 0
    step = _whole(env, "SLURM_ARRAY_TASK_STEP", minimum=1) or 1
    high = _whole(env, "SLURM_ARRAY_TASK_MAX")
    count = _whole(env, "SLURM_ARRAY_TASK_COUNT", minimum=1)
    where = f"SLURM_ARRAY_TASK_ID={task} (MIN={low}, STEP={step}, MAX={high}, COUNT={count})"
    if high is not None:
        if high < low:
            raise ShardError(f"{where}: SLURM_ARRAY_TASK_MAX is below SLURM_ARRAY_TASK_MIN")
        span = (high - low) // step + 1
        if count is not None and count != span:
            raise ShardError(
                f"{where}: the range MIN..MAX by STEP holds {span} tasks, not COUNT; an array with gaps "
                "(--array=1,4,9) cannot number shards: submit a contiguous range (e.g. --array=0-7 for 8 shards)"
            )
        count = span
    if count is None:
        raise ShardError(f"{where}: neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX is set")
    if task < low or (task - low) % step:
        raise ShardError(f"{where}: the task ID is not in the array MIN, MIN+STEP, ...")
    index = (task - low) // step + 1
    if index > count:
        raise ShardError(f"{where}: the task ID is past the array's last task ({low + (count - 1) * step})")
    return Shard(index, count, where)


def _indexed(env: Mapping[str, str], name: str, count: int | None, count_from: str) -> Shard | None:
    """A 0-based index variable (Kubernetes, Ray, any launcher) with the count given apart."""
    index = _whole(env, name)
    if index is None:
        return None
    if count is None:
        raise ShardError(
            f"{name}={index} is set but the shard count is not: set {COUNT_VAR} (a Kubernetes Job: to "
            "its completions) or give --bcas-shard auto/N"
        )
    if index >= count:
        raise ShardError(f"{name}={index} with {count_from}: expected an index from 0 to {count - 1}")
    return Shard(index + 1, count, f"{name}={index}, {count_from}")


def shard_from_env(env: Mapping[str, str], count: int | None = None) -> Shard:
    """The shard a scheduler's variables in ``env`` name (see the module docstring).

    ``count``: the N of ``--bcas-shard auto/N``; every count found must equal it.
    """
    env_count = _whole(env, COUNT_VAR, minimum=1)
    if count is not None and env_count is not None and count != env_count:
        raise ShardError(f"auto/{count} disagrees with {COUNT_VAR}={env_count}")
    given = count if count is not None else env_count
    count_from = f"N={count} (auto/N)" if count is not None else f"{COUNT_VAR}={env_count}"
    readers: list[Callable[[], Shard | None]] = [
        lambda: _slurm(env),
        lambda: _indexed(env, KUBERNETES_VAR, given, count_from),
        lambda: _indexed(env, INDEX_VAR, given, count_from),
    ]
    found = [shard for shard in (read() for read in readers) if shard is not None]
    if not found:
        raise ShardError(
            "auto found no shard in the environment: expected a Slurm array task (SLURM_ARRAY_TASK_ID, "
            f"SLURM_ARRAY_TASK_COUNT), a Kubernetes Indexed Job ({KUBERNETES_VAR} with {COUNT_VAR}) or "
            f"{INDEX_VAR} with {COUNT_VAR}; or give K/N"
        )
    if len({(s.index, s.count) for s in found}) > 1:
        shown = "; ".join(f"{s.source} -> {s.label}" for s in found)
        raise ShardError(f"auto found variables that name different shards: {shown}; unset the ones that do not apply")
    if given is not None and found[0].count != given:
        raise ShardError(f"{found[0].source} is an array of {found[0].count} tasks, but {count_from}")
    return Shard(found[0].index, found[0].count, "; ".join(str(s.source) for s in found))


def parse_shard(text: str | None, env: Mapping[str, str] | None = None) -> Shard | None:
    """``"K/N"`` -> :class:`Shard`; ``"auto"``/``"auto/N"`` -> the scheduler's shard (``env``,
    default ``os.environ``); ``None`` or ``""`` -> ``None`` (no sharding)."""
    if text is None or not str(text).strip():
        return None
    auto = _AUTO.match(str(text))
    if auto is not None:
        count = auto.group("count")
        if count is not None and int(count) < 1:
            raise ShardError(f"auto/{count}: a run has at least one shard")
        return shard_from_env(os.environ if env is None else env, int(count) if count else None)
    match = _SHARD.match(str(text))
    if match is None:
        raise ShardError(
            f"expected K/N (e.g. 1/4: the first of four shards) or auto (from Slurm, Kubernetes or "
            f"{INDEX_VAR}/{COUNT_VAR}), got {text!r}"
        )
    return Shard(int(match.group(1)), int(match.group(2)))


__all__ = [
    "COUNT_VAR",
    "INDEX_VAR",
    "KUBERNETES_VAR",
    "SHARD_FOLDER",
    "Shard",
    "ShardError",
    "parse_shard",
    "shard_from_env",
    "shard_number",
]
