"""The gate's errors: plain ``ValueError`` subclasses, which each front door shows its own way
(a pytest usage error naming the flag, a ``ValueError`` naming the keyword argument)."""

from __future__ import annotations


class GateError(ValueError):
    """The gate cannot run as asked: a bad gate option, or a comparison it refuses."""


class BaselineError(GateError):
    """A baseline file cannot be read."""
