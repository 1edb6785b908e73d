"""The docs' own-server recipe, read from docs/models.md: its lines and its server started as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def readme_recipe(start: str) -> str:
    """The line of the own-server recipe (docs/models.md) that starts with ``start``."""
    text = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- recipe: own-server -->\s*```bash\n(.*?)```", text, re.S)
    assert match, "docs/models.md lost its own-server recipe block"
    lines = [ln.strip() for ln in match.group(1).splitlines() if ln.strip().startswith(start)]
    assert len(lines) == 1
    return lines[0]


def recipe_server(gguf: Path) -> Any:
    """The recipe's server line as written, with the shipped GGUF as FILE.gguf on a free port."""
    from bcas.testing.servers import LlamaCppServer

    words = shlex.split(readme_recipe("bcas serve"))
    assert words[-1] == "&" and words[:2] == ["bcas", "serve"]
    args = [str(gguf) if w == "FILE.gguf" else "{port}" if w == "8000" else w for w in words[1:-1]]
    assert str(gguf) in args and "{port}" in args
    return LlamaCppServer(gguf, launcher="bcas", args=args)  # python -m bcas serve ...: the installed command


def recipe_grids() -> list[str]:
    """The grids the recipe's pytest line runs (its ``--bcas-grid``)."""
    found = re.search(r"--bcas-grid[ =](\S+)", readme_recipe("python3 -m pytest"))
    assert found, "the own-server recipe names no grid"
    return found.group(1).split(",")


def recipe_window() -> int:
    """The context window the recipe's server gives its model (``bcas serve``'s ``--n_ctx``), which
    the server reports to the preflight and the run checks each budget against."""
    found = re.search(r"--n_ctx[ =](\d+)", readme_recipe("bcas serve"))
    assert found, "the own-server recipe sets no --n_ctx"
    return int(found.group(1))
