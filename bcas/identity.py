"""What an answer and a grade are: their identities.

Anything that can change an answer is part of the answer's identity::

    model fingerprint + configuration (config_id, seed included) + dataset hash
    + item id + prompt-template hash + epoch

and a grade has its own identity (judge fingerprint + judge prompt hash + repeats).
Grid membership is *not* identity: a configuration shared by two grids is one answer.

Model fingerprints, by how the model is reached:

* a GGUF file (``embedded``): ``gguf:sha256:<hex>`` of the file's bytes (cached on disk
  by path, size and modification time, so a multi-GB file is hashed once);
* a local Hugging Face checkpoint (``vllm``): ``hf-local:<folder name>:<hex>``, a hash of
  ``config.json``, the weights' index and the weight files' names and sizes;
  a hub id: ``hf:<id>`` (with ``@revision`` when the id carries one);
* a server (``openai``): ``served:<id the server reports>``, then
  ``@<digest>`` of what the server reports about the model it serves (model path,
  ``root``, weights ``meta``, chat template hash, context length:
  :mod:`bcas.llm.served`) when it reports any, then ``#<system_fingerprint>`` when a
  chat answer carries one.  Another file behind the same name is another identity;
* the ``mock`` backend: ``mock:<variant>``.

A fingerprint says *which* model answered but not in words; the name of what answered
(a GGUF's file name, vLLM's ``root``) is shown beside the requested name wherever they
differ (:func:`same_model`, :mod:`bcas.run.served`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bcas.registry import AGENTS, RUN_KINDS

PACKAGE_ROOT = Path(__file__).resolve().parent

# The prompt folders whose templates shape the answers of each run kind are the kind's
# ``prompts`` metadata (bcas.registry.RUN_KINDS); the judge's own templates are part of
# the grade's identity instead.
JUDGE_PROMPTS = (
    "grading/prompts/judge.txt",
    "grading/prompts/judge_format_json.txt",
    "grading/prompts/judge_format_text.txt",
    "grading/prompts/judge_retry.txt",
)
# The three-way judge (correct / incorrect / not attempted, SimpleQA's grading) has its own
# templates: a grade made with them is another grade (``grade_id(..., three_way=True)``).
THREE_WAY_JUDGE_PROMPTS = (
    "grading/prompts/judge_three_way.txt",
    "grading/prompts/judge_three_way_format_json.txt",
    "grading/prompts/judge_three_way_format_text.txt",
    "grading/prompts/judge_retry.txt",
)
# How a judge's reply is read into a verdict (bcas.grading.judge.parse_verdict and
# parse_grade): the same replies read under another reading are other grades, so a
# resumed run grades again.  Raise it whenever the reading of some reply changes.
# 2: contractions ("isn't correct") and a negation two words back read as incorrect.
JUDGE_READING = 2
# Templates of the agent's optional behaviours (``AgentConfig.cite``, ``AgentConfig.abstain``).
# They are outside the run kind's prompt folder, so a configuration that leaves an option
# off keeps its prompt hash; a configuration that turns one on carries the option's
# template hash in its configuration id (:attr:`bcas.config.RunConfig.config_id`).
OPTION_PROMPTS = {
    "cite": ("agent/prompts/options/answer_cite_json.txt", "agent/prompts/options/answer_cite_text.txt"),
    "abstain": ("agent/prompts/options/tool_abstain.txt", "agent/prompts/options/answer_abstain.txt"),
}
_FINGERPRINT_CACHE = "fingerprints.json"


def _sha256_files(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def prompt_dirs(kind: str) -> tuple[str, ...]:
    """The prompt folders of run kind ``kind`` (none for an unregistered kind)."""
    return tuple(RUN_KINDS.meta(kind, "prompts", ())) if kind in RUN_KINDS else ()


def prompt_hash(kind: str) -> str:
    """Hash (16 hex) of every prompt template that shapes the answers of ``kind``."""
    files: list[Path] = []
    for folder in prompt_dirs(kind):
        files.extend(sorted((PACKAGE_ROOT / folder).glob("*.txt")))
    return _sha256_files(files)[:16]


def judge_prompt_hash(three_way: bool = False) -> str:
    """Hash (16 hex) of the judge's prompt templates (the three-way judge's with ``three_way``)."""
    return _sha256_files(PACKAGE_ROOT / p for p in (THREE_WAY_JUDGE_PROMPTS if three_way else JUDGE_PROMPTS))[:16]


def grade_id(judge_fingerprint: str, repeats: int, three_way: bool = False) -> str:
    """Identity of a grade: judge fingerprint + judge prompt hash + repeats + the reading of its
    replies (:data:`JUDGE_READING`) (+ ``|3way`` for the three-way judge)."""
    reading = f"|read{JUDGE_READING}"
    return f"{judge_fingerprint}|prompt:{judge_prompt_hash(three_way)}|x{repeats}{reading}" + (
        "|3way" if three_way else ""
    )


@functools.cache
def option_prompt_hash(option: str) -> str:
    """Hash (16 hex) of the templates of an optional agent behaviour (:data:`OPTION_PROMPTS`)."""
    return _sha256_files(PACKAGE_ROOT / p for p in OPTION_PROMPTS[option])[:16]


def epoch_seed(seed: int, epoch: int) -> int:
    """The sampling seed of ``epoch``: the run's seed for epoch 0, distinct derived seeds after."""
    if epoch == 0:
        return seed
    digest = hashlib.sha256(f"bcas-epoch:{seed}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _cache_file() -> Path:
    from bcas.paths import cache_dir

    return cache_dir() / _FINGERPRINT_CACHE


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, remembered on disk by (absolute path, size, mtime)."""
    p = Path(path).resolve()
    stat = p.stat()
    key = f"{p}|{stat.st_size}|{stat.st_mtime_ns}"
    cache_path = _cache_file()
    try:
        known = json.loads(cache_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), str):
        return str(known[key])
    digest = hashlib.sha256()
    with open(p, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    known = known if isinstance(known, dict) else {}
    known[key] = value
    tmp = cache_path.with_name(f"{cache_path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(known, indent=0, sort_keys=True), encoding="utf-8")
        tmp.replace(cache_path)
    except OSError:
        pass  # the cache is an optimisation only
    return value


def gguf_fingerprint(path: str | os.PathLike[str]) -> str:
    return f"gguf:sha256:{file_sha256(path)}"


def hf_fingerprint(model: str) -> str:
    """A local checkpoint folder's content fingerprint, or ``hf:<id>`` for a hub id."""
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return f"hf:{model}"
    digest = hashlib.sha256()
    for name in (
        "config.json",
        "model.safetensors.index.json",
        "pytorch_model.bin.index.json",
        "generation_config.json",
    ):
        part = folder / name
        if part.is_file():
            digest.update(name.encode() + b"\0" + part.read_bytes() + b"\0")
    for weight in sorted(list(folder.glob("*.safetensors")) + list(folder.glob("*.bin")) + list(folder.glob("*.gguf"))):
        digest.update(f"{weight.name}:{weight.stat().st_size}\0".encode())
    return f"hf-local:{folder.name}:{digest.hexdigest()[:32]}"


def server_fingerprint(
    served_id: str, system_fingerprint: str | None = None, facts: dict[str, Any] | None = None
) -> str:
    """``served:<id>[@<16 hex of the reported facts>][#<system_fingerprint>]`` (see the module docstring)."""
    digest = ""
    if facts:
        blob = json.dumps(facts, sort_keys=True, separators=(",", ":"), default=str)
        digest = "@" + hashlib.sha256(blob.encode()).hexdigest()[:16]
    return f"served:{served_id}{digest}" + (f"#{system_fingerprint}" if system_fingerprint else "")


def short(fingerprint: str, n: int = 10) -> str:
    """A short readable form of a fingerprint (for tables)."""
    head, _, tail = fingerprint.rpartition(":")
    return f"{head.split(':')[0]}:{tail[:n]}" if head else fingerprint[:n]


def answer_key(record: dict[str, Any] | Any) -> tuple[str, str, str, str, str, int]:
    """The identity of an answer as a tuple (also for a record given as a dict)."""
    get = record.get if isinstance(record, dict) else (lambda name, default=None: getattr(record, name, default))
    return (
        str(get("model_fingerprint", "") or ""),
        str(get("config_id", "")),
        str(get("dataset_hash", "")),
        str(get("item_id", "")),
        str(get("prompt_hash", "") or ""),
        int(get("epoch", 0) or 0),
    )


def name_stem(model: str) -> str:
    """A model name's label form: its last path part without ``.gguf``, lower case, other signs as ``-``.

    ``Qwen/Qwen3-8B`` -> ``qwen3-8b``; ``/models/SmolLM2-135M-Instruct-Q4_1.gguf`` -> ``smollm2-135m-instruct-q4_1``.
    """
    stem = Path(model).name if os.sep in model or model.endswith(".gguf") else model
    stem = re.sub(r"\.gguf$", "", stem.split("/")[-1])
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", stem).lower()


def same_model(requested: str, served: str) -> bool:
    """``served`` is the ``requested`` model by name: their label forms (:func:`name_stem`) are equal,
    or the served one only adds a variant to it (``qwen3-8b`` -> ``Qwen3-8B-Q4_K_M.gguf``,
    ``smollm2-135m`` -> ``SmolLM2-135M-Instruct-Q4_1.gguf``)."""
    asked, got = name_stem(requested), name_stem(served)
    return got == asked or got.startswith(f"{asked}-")


__all__ = [
    "name_stem",
    "same_model",
    "answer_key",
    "epoch_seed",
    "file_sha256",
    "gguf_fingerprint",
    "grade_id",
    "hf_fingerprint",
    "judge_prompt_hash",
    "option_prompt_hash",
    "prompt_hash",
    "server_fingerprint",
    "short",
]


# -- the code of a user's agent (the ``agent`` run kind, bcas.bridge) ---------------------------------------

_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(path: Path) -> str:
    """sha256 of a file's bytes, cached by path, size and modification time."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _FILE_DIGESTS[key]


def _code_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [path] if path.is_file() else []


@functools.cache
def _distributions() -> dict[str, list[str]]:
    import importlib.metadata

    return dict(importlib.metadata.packages_distributions())


def _callable_code(target: str) -> list[str]:
    """What identifies a ``module:function`` agent's code: its module's file digest and, when the module
    belongs to an installed distribution other than a local file, that distribution's version."""
    import importlib.metadata
    import importlib.util

    if ":" not in target and target in AGENTS:  # a registered agent: its target's module
        registered = AGENTS[target]
        target = registered if isinstance(registered, str) else f"{registered.__module__}:{registered.__qualname__}"
    module = target.split(":", 1)[0]
    parts = [f"callable:{target}"]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        return [*parts, "module:unresolved"]
    parts.append(f"file:{Path(spec.origin).name}:{_file_digest(Path(spec.origin))}")
    top = module.split(".", 1)[0]
    for dist in sorted(set(_distributions().get(top, ()))):
        parts.append(f"dist:{dist}=={importlib.metadata.version(dist)}")
    return parts


def agent_code_id(callable_: str, command: Iterable[str] = (), code: Iterable[str] = ()) -> str:
    """Hash (16 hex) of a user agent's code: changing the code changes the answer identity.

    A callable (``module:function`` or a registered agent's name): its module file's bytes and
    the version of the distribution it belongs to (an installed package).  A command: the bytes
    of every argument that names an existing file (``python3 agent.py``: ``agent.py``), else of
    the executable it runs.  ``code``: more files or folders (every file under them) of the
    agent's.  Paths are read relative to the current folder.
    """
    parts = _callable_code(callable_) if callable_ else []
    args = list(command)
    if args:
        parts.append("command:" + json.dumps(args))
        files = [Path(a) for a in args if Path(a).is_file()]
        if not files:
            import shutil

            found = shutil.which(args[0])
            files = [Path(found)] if found else []
        parts += [f"file:{f}:{_file_digest(f)}" for f in files]
    for entry in code:
        files = _code_files(Path(entry))
        if not files:
            raise FileNotFoundError(f"code: {entry} names no file or folder of the agent's code")
        parts += [f"file:{f}:{_file_digest(f)}" for f in files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
