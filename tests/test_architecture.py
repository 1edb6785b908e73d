"""The layers written in ARCHITECTURE.md hold: no import cycle, no upward import.

Every ``import``/``from ... import`` in ``bcas/`` counts, at module level or inside a
function (a function-level import still ties two modules together); imports under
``if TYPE_CHECKING:`` count too.  The layer of each module is read from the table in
``ARCHITECTURE.md`` (the project's own copy), so the rule and its documentation are one.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "bcas"
MAX_LINES = 800  # a generous backstop, not a target: modules are split by concept (the layer rule), never by size


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The bcas modules ``path`` imports (resolved to the longest known module name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(target: str) -> str | None:
        while target:
            if target in known:
                return target
            target = target.rpartition(".")[0]
        return None

    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            if target.split(".")[0] != "bcas":
                continue
            resolved = resolve(target)
            if resolved and resolved != name:
                found.add(resolved)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(path, name, known) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layers() -> list[tuple[int, str]]:
    """(layer number, module prefix) from ARCHITECTURE.md's layer table (``| 3 | `bcas.agent` ... |``)."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|(.*?)\|", line)
        if match:
            for prefix in re.findall(r"`(bcas[\w.]*)`", match.group(2)):
                out.append((int(match.group(1)), prefix))
    return out


def layer_of(name: str, table: list[tuple[int, str]]) -> int | None:
    best: tuple[int, int] | None = None
    for number, prefix in table:
        if name == prefix or name.startswith(prefix + "."):
            if best is None or len(prefix) > best[1]:
                best = (number, len(prefix))
    return None if best is None else best[0]


def upward_imports(edges: dict[str, set[str]], table: list[tuple[int, str]]) -> list[str]:
    bad = []
    for source, targets in sorted(edges.items()):
        s = layer_of(source, table)
        for target in sorted(targets):
            t = layer_of(target, table)
            if s is not None and t is not None and t > s:
                bad.append(f"{source} (layer {s}) imports {target} (layer {t})")
    return bad


# -- the checks ------------------------------------------------------------------------


def test_no_import_cycle_even_through_function_level_imports() -> None:
    found = cycles(graph())
    assert found == [], "\n".join(" <-> ".join(c) for c in found)


def test_every_module_has_a_layer_and_no_import_goes_up() -> None:
    table = layers()
    assert table, "ARCHITECTURE.md lost its layer table"
    edges = graph()
    missing = [m for m in edges if m != "bcas" and layer_of(m, table) is None]  # "bcas": the empty root package
    assert missing == [], f"modules with no layer in ARCHITECTURE.md: {missing}"
    bad = upward_imports(edges, table)
    assert bad == [], "\n".join(bad)


def test_no_module_over_the_generous_cap() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}, long


# -- the checker itself can fail ---------------------------------------------------------


def test_the_cycle_finder_finds_a_cycle_and_the_layer_rule_an_upward_import() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    table = [(0, "bcas.low"), (1, "bcas.high")]
    assert upward_imports({"bcas.low.x": {"bcas.high.y"}, "bcas.high.y": {"bcas.low.x"}}, table) == [
        "bcas.low.x (layer 0) imports bcas.high.y (layer 1)"
    ]


def test_function_level_and_relative_imports_are_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from bcas.b import g\n    from . import c\n", encoding="utf-8")
    found = imports_of(source, "bcas.a", {"bcas.a", "bcas.b", "bcas.c", "bcas"})
    assert found == {"bcas.b", "bcas.c", "bcas"}


def test_the_graph_sees_real_edges() -> None:
    edges = graph()
    assert "bcas.llm.base" in edges.get("bcas.llm", set())
    assert defaultdict(set, edges)["bcas.agent.loop"]  # the agent loop imports its siblings
