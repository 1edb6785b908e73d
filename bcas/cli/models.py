"""``bcas models``: where the shipped GGUF model is, and the registered model backends."""

from __future__ import annotations

from bcas.llm import BACKENDS
from bcas.llm.convert import find_shipped_gguf


def models_lines() -> list[str]:
    """The shipped GGUF's path, then one line per backend with what it needs."""
    lines = [f"shipped GGUF: {find_shipped_gguf()}", "", f"{'backend':<12}{'identity':<12}needs"]
    for name in BACKENDS.names():
        needs = []
        if BACKENDS.meta(name, "needs_base_url"):
            needs.append("--bcas-base-url")
        needs += [f"the {pkg} package" for pkg in BACKENDS.meta(name, "requires", ()) or ()]
        models = BACKENDS.meta(name, "models")
        if models:
            needs.append("models: " + ", ".join(models))
        lines.append(f"{name:<12}{BACKENDS.meta(name, 'identity') or '-':<12}{'; '.join(needs) or '-'}")
    return lines
