"""The extras leave the base stack's versions alone (issue 47, item 9).

``constraints.txt`` pins every package that the base install (``.ci/install``) and the
``mlflow``/``ray`` extras (``.ci/tracking.sh``) would otherwise resolve differently
(mlflow-skinny needs cachetools<8, its opentelemetry-sdk pins opentelemetry-api), so both
installs take the same versions and installing an extra afterwards changes none of them.
Checked here on the environment the suite runs in: every pinned package it holds is at
its pin.  ``pip install --dry-run --report`` of the base and of the base with the extras,
compared package by package, is how a change of the pins is checked (see the file).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def pins() -> dict[str, str]:
    out = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if "==" in text:
            name, pin = (part.strip() for part in text.split("==", 1))
            out[name] = pin
    return out


def test_the_shared_packages_are_pinned() -> None:
    pinned = pins()
    assert {"cachetools", "opentelemetry-api", "opentelemetry-sdk", "flask", "mlflow-skinny"} <= set(pinned)


def test_every_pinned_package_installed_is_at_its_pin() -> None:
    wrong = {}
    for name, pin in pins().items():
        try:
            found = version(name)
        except PackageNotFoundError:
            continue  # an extra not installed here
        if Version(found).public != Version(pin).public:  # torch's +cpu is a local label of the same release
            wrong[name] = (found, pin)
    assert not wrong, f"installed versions differ from constraints.txt (installed, pinned): {wrong}"
