"""The run manifest ``run.json``: what produced a run folder's answers.

A session that runs cases writes its entry when its cases are known (before the first
runs) and completes it when it ends; several sessions into one run folder each append
their own entry (``{"schema_version": 1, "sessions": [...]}``), earlier ones are kept.
An entry holds:

* ``bcas``: the package version and, when bcas runs from a git checkout, the commit
  (``git rev-parse HEAD`` in that checkout; no network) and whether tracked files differ;
* ``python`` and ``packages``: versions of the packages that shape answers, read from
  their installed metadata (nothing is imported to ask; ``None`` when absent);
* ``host``: the CPU's model name (``/proc/cpuinfo``) and the GPUs ``nvidia-smi`` lists;
* ``models`` (label -> backend, model, ``served``: the name of what answered, a GGUF's
  file name or vLLM's ``root`` (:mod:`bcas.run.served`), fingerprint, ``endpoints``: every server of a
  served model, :mod:`bcas.llm.multi_endpoint`, ``context_window``: the preflight's
  reading for a server, the backend's default otherwise, the loaded model's own at the
  end) and ``judge`` (fingerprint, grade id), see :mod:`bcas.identity`; servers are
  identified from the session's preflight, never asked again here;
* ``datasets`` (name -> hashes), ``dataset_tasks`` (name -> the ``task`` every prompt of its
  items used, its ``scoring`` rule and ``task_source``: ``registered``, ``format`` (a mixed
  file's too) or ``file``, a label task one inference over the whole file found,
  :func:`bcas.formats.infer_task`), ``records_written`` and ``answers_from_cache`` (those
  of them whose every model call the generation cache answered), filled at the end
  from the records this session wrote and the datasets it loaded;
* ``price_sheet`` (path and sha256 of the TOML file; ``None`` when pricing is off);
* ``options``: every option as resolved, with where its value came from (command line,
  ini, default; ``argument`` for :func:`bcas.evaluate`), and ``settings`` as the session used them.  An API key
  is never written: only the name of the variable that holds it; URLs lose any
  user:password and query string;
* ``shard``: ``"K/N"`` when the session ran one shard of the items (``--bcas-shard``), else ``None``;
  ``shard_source``: the scheduler variables ``--bcas-shard auto`` read it from (``None`` for K/N);
* ``seed``, ``epochs``, ``started_at``, ``ended_at``, ``exit_status`` (pytest's) and ``status``:
  ``running`` until the session ends, then ``interrupted`` (Ctrl-C or SIGTERM, exit status
  2; :mod:`bcas.harness.interrupt`) or ``finished``.

The pytest front door writes it through :class:`bcas.harness.manifest.ManifestPlugin`,
the Python API from :func:`bcas.evaluate`.  The HTML report shows the manifest in its "Run" section (:mod:`bcas.report.html_run`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from datetime import UTC, datetime
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bcas.llm import backend_meta
from bcas.records.manifest import MANIFEST_FILE, locked, read_manifest
from bcas.run.pipelines import answered_from_cache
from bcas.run.settings import judge_endpoint
from bcas.run.windows import context_windows, loaded_window

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
INTERRUPTED = 2  # pytest.ExitCode.INTERRUPTED: Ctrl-C, or SIGTERM (bcas.harness.interrupt)
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
# distribution names per reported package (the first one installed wins)
PACKAGES: dict[str, tuple[str, ...]] = {
    "llama-cpp-python": ("llama-cpp-python", "llama_cpp_python"),
    "vllm": ("vllm",),
    "torch": ("torch",),
    "transformers": ("transformers",),
    "sentence-transformers": ("sentence-transformers",),
    "bm25s": ("bm25s",),
    "faiss": ("faiss-cpu", "faiss-gpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss"),
    "numpy": ("numpy",),
    "pytest": ("pytest",),
}
_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password)", re.IGNORECASE)


# -- what is measured about the environment --------------------------------------------------


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def package_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def package_versions() -> dict[str, str | None]:
    return {label: package_version(*names) for label, names in PACKAGES.items()}


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def bcas_version() -> dict[str, Any]:
    """Version of bcas and, for a git checkout of it, the commit (never a network call)."""
    root = PACKAGE_ROOT.parent
    commit = dirty = None
    # Only bcas's own checkout: an installed copy inside someone else's repository has no commit.
    if (root / ".git").exists() and shutil.which("git"):
        commit = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=no") if commit else None
        dirty = None if status is None else bool(status)
    return {"version": package_version("bcas"), "git_commit": commit, "git_dirty": dirty}


def cpu_name() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


# CPU instruction-set extensions that choose llama.cpp's (ggml's) CPU kernels.  The same GGUF
# under the same request can decode differently on hosts that differ in them (a different
# floating-point summation order flips a greedy choice): measured on the smoke grid at 1 item
# per dataset, 4 of the 7 embedded SmolLM2 records differ between an AMD EPYC host with
# AVX-512 and the host that wrote tests/golden/smoke_embedded_1.jsonl.  The manifest records
# them so that such a difference can be traced to its host.
SIMD_FLAGS = (
    "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_vbmi",
    "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve",
)  # fmt: skip


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The :data:`SIMD_FLAGS` this host's CPU has (``cpuinfo``'s ``flags`` lines, ``Features`` on
    Arm), in that order; ``[]`` where the file cannot be read."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    flags: set[str] = set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return [f for f in SIMD_FLAGS if f in flags]


def gpu_names(timeout: float = 5.0) -> list[str]:
    """GPU names from ``nvidia-smi`` (``[]`` without one, or when it does not answer in time)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        done = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def safe_url(url: str) -> str:
    """``url`` without user:password and query string (where keys hide); each URL of a comma list."""
    if "," in url and url.count("://") > 1:  # several servers of one model
        return ",".join(safe_url(part.strip()) for part in url.split(","))
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if not parts.scheme or not parts.netloc:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def plain(value: Any, key: str = "") -> Any:
    """JSON-safe copy of ``value``; URLs cleaned and secret-named fields (not ``*_env`` names) withheld."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, dict):
        return {str(k): plain(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v, key) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)
    if _SECRET_KEY.search(key) and not key.lower().endswith("env"):
        return "<withheld>"
    if "url" in key.lower() or re.match(r"^[a-z][a-z0-9+.-]*://", text):
        return safe_url(text)
    return text


# -- the session entry -------------------------------------------------------------------------


def _served(preflight: list[dict[str, Any]], base_url: str | None, model: str | None) -> str | None:
    urls = _split_urls(base_url)
    first = urls[0] if urls else None  # several servers of one model: the fingerprint is the first's
    for result in preflight:
        if result.get("base_url") == first and result.get("model") == model and result.get("fingerprint"):
            return str(result["fingerprint"])
    return None


def _fingerprint(backend: str, model: str | None, base_url: str | None, preflight: list[dict[str, Any]]) -> str:
    """The model's fingerprint without any network call (servers: from the preflight)."""
    if backend_meta(backend, "needs_base_url"):
        served = _served(preflight, base_url, model)
        if served is not None:
            return served
    from bcas.llm.fingerprint import model_fingerprint

    return model_fingerprint(backend, model, base_url=base_url, verify=False)


def _split_urls(value: str | None) -> list[str]:
    from bcas.llm.multi_endpoint import split_base_urls

    return split_base_urls(value)


def _try(fn: Callable[[], str]) -> str:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the manifest never stops a run; it says what failed
        return f"<unavailable: {type(exc).__name__}: {exc}>"


def _try_served(spec: Any, preflight: list[dict[str, Any]]) -> str | None:
    from bcas.run.served import served_name

    try:
        return served_name(spec, preflight)
    except Exception as exc:  # noqa: BLE001 - the manifest never stops a run; it says what failed
        return f"<unavailable: {type(exc).__name__}: {exc}>"


def model_entries(settings: Any, preflight: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(models by label, judge) with their fingerprints and context windows (as known at start)."""
    models: dict[str, Any] = {}
    windows = context_windows(settings, preflight)
    for spec in settings.models:
        models[spec.label] = {
            "backend": spec.backend,
            "model": spec.model,
            "base_url": plain(spec.base_url, "base_url"),
            "endpoints": [safe_url(u) for u in _split_urls(spec.base_url)],
            "fingerprint": _try(partial(_fingerprint, spec.backend, spec.model, spec.base_url, preflight)),
            "context_window": windows.get(spec.label),
            "served": _try_served(spec, preflight),  # what answered, beside what was asked for (bcas.run.served)
        }
    judge_spec = str(settings.judge)
    if judge_spec == "none":
        return models, None
    if judge_spec == "same":
        first = settings.models[0]
        fingerprint = models[first.label]["fingerprint"]
    else:
        backend, _, name = judge_spec.partition(":")
        base, _key_env = judge_endpoint(settings)
        fingerprint = _try(
            lambda: _fingerprint(
                backend, name or None, base if backend_meta(backend, "needs_base_url") else None, preflight
            )
        )
    from bcas.identity import grade_id

    judge = {
        "spec": judge_spec,
        "repeats": settings.judge_repeats,
        "fingerprint": fingerprint,
        "grade_id": _try(lambda: grade_id(fingerprint, settings.judge_repeats, settings.judge_three_way)),
    }
    return models, judge


def price_entry(settings: Any) -> dict[str, Any] | None:
    path = Path(settings.prices) if getattr(settings, "prices", None) else None
    if path is None or not path.is_file():
        return None  # the session prices nothing (bcas.run.session.BcasSession.prices)
    return {"path": str(path), "sheet": getattr(settings, "price_sheet", None), "sha256": file_sha256(path)}


def session_entry(
    token: str, settings: Any, options: dict[str, Any], preflight: list[dict[str, Any]], started_at: str | None = None
) -> dict[str, Any]:
    """The start of one session's entry (see the module docstring)."""
    models, judge = model_entries(settings, preflight)
    return {
        "session": token,
        "started_at": started_at or now(),
        "ended_at": None,
        "exit_status": None,
        "status": "running",
        "bcas": bcas_version(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "host": {
            "cpu": cpu_name(),
            "cpu_features": cpu_features(),
            "gpus": gpu_names(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "models": models,
        "judge": judge,
        "datasets": {},
        "price_sheet": price_entry(settings),
        "seed": settings.seed,
        "epochs": getattr(settings, "epochs", 1),
        "shard": getattr(getattr(settings, "shard", None), "label", None),  # "K/N" of a sharded run (bcas.shard)
        "shard_source": getattr(getattr(settings, "shard", None), "source", None),  # where auto found it
        "options": options,
        "settings": plain(settings),
    }


# -- the file ----------------------------------------------------------------------------------


def _update(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read, change and atomically rewrite ``run.json`` under the folder's lock."""
    path = run_dir / MANIFEST_FILE
    with locked(run_dir):
        data = read_manifest(run_dir)
        if data is None:
            if path.exists():  # damaged: keep it for inspection, start a new list
                aside = path.with_name(f"{MANIFEST_FILE}.damaged-{int(time.time())}")
                path.replace(aside)
                log.warning("%s was not a bcas run manifest; moved to %s", path, aside)
            data = {"schema_version": SCHEMA_VERSION, "sessions": []}
        change(data)
        tmp = path.with_name(f"{MANIFEST_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)
    return data


def _entry(data: dict[str, Any], token: str) -> dict[str, Any] | None:
    return next((s for s in data["sessions"] if isinstance(s, dict) and s.get("session") == token), None)


def start_session(run_dir: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """Append ``entry`` to the run folder's manifest (replacing an entry of the same session)."""

    def change(data: dict[str, Any]) -> None:
        data["sessions"] = [
            s for s in data["sessions"] if not (isinstance(s, dict) and s.get("session") == entry["session"])
        ] + [entry]

    return _update(run_dir, change)


def record_command(run_dir: Path, command: str, changes: dict[str, Any], records_written: int) -> dict[str, Any] | None:
    """Add the entry of a command that changed the records after the sessions (``bcas rejudge``,
    ``bcas reprice``): the last session's entry with this process's versions and host, the
    command, and what it changed (``changes``: its ``judge``, its ``price_sheet``), so that
    run.json and the report's "Run" section say what the records now hold.  A folder
    without run.json is left without one."""
    if read_manifest(run_dir) is None:
        return None
    started = now()

    def change(data: dict[str, Any]) -> None:
        sessions = [s for s in data["sessions"] if isinstance(s, dict)]
        last = dict(sessions[-1]) if sessions else {}
        last.update(
            session=f"{command.split()[-1]}-{started}",
            command=command,
            started_at=started,
            ended_at=now(),
            exit_status=0,
            status="finished",
            bcas=bcas_version(),
            python=platform.python_version(),
            packages=package_versions(),
            host={
                "cpu": cpu_name(),
                "cpu_features": cpu_features(),
                "gpus": gpu_names(),
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
            },
            records_written=records_written,
            answers_from_cache=0,
            **changes,
        )
        data["sessions"].append(last)

    return _update(run_dir, change)


def complete_session(
    run_dir: Path, token: str, records: list[dict[str, Any]], session: Any = None, status: str | None = None
) -> dict[str, Any] | None:
    """Fill this session's entry at the end (datasets, recorded fingerprints, end time); return the manifest.

    ``records``: the run's records (dicts); those written since the session started count.
    ``session``: the process's ``BcasSession``, whose loaded datasets count too (resumed cases).
    ``status``: written when given (``interrupted``), before the report renders the manifest.
    Returns the manifest as is (or ``None``) when the session has no entry.
    """
    current = read_manifest(run_dir)
    if current is None or _entry(current, token) is None:
        return current

    def change(data: dict[str, Any]) -> None:
        entry = _entry(data, token)
        if entry is None:
            return
        started = _timestamp(entry.get("started_at"))
        labels = set(entry.get("models") or {})
        mine = [r for r in records if str(r.get("model")) in labels and float(r.get("created_at") or 0) >= started]
        datasets: dict[str, set[str]] = {k: set(v) for k, v in (entry.get("datasets") or {}).items()}
        for rec in mine:
            datasets.setdefault(str(rec.get("dataset")), set()).add(str(rec.get("dataset_hash")))
        # Resumed cases wrote nothing new: the datasets this process loaded and answered count too
        # (not the whole collections it loaded for indexes and titles, which no record holds).
        answered = {str(r.get("dataset_hash")) for r in records if str(r.get("model")) in labels}
        for ds in (getattr(session, "_datasets", None) or {}).values():
            if str(ds.hash) in answered:
                datasets.setdefault(str(ds.name), set()).add(str(ds.hash))
        entry["datasets"] = {k: sorted(v) for k, v in sorted(datasets.items())}
        tasks: dict[str, Any] = dict(entry.get("dataset_tasks") or {})
        for ds in (getattr(session, "_datasets", None) or {}).values():  # every dataset a prompt was made for
            tasks[str(ds.name)] = {"task": ds.task, "scoring": ds.scoring, "task_source": ds.task_source}
        entry["dataset_tasks"] = dict(sorted(tasks.items()))
        loaded = {spec.label: m for spec, m in (getattr(session, "_models", None) or {}).items()}
        for label, model in (entry.get("models") or {}).items():
            seen = sorted({str(r.get("model_fingerprint")) for r in mine if r.get("model") == label})
            if seen:
                model["recorded_fingerprints"] = seen
            served = backend_meta(str(model.get("backend")), "needs_base_url")  # a server's: the preflight's reading
            window = loaded_window(loaded[label]) if label in loaded and not served else None
            if window:  # the loaded model's own window is the truth
                model["context_window"] = window
        if entry.get("judge"):
            entry["judge"]["recorded_grade_ids"] = sorted({g for r in mine for g in (r.get("grades") or {})})
        entry["records_written"] = len(mine)
        entry["answers_from_cache"] = sum(answered_from_cache(r) for r in mine)
        entry["ended_at"] = now()
        if status is not None:
            entry["status"] = status

    return _update(run_dir, change)


def finish_session(run_dir: Path, token: str, exit_status: int) -> None:
    """Write the session's end time (if not yet), pytest's exit status and the status it means."""

    def change(data: dict[str, Any]) -> None:
        entry = _entry(data, token)
        if entry is not None:
            entry["ended_at"] = entry.get("ended_at") or now()
            entry["exit_status"] = int(exit_status)
            entry["status"] = "interrupted" if int(exit_status) == INTERRUPTED else "finished"

    current = read_manifest(run_dir)
    if current is not None and _entry(current, token) is not None:
        _update(run_dir, change)


def _timestamp(text: Any) -> float:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return 0.0


__all__ = [
    "MANIFEST_FILE",
    "complete_session",
    "finish_session",
    "read_manifest",
    "session_entry",
    "start_session",
]
