"""The dataset format type and its registry.

A format is one :class:`Format` (its reader and the detector of its first record),
registered with :func:`register_format` in the module that holds its reader
(``native``, ``qa``, ``multihop``, ``claims``) or from a user's conftest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bcas.items import Item
from bcas.registry import Registry

Reader = Callable[[Path], Iterator[tuple[int, Item]]]


@dataclass(frozen=True)
class Format:
    """A dataset file layout: how to read it and how to recognise its first record.

    ``task`` / ``scoring`` apply unless ``infer_labels`` finds every gold answer in
    a label set (FEVER labels: fact verification; yes/no: yes-no questions), which
    then scores by label.
    """

    name: str
    description: str
    read: Reader
    detect: Callable[[set[str]], bool]
    task: str = "factoid"
    scoring: str = "qa"
    infer_labels: bool = False
    aliases: tuple[str, ...] = field(default=())


FORMATS: Registry[Format] = Registry("dataset format")


def register_format(fmt: Format) -> Format:
    """Register a dataset format (one registration: a ``Format`` with its reader and detector)."""
    FORMATS.register(fmt.name, fmt)
    return fmt
