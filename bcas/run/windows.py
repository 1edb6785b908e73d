"""Context windows: what each model can hold, and the configurations that may need more.

A budgeted configuration (BCAS §3.3) may need its token budget, the forced answer and
the prompt at once; a model whose window is smaller ends such items with stop reason
``context_window``.  The front doors warn before the run (pytest: at session start).
"""

from __future__ import annotations

from typing import Any

from bcas.config import RunConfig
from bcas.llm import BACKENDS, backend_meta
from bcas.registry import RUN_KINDS
from bcas.run.plan import expand_cases
from bcas.run.plan_checks import window_need
from bcas.run.settings import Settings

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


def budget_need(config: RunConfig) -> int:
    """Tokens a budgeted configuration may need at once: its budget, the forced answer, the prompt allowance."""
    budget = config.budget
    return int(budget.max_total_tokens) + int(budget.forced_answer_tokens) + PROMPT_ALLOWANCE


def context_warnings(settings: Settings, windows: dict[str, int | None]) -> list[str]:
    """One warning per model whose window is smaller than what some of its configurations may need
    (those whose budget alone it cannot hold are refused before the run instead, and not listed)."""
    short: dict[str, dict[str, int]] = {}
    for case in expand_cases(settings):
        window = windows.get(case.model.label)
        kind = case.entry.kind
        if not window or kind not in RUN_KINDS or not RUN_KINDS.meta(kind, "budgeted", False):
            continue
        need = budget_need(case.entry.config)
        refused = (window_need(kind, case.entry.config) or 0) > window  # refused before the run (plan_checks)
        if need > window and not refused:
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
            "bcas serve: --n_ctx; vLLM: --max-model-len)"
        )
    return lines


def loaded_window(model: object) -> int | None:
    """A loaded model's ``context_window`` (None when unknown, or when a server asked for it went away)."""
    try:
        window = getattr(model, "context_window", None)
    except Exception:  # noqa: BLE001 - a reading that fails is an unknown window, never a failed run
        return None
    return int(window) if isinstance(window, int) and window > 0 else None
