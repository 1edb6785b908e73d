"""Session-start checks of a real run: the run folder and the servers (preflight)."""

from __future__ import annotations

from typing import Any

import pytest

from bcas.harness import state
from bcas.harness.settings import Settings
from bcas.llm import BACKENDS, backend_meta


def _check_run_dir(settings: Settings) -> None:
    """A run folder with 0.1.0 records (no fingerprints) is not written into (never mixed)."""
    if not settings.run_dir.is_dir():
        return
    from bcas.records import RecordError, ResultStore

    try:
        ResultStore(settings.run_dir).check_writable()
    except RecordError as exc:
        raise pytest.UsageError(f"--bcas-report: {exc}") from None


def _endpoints(settings: Settings) -> list[tuple[str, str, str | None]]:
    """(base_url, model, api_key_env) of every server the run talks to, models then judge."""
    from bcas.llm.multi_endpoint import split_base_urls

    seen: list[tuple[str, str, str | None]] = []
    for spec in settings.models:
        if not spec.model:
            continue
        for url in split_base_urls(spec.base_url):  # each server of the model
            seen.append((url, spec.model, spec.api_key_env))
    judge = settings.judge
    if judge not in ("none", "same"):
        backend, _, name = judge.partition(":")
        base = settings.judge_base_url or next((m.base_url for m in settings.models if m.base_url), None)
        if backend in BACKENDS and backend_meta(backend, "needs_base_url") and base and name:
            key_env = next((m.api_key_env for m in settings.models if m.base_url == base), None)
            seen.extend((url, name, key_env) for url in split_base_urls(base))
    return list(dict.fromkeys(seen))


def _preflight(config: pytest.Config, settings: Settings) -> None:
    from bcas.llm.preflight import PreflightError, preflight

    results = []
    tr = config.pluginmanager.getplugin("terminalreporter")
    for base_url, model, key_env in _endpoints(settings):
        try:
            result = preflight(base_url, model, api_key_env=key_env)
        except PreflightError as exc:
            raise pytest.UsageError(f"preflight failed: {exc} (--bcas-no-preflight skips this check)") from None
        for warning in result.warnings:
            if tr is not None:
                tr.write_line(f"[bcas] warning: {warning}", yellow=True)
        results.append(result.to_dict())
    _same_model_everywhere(settings, results)
    config.stash[state.PREFLIGHT] = results


def _same_model_everywhere(settings: Settings, results: list[dict[str, Any]]) -> None:
    """The servers of one model must serve the same model (one fingerprint for all its answers)."""
    from bcas.llm.multi_endpoint import split_base_urls

    for spec in settings.models:
        urls = split_base_urls(spec.base_url)
        served = {
            r["base_url"]: r.get("served_id") for r in results if r["model"] == spec.model and r["base_url"] in urls
        }
        if len(set(served.values())) > 1:
            shown = ", ".join(f"{url} serves {sid!r}" for url, sid in served.items())
            raise pytest.UsageError(
                f"preflight failed: the servers of --bcas-model {spec.model} serve different "
                f"models ({shown}); give servers of one model (--bcas-no-preflight skips this)"
            )
