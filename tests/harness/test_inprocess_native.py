"""An in-process pytester run must not drop a native extension that cannot be imported twice.

pytester restores ``sys.modules`` after an in-process run; a module first imported inside the
run is dropped, and importing torch a second time in one process dies of SIGSEGV (it did, in
CI's slow stage).  An autouse fixture of the suite (tests/conftest.py) imports them before
every test that uses ``pytester``, so they survive its runs.
"""

from __future__ import annotations

import sys

import pytest
from support.native import installed

pytest_plugins = ["pytester"]

INSTALLED = installed()


@pytest.mark.skipif("torch" not in INSTALLED, reason="torch is not installed (the vLLM environment)")
def test_native_modules_imported_inside_a_run_are_still_loaded_after_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import importlib\n\n"
        f"NAMES = {INSTALLED!r}\n\n"
        "def test_imports():\n"
        "    for name in NAMES:\n"
        "        importlib.import_module(name)\n"
    )
    before = {name: sys.modules.get(name) for name in INSTALLED}
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    for name in INSTALLED:
        assert sys.modules.get(name) is not None, f"{name} was dropped by the in-process run"
        assert sys.modules[name] is before[name], f"{name} was imported afresh inside the run"
