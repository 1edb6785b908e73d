"""Sharded runs: a deterministic partition of a run's items over N machines or CI jobs.

``--bcas-shard K/N`` (``1 <= K <= N``) runs, in every case, only the items whose id
hashes to shard ``K``: ``1 + (first 8 bytes of sha256(item id), big-endian) mod N``.
The hash is computed from the id's UTF-8 bytes alone, so every machine, Python
version and process assigns an item to the same shard, all epochs of an item land on
one shard, and the N shards together hold every item exactly once.

A shard is a filter on which items of a case run, nothing more: the item subset
(``--bcas-limit``, ``--bcas-seed``) is drawn first, over the whole dataset, so the
dataset hash, configuration ids and answer identities are those of the unsharded run
and ``python -m bcas.results merge SHARD_RUN... --out RUN`` (:mod:`bcas.harness.merge`)
joins the shards' records into the unsharded run's.  A case without per-item records
(the RSC probe) runs whole on the one shard its case id hashes to.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


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
    """Shard ``index`` of ``count`` (1-based)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ShardError(f"shard {self.index}/{self.count}: expected K/N with 1 <= K <= N")

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, key: str) -> bool:
        """Whether the item (or case) with id ``key`` runs on this shard."""
        return shard_number(key, self.count) == self.index


def parse_shard(text: str | None) -> Shard | None:
    """``"K/N"`` -> :class:`Shard`; ``None`` or ``""`` -> ``None`` (no sharding)."""
    if text is None or not str(text).strip():
        return None
    match = _SHARD.match(str(text))
    if match is None:
        raise ShardError(f"expected K/N (e.g. 1/4: the first of four shards), got {text!r}")
    return Shard(int(match.group(1)), int(match.group(2)))


__all__ = ["Shard", "ShardError", "parse_shard", "shard_number"]
