"""Start-of-run checks that touch the world: the run folder, and every server the run talks to.

Each problem is an :class:`~bcas.run.options.OptionError` (a usage error under pytest,
a ``ValueError`` from :func:`bcas.evaluate`), raised before any case runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bcas.llm import BACKENDS, backend_meta
from bcas.run.options import OptionError
from bcas.run.settings import Settings, judge_endpoint


def check_run_dir(settings: Settings) -> None:
    """A run folder with 0.1.0 records (no fingerprints) is not written into (never mixed)."""
    if not settings.run_dir.is_dir():
        return
    from bcas.records import RecordError, ResultStore

    try:
        ResultStore(settings.run_dir).check_writable()
    except RecordError as exc:
        raise OptionError(str(exc), "report") from None


def endpoints(settings: Settings) -> list[tuple[str, str, str | None]]:
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
        base, key_env = judge_endpoint(settings)  # where the judge is loaded from and fingerprinted
        if backend in BACKENDS and backend_meta(backend, "needs_base_url") and base and name:
            seen.extend((url, name, key_env) for url in split_base_urls(base))
    return list(dict.fromkeys(seen))


def preflight_servers(settings: Settings, warn: Callable[[str], None]) -> list[dict[str, Any]]:
    """Ask every server of the run (:mod:`bcas.llm.preflight`); their results, for ``run.json``."""
    from bcas.llm.preflight import PreflightError, preflight

    results = []
    for base_url, model, key_env in endpoints(settings):
        try:
            result = preflight(base_url, model, api_key_env=key_env)
        except PreflightError as exc:
            raise OptionError(f"preflight failed: {exc} (--bcas-no-preflight skips this check)") from None
        for warning in result.warnings:
            warn(warning)
        results.append(result.to_dict())
    same_model_everywhere(settings, results)
    return results


def same_model_everywhere(settings: Settings, results: list[dict[str, Any]]) -> None:
    """The servers of one model must serve the same model (one fingerprint for all its answers)."""
    from bcas.llm.multi_endpoint import split_base_urls

    for spec in settings.models:
        urls = split_base_urls(spec.base_url)
        served = {
            r["base_url"]: r.get("served_id") for r in results if r["model"] == spec.model and r["base_url"] in urls
        }
        if len(set(served.values())) > 1:
            shown = ", ".join(f"{url} serves {sid!r}" for url, sid in served.items())
            raise OptionError(
                f"preflight failed: the servers of --bcas-model {spec.model} serve different "
                f"models ({shown}); give servers of one model (--bcas-no-preflight skips this)"
            )
