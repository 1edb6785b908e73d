"""The pytest front door's options: ``--bcas-NAME`` flags and ``bcas_NAME`` ini options.

Each option of :data:`bcas.run.options.OPTIONS` is read command line first, then ini,
then its default (:func:`_get`), and :func:`read_settings` hands them all to the run
layer's :func:`bcas.run.settings.build_settings`, which checks them once; a bad value
is a ``pytest.UsageError`` naming the flag.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bcas.run.options import OPTIONS, OptionError, RawValue, coerce
from bcas.run.settings import Settings, build_settings, check_baseline

REQUIREMENT_MARKERS = {
    "gpu": "needs a CUDA GPU",
    "slow": "heavy case or test (the repository's conftest.py skips it unless --runslow)",
    "judge": "uses an LLM judge",
    "vllm": "needs the vllm engine",
}
# Runner kinds are markers of their own, apart from grid names: -m madara is the madara
# grid, -m kind_madara every MADARA treatment case (the smoke grid has some too).
KIND_MARKER = "kind_{}"


def _opt_name(name: str) -> str:
    return "bcas_" + name.replace("-", "_")


def _raw(config: pytest.Config, name: str) -> RawValue:
    """Command line first, then the ini option (None: neither gives it)."""
    dest = _opt_name(name)
    value = config.getoption(dest, default=None)
    if value is None or value == []:
        value = config.getini(dest)
        if value in (None, "", []):
            return None
    return value  # type: ignore[no-any-return]


def _get(config: pytest.Config, name: str) -> RawValue:
    """Command line first, then the ini option, then the default, as the option's kind."""
    for opt_name, _kind, default, _ in OPTIONS:
        if opt_name == name:
            value = _raw(config, name)
            try:
                return coerce(name, default if value is None else value)
            except OptionError as exc:
                raise pytest.UsageError(str(exc)) from None
    raise KeyError(name)


def read_settings(config: pytest.Config) -> Settings:
    """The session's settings from its options (a bad one: a usage error, before anything runs)."""
    given = {name: _raw(config, name) for name, _kind, _default, _help in OPTIONS}
    try:
        settings = build_settings(given, Path(str(config.rootpath)))
        check_baseline(settings.baseline)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    return settings
