"""Session-start checks of a real run: the run folder and the servers (preflight)."""

from __future__ import annotations

from typing import Any

import pytest

from bcas.harness import state
from bcas.harness.settings import Settings, expand_cases, judge_endpoint
from bcas.llm import BACKENDS, backend_meta
from bcas.registry import RUN_KINDS


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
        base, key_env = judge_endpoint(settings)  # where the judge is loaded from and fingerprinted
        if backend in BACKENDS and backend_meta(backend, "needs_base_url") and base and name:
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


# -- context windows (issue: budgets that cannot fit the model) ---------------------------------

# What a BCAS conversation holds besides its completion tokens (which all stay in the
# history): the system prompt, the question and the hits of one search (k=5 chunks of
# 256 tokens) with room to spare.  A rough lower bound of what a trajectory needs, not a
# promise: more searches bring more hits into the prompt.
PROMPT_ALLOWANCE = 2048


def context_windows(settings: Settings, preflight: list[dict[str, Any]]) -> dict[str, int | None]:
    """Each model's context window as known at session start (label -> tokens, None: unknown).

    A served model: the smallest window its servers reported to the preflight; any other:
    the window its backend declares for the models it loads (``context_window`` metadata).
    """
    from bcas.llm.multi_endpoint import split_base_urls

    windows: dict[str, int | None] = {}
    for spec in settings.models:
        if backend_meta(spec.backend, "needs_base_url"):
            urls = split_base_urls(spec.base_url)
            found = [
                int(r["context_window"])
                for r in preflight
                if r.get("model") == spec.model and r.get("base_url") in urls and r.get("context_window")
            ]
            windows[spec.label] = min(found) if found else None
        else:
            declared = backend_meta(spec.backend, "context_window") if spec.backend in BACKENDS else None
            windows[spec.label] = int(declared) if declared else None
    return windows


def budget_need(config: Any) -> int:
    """Tokens a budgeted configuration may need at once: its budget, the forced answer, the prompt allowance."""
    budget = config.budget
    return int(budget.max_total_tokens) + int(budget.forced_answer_tokens) + PROMPT_ALLOWANCE


def context_warnings(settings: Settings, windows: dict[str, int | None]) -> list[str]:
    """One warning per model whose window is smaller than what some of its configurations may need."""
    short: dict[str, dict[str, int]] = {}
    for case in expand_cases(settings):
        window = windows.get(case.model.label)
        kind = case.entry.kind
        if not window or kind not in RUN_KINDS or not RUN_KINDS.meta(kind, "budgeted", False):
            continue
        need = budget_need(case.entry.config)
        if need > window:
            short.setdefault(case.model.label, {})[f"{case.grid}/{case.entry.label}"] = need
    lines = []
    for label, needs in short.items():
        shown = sorted(needs.items(), key=lambda kv: (-kv[1], kv[0]))
        listed = ", ".join(f"{name} (~{need})" for name, need in shown[:6])
        more = f" and {len(shown) - 6} more" if len(shown) > 6 else ""
        lines.append(
            f"model {label} has a context window of {windows[label]} tokens; {len(shown)} configuration(s) may "
            f"need more (budget + forced answer + {PROMPT_ALLOWANCE} prompt): {listed}{more}. Their items may end "
            "with stop reason context_window; give the model a larger context (llama.cpp server: -c/--ctx-size, "
            "python -m bcas.llm.llama_server: --n_ctx; vLLM: --max-model-len)"
        )
    return lines


def _warn_context_windows(config: pytest.Config, settings: Settings) -> None:
    """Session start: the context-window warnings, in one block (the preflight has run, if it runs)."""
    preflight: list[dict[str, Any]] = config.stash.get(state.PREFLIGHT, [])
    tr = config.pluginmanager.getplugin("terminalreporter")
    for line in context_warnings(settings, context_windows(settings, preflight)):
        if tr is not None:
            tr.write_line(f"[bcas] warning: {line}", yellow=True)


def loaded_window(model: Any) -> int | None:
    """A loaded model's ``context_window`` (None when unknown, or when a server asked for it went away)."""
    try:
        window = getattr(model, "context_window", None)
    except Exception:  # noqa: BLE001 - a reading that fails is an unknown window, never a failed run
        return None
    return int(window) if isinstance(window, int) and window > 0 else None
