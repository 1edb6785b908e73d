"""Checks of the run's options, called by :func:`bcas.run.settings.build_settings`.

Every bad option is one :class:`bcas.run.options.OptionError` that names the option, what
was given and what the option accepts (the pytest front door shows it as a usage error,
the Python API as a ``ValueError``).  The checks run before any model loads or any server
is asked, and before anything is written (pytest: in ``pytest_configure``).  None
of them creates a file or a folder, loads a model or opens a connection; a file an
option names (GGUF, price sheet, baseline) is opened only to read its first bytes or
parse it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from bcas.grids import HOLM_SCOPES, get_grid
from bcas.llm import BACKENDS, backend_meta
from bcas.registry import did_you_mean
from bcas.run.options import OptionError, RawValue

# --bcas-limit all: every item.  Dataset.subset keeps a dataset whole for any limit at
# least its length, so the whole-dataset case needs no special path through the runner.
ALL_ITEMS = sys.maxsize
MAX_SEED = 2**32 - 1  # llama.cpp and vLLM take unsigned 32-bit seeds
PRICES_OFF = "none"


def usage(option: str, message: str) -> OptionError:
    return OptionError(message, option)


def parse_limit(value: RawValue) -> int | None:
    """``--bcas-limit``: None (the grid's limit), a whole number >= 1, or ``all`` (``ALL_ITEMS``)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text == "all":
        return ALL_ITEMS
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        raise usage("limit", f"expected a whole number >= 1 or 'all' (every item), got {value!r}")
    return limit


def check_seed(value: int) -> int:
    if not 0 <= value <= MAX_SEED:
        raise usage("seed", f"expected a whole number from 0 to {MAX_SEED}, got {value}")
    return value


def check_fraction(option: str, value: float | None) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise usage(option, f"expected a number from 0 to 1 (an accuracy), got {value}")
    return value


def check_url(option: str, value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise usage(option, f"expected an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1), got {value!r}")
    return value


def check_key_env(name: str | None) -> None:
    """``--bcas-api-key-env``: the named variable must be set (its value is never shown)."""
    if name is not None and not os.environ.get(name):
        raise usage(
            "api-key-env", f"{name!r} names an environment variable that is not set or empty (export {name}=...)"
        )


_BACKEND_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]+")


def unknown_backend(option: str, name: str) -> OptionError:
    return usage(
        option, f"unknown backend {name!r}{did_you_mean(name, BACKENDS)}; known: {', '.join(sorted(BACKENDS))}"
    )


def check_backend_prefix(option: str, raw: str | None, backend: str) -> None:
    """``NAME:MODEL`` whose NAME is no backend: say so, rather than read it as a model of ``backend``.

    A served backend's model names may hold a colon (``qwen3:8b``), so only a backend that
    loads the model itself (a file or a checkpoint) is guarded; an existing path is a path.
    """
    if raw is None or backend_meta(backend, "needs_base_url"):
        return
    head, sep, _ = raw.strip().partition(":")
    if sep and head not in BACKENDS and _BACKEND_NAME.fullmatch(head) and not Path(raw).expanduser().exists():
        raise unknown_backend(option, head)


def check_model(option: str, raw: str | None, backend: str, model: str | None) -> None:
    """The model a spec names exists, where that can be known without loading it.

    ``embedded``: a GGUF file (its first bytes are ``GGUF``) or the shipped default;
    ``mock``: a known variant; ``vllm``: a local folder, when the name is a path (a hub
    id is resolved from the local cache when the engine starts).  Servers are checked by
    the preflight in ``pytest_sessionstart``.
    """
    given = raw or backend
    identity = backend_meta(backend, "identity") if backend in BACKENDS else None
    if identity == "gguf":
        from bcas.llm.base import ModelError
        from bcas.llm.embedded import default_gguf_path

        if model is None:
            try:
                default_gguf_path()
            except ModelError as exc:
                raise usage(option, f"{given}: {exc}") from None
            return
        path = Path(model).expanduser()
        if not path.is_file():
            raise usage(
                option,
                f"{given}: no GGUF file at {path}; accepted: a local .gguf path for the embedded "
                "backend, or BACKEND:MODEL (openai:NAME, vllm:HF_ID_OR_FOLDER, mock:gold|verbose|random)",
            )
        with path.open("rb") as fh:
            if fh.read(4) != b"GGUF":
                raise usage(option, f"{given}: {path} is not a GGUF file (it does not start with 'GGUF')")
    elif backend_meta(backend, "models"):  # a backend with a fixed set of models (mock) declares it
        known = backend_meta(backend, "models")
        if model is not None and model not in known:
            accepted = ", ".join(f"{backend}:{v}" for v in known)
            raise usage(option, f"{given}: unknown {backend} model {model!r}; accepted: {accepted}")
    elif identity == "checkpoint" and model is not None:
        path = Path(model).expanduser()
        if model.startswith(("/", "./", "../", "~")) and not path.exists():
            raise usage(
                option,
                f"{given}: no model folder at {path}; accepted: a local checkpoint folder or a "
                "Hugging Face id present in the local cache",
            )


def check_judge(spec: str, model_urls: Sequence[str | None], judge_base_url: str | None) -> None:
    """``--bcas-judge``: none, same, or BACKEND[:MODEL] of a registered backend."""

    if spec in ("none", "same"):
        return
    accepted = (
        f"accepted: none, same (the first evaluated model), or BACKEND[:MODEL] with BACKEND one of "
        f"{', '.join(sorted(BACKENDS))} (e.g. openai:gpt-4o-mini, embedded, mock:gold)"
    )
    backend, _, name = spec.partition(":")
    if backend not in BACKENDS:
        raise usage("judge", f"unknown backend {backend!r} in {spec!r}; {accepted}")
    if backend_meta(backend, "needs_base_url"):
        if not (judge_base_url or any(model_urls)):
            raise usage(
                "judge", f"{spec}: a {backend} judge needs --bcas-judge-base-url (or a model served at --bcas-base-url)"
            )
        if not name:
            raise usage("judge", f"{spec}: a {backend} judge needs a model name ({backend}:NAME)")
    check_model("judge", spec, backend, name or None)


def check_judge_required(judge: str, grids: Sequence[str]) -> None:
    """``--bcas-require-judge``: a paper grid graded by an LLM judge (BCAS §3.6) needs ``--bcas-judge``."""
    if judge != "none":
        return
    judged = [g for g in grids if get_grid(g).metric_note("correct_em")]
    if judged:
        raise usage(
            "require-judge",
            f"grid {', '.join(judged)} grades with an LLM judge in the paper (BCAS §3.6) and no judge is "
            "set; name one with --bcas-judge (e.g. openai:gpt-4o-mini, or same), or drop --bcas-require-judge "
            "to accept SQuAD EM as a proxy",
        )


def check_holm_scope(value: str | None) -> str | None:
    """``--bcas-holm-scope``: grid, cell, or unset (each grid's own scope)."""
    if value in (None, ""):
        return None
    if value not in HOLM_SCOPES:
        raise usage("holm-scope", f"expected one of {', '.join(HOLM_SCOPES)}, got {value!r}")
    return value


def resolve_prices(value: str | None) -> tuple[Path | None, str | None]:
    """``--bcas-prices`` as (price file, sheet name); (None, None) for ``none`` (no pricing).

    The sheet is loaded now, so a typo in a path or a sheet name stops the session.
    """
    if value is not None and str(value).strip().lower() == PRICES_OFF:
        return None, None
    from bcas.records import DEFAULT_PRICES, PriceError, load_price_sheet, price_source

    try:
        path, sheet = price_source(value)
        load_price_sheet(path, sheet)
    except PriceError as exc:
        try:
            import tomllib

            names = sorted(tomllib.loads(DEFAULT_PRICES.read_text(encoding="utf-8")).get("sheets", {}))
        except (OSError, ValueError):
            names = []
        raise usage(
            "prices",
            f"{exc}; accepted: a price TOML path, PATH:SHEET, a sheet name of the packaged "
            f"sheet ({', '.join(names)}), or none (no pricing: every cost_usd is null)",
        ) from None
    return path, sheet


def check_report_dir(path: Path) -> None:
    """The run folder exists and is writable, or could be created; nothing is created here."""
    path = Path(path).absolute()
    accepted = "accepted: a folder that exists or can be created"
    if path.exists():
        if not path.is_dir():
            raise usage("report", f"{path} exists and is not a folder; {accepted}")
        if not os.access(path, os.W_OK | os.X_OK):
            raise usage("report", f"{path}: no permission to write in it; {accepted}")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise usage("report", f"cannot create {path}: {parent} is a file, not a folder; {accepted}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise usage("report", f"cannot create {path}: no permission to write in {parent}; {accepted}")


def check_max_cost(value: float | None, prices: Path | None) -> float | None:
    """``--bcas-max-cost``: US dollars above 0, with a price sheet to count them."""
    if value is None:
        return None
    if not value > 0:
        raise usage("max-cost", f"expected a number of US dollars above 0, got {value:g}")
    if prices is None:
        raise usage("max-cost", "pricing is off (--bcas-prices none); name a price sheet, or drop the cap")
    return value
