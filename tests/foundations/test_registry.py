"""The registry of every extension point (bcas.registry): lazy targets, metadata, clear
errors, mapping access for monkeypatching, entry-point plugins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bcas.registry import Registry, RegistryError


def test_lazy_target_is_imported_once_and_metadata_is_kept() -> None:
    reg: Registry[object] = Registry("thing")
    reg.register("dumps", "json:dumps", cost=3)
    import json

    assert reg.get("dumps") is json.dumps
    assert reg.meta("dumps") == {"cost": 3} and reg.meta("dumps", "cost") == 3
    assert reg.meta("dumps", "missing", "default") == "default"
    assert "dumps" in reg and reg.names() == ["dumps"] and list(reg) == ["dumps"]


def test_unknown_name_lists_what_exists() -> None:
    reg: Registry[object] = Registry("widget")
    reg.register("a", object())
    reg.register("b", object())
    with pytest.raises(RegistryError, match=r"unknown widget 'c'; registered: a, b"):
        reg.get("c")


def test_bad_lazy_target_names_it() -> None:
    reg: Registry[object] = Registry("thing")
    reg.register("x", "no_such_module_here:f")
    with pytest.raises(RegistryError, match="thing 'x': cannot load no_such_module_here:f"):
        reg.get("x")


def test_decorator_and_replace_rules() -> None:
    reg: Registry[object] = Registry("rule")

    @reg.register("double", weight=2)
    def double(x: int) -> int:
        return 2 * x

    assert reg.get("double")(4) == 8 and reg.meta("double", "weight") == 2
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("double", lambda x: x, replace=False)
    reg.register("double", lambda x: 3 * x)  # a later registration (a user's conftest) wins
    assert reg.get("double")(4) == 12


def test_mapping_access_swaps_the_target_and_keeps_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    from bcas.llm import BACKENDS, backend_meta

    before = BACKENDS.get("openai")
    monkeypatch.setitem(BACKENDS, "openai", "json:loads")
    import json

    assert BACKENDS.get("openai") is json.loads
    assert backend_meta("openai", "needs_base_url") is True
    monkeypatch.undo()
    assert BACKENDS.get("openai") is before


def test_backends_declare_what_the_harness_needs() -> None:
    from bcas.llm import BACKENDS, backend_meta

    assert set(BACKENDS.names()) >= {"embedded", "openai", "vllm", "mock"}
    assert backend_meta("embedded", "concurrency") == 1 and backend_meta("openai", "concurrency") == 8
    assert backend_meta("openai", "needs_base_url") and not backend_meta("embedded", "needs_base_url", False)
    assert backend_meta("vllm", "one_per_process") is True
    assert backend_meta("mock", "label_prefix") == "mock-"


def test_an_installed_package_registers_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A distribution on sys.path with a ``bcas.plugins`` entry point: its function runs
    the first time a registry is asked for a name it does not hold, and only then."""
    import bcas.registry as registry

    (tmp_path / "bcas_demo_plugin.py").write_text(
        "CALLS = []\n\n"
        "def register():\n"
        "    from bcas.registry import RETRIEVAL_MODES\n"
        "    CALLS.append(1)\n"
        "    RETRIEVAL_MODES.register('demo-mode', 'bcas.retrieval.modes:bm25', label='demo', lexical=True)\n"
    )
    info = tmp_path / "bcas_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bcas-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\ndemo = bcas_demo_plugin:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    saved = registry.RETRIEVAL_MODES.snapshot()
    try:
        assert "bm25" in registry.RETRIEVAL_MODES  # a known name loads nothing
        import bcas_demo_plugin  # type: ignore[import-not-found]

        assert bcas_demo_plugin.CALLS == []
        assert "demo-mode" in registry.RETRIEVAL_MODES  # an unknown one loads the plugins once
        assert bcas_demo_plugin.CALLS == [1]
        assert registry.RETRIEVAL_MODES.meta("demo-mode", "label") == "demo"
        assert "another-unknown" not in registry.RETRIEVAL_MODES and bcas_demo_plugin.CALLS == [1]
    finally:
        registry.RETRIEVAL_MODES.restore(saved)
        sys.modules.pop("bcas_demo_plugin", None)
