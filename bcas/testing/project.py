"""One builder for the folders that plugin tests run pytest in.

A plugin test runs the suite the way a user does: a folder holding the one-line grid test
file (``from bcas.harness.suite import test_case``), a ``conftest.py`` that registers the
test's backends, grids and datasets, small JSONL datasets in our schema and, when asked, a
price sheet.  :func:`grid_project` writes such a folder (``pytester.path`` or any
directory run by a subprocess); :func:`budget_grid` and :func:`codename_items` give the
small grid and dataset most control-flow tests need, so every plugin test builds its
project in the same way.

Everything here is for tests of the harness (control flow, resume, reports); nothing
stands in for a model's capability.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

RUN_MODULES = (
    "httpcore",
    "bcas.agent",
    "bcas.assess",
    "bcas.gating",
    "bcas.harness.gate_hooks",
    "bcas.run.pipelines",
    "bcas.run.session",
    "bcas.report.html",
    "bcas.records",
    "bcas.retrieval",
)


def preload(*more: str) -> None:
    """Import what a run touches, up front (call it at the top of a plugin test module).

    An in-process pytester run restores ``sys.modules`` afterwards; numpy and friends
    cannot be imported twice in one process, and httpx keeps classes it loads on first
    use, so a first import inside such a run would leave stale copies behind.
    """
    for name in (*RUN_MODULES, *more):
        importlib.import_module(name)


GRID_TEST_FILE = (
    '"""The grid cases (collected here, parametrised by the bcas plugin)."""\n\n'
    "from bcas.harness.suite import test_case  # noqa: F401\n"
)
"""The test file of a project: the same one line as ``benchmarks/test_grids.py``."""


def codename_items(n: int, *, answer: str = "alpha", tag: str = "", distractor: bool = True) -> list[dict[str, Any]]:
    """``n`` one-hop items in our schema: "Which greek letter is the codename of project
    {tag}{i}?", answered by the item's first document (``q{i}::0``, the supporting one)
    and, unless ``distractor=False``, an unrelated second document."""
    rows = []
    for i in range(n):
        docs = [
            {"id": f"q{i}::0", "title": f"Project {tag}{i}", "text": f"Project {tag}{i} has the codename {answer}."}
        ]
        if distractor:
            docs.append({"id": f"q{i}::1", "title": "Other", "text": f"An unrelated note about gardening, number {i}."})
        rows.append(
            {
                "id": f"q{i}",
                "question": f"Which greek letter is the codename of project {tag}{i}?",
                "answers": [answer],
                "documents": docs,
                "supporting": [f"q{i}::0"],
            }
        )
    return rows


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any] | str]) -> Path:
    """Write ``rows`` (dicts, or lines already serialised) as JSON Lines; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def budget_grid(
    name: str,
    datasets: Sequence[str | Path],
    searches: Sequence[int] = (1, 2),
    *,
    limit: int | None = None,
    tokens: int = 2000,
    mode: str = "bm25",
    reference: int = 0,
) -> str:
    """Conftest lines registering grid ``name``: BCAS entries at ``searches`` (the one at
    index ``reference``, the first unless told, is the reference) under a ``tokens``
    budget with retrieval ``mode``."""
    entries = ", ".join(f"GridEntry('bcas', _cfg({s}), reference={i == reference})" for i, s in enumerate(searches))
    return (
        "from bcas.config import Budget, RetrievalConfig, RunConfig\n"
        "from bcas.grids import Grid, GridEntry, register_grid\n\n"
        f"def _cfg(s):\n"
        f"    return RunConfig(budget=Budget(max_searches=s, max_total_tokens={tokens}),\n"
        f"                     retrieval=RetrievalConfig(mode={mode!r}))\n\n"
        f"register_grid(Grid({name!r}, ({entries},), datasets={tuple(str(d) for d in datasets)!r}, limit={limit!r}))\n"
    )


def backends(registrations: Mapping[str, str], import_path: str | Path | None = None) -> str:
    """Conftest lines registering backends ``name -> "module:create"``; ``import_path`` is put
    on ``sys.path`` first (where the test doubles' modules live)."""
    lines = []
    if import_path is not None:
        lines += ["import sys", f"sys.path.insert(0, {str(import_path)!r})"]
    lines.append("from bcas.llm import register_backend")
    lines += [f"register_backend({name!r}, {target!r})" for name, target in registrations.items()]
    return "\n".join(lines) + "\n"


def grid_project(
    root: Path,
    conftest: str = "",
    *,
    datasets: Mapping[str, Iterable[Mapping[str, Any] | str]] | None = None,
    prices: str | None = None,
    files: Mapping[str, str] | None = None,
    test_file: str = "test_grids.py",
) -> Path:
    """Write a project into ``root`` and return ``root``.

    ``conftest``: the ``conftest.py`` text ("" writes none).  ``datasets``: file name ->
    rows, written as JSON Lines beside it.  ``prices``: a price sheet's TOML, written as
    ``prices.toml``.  ``files``: any other file name -> text.  ``test_file``: the grid
    test file's name.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / test_file).write_text(GRID_TEST_FILE, encoding="utf-8")
    if conftest:
        (root / "conftest.py").write_text(conftest, encoding="utf-8")
    for name, rows in (datasets or {}).items():
        write_jsonl(root / name, rows)
    if prices is not None:
        (root / "prices.toml").write_text(prices, encoding="utf-8")
    for name, text in (files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def read_records(run_dir: Path, name: str = "records.jsonl") -> list[dict[str, Any]]:
    """The raw records of a run folder's ``records.jsonl`` (as written, not upgraded)."""
    path = run_dir / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


__all__ = [
    "GRID_TEST_FILE",
    "RUN_MODULES",
    "backends",
    "budget_grid",
    "codename_items",
    "grid_project",
    "preload",
    "read_records",
    "write_jsonl",
]
