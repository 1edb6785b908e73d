#!/usr/bin/env bash
# One vLLM server on this node, healthy before the caller goes on.  Sourced by
# bcas-shards.sbatch and bcas-merge.sbatch; not run on its own.
#
#   vllm_up LOG_FILE    start `vllm serve`, wait until GET /v1/models lists the served
#                       name, return 0; 1 (with the log's tail) when vLLM exits or does
#                       not answer within VLLM_START_TIMEOUT seconds.  The server is
#                       stopped when the calling script exits.
#
# Environment (set by submit.sh, or export them yourself):
#   BCAS_SERVE_MODEL    what vLLM loads: a Hugging Face id or a local folder
#   BCAS_SERVED_NAME    the name the suite asks for (--bcas-model openai:NAME); default BCAS_SERVE_MODEL
#   VLLM_PORT           default 8000
#   VLLM_ARGS           more `vllm serve` flags, e.g. "--tensor-parallel-size 2 --max-model-len 32768"
#   VLLM_START_TIMEOUT  seconds to wait for the server (default 1200: weights on shared storage load slowly)

vllm_up() {
    local log="$1"
    local port="${VLLM_PORT:-8000}"
    local timeout="${VLLM_START_TIMEOUT:-1200}"
    local name="${BCAS_SERVED_NAME:-$BCAS_SERVE_MODEL}"
    # shellcheck disable=SC2086  # VLLM_ARGS is a list of flags
    vllm serve "$BCAS_SERVE_MODEL" --host 127.0.0.1 --port "$port" --served-model-name "$name" \
        ${VLLM_ARGS:-} >"$log" 2>&1 &
    VLLM_PID=$!
    trap 'kill "$VLLM_PID" 2>/dev/null || true; wait "$VLLM_PID" 2>/dev/null || true' EXIT
    local waited=0
    until curl -sf "http://127.0.0.1:${port}/v1/models" 2>/dev/null | grep -q "\"${name}\""; do
        if ! kill -0 "$VLLM_PID" 2>/dev/null; then
            echo "vllm_up: vllm serve exited while starting; the end of ${log}:" >&2
            tail -n 40 "$log" >&2
            return 1
        fi
        if ((waited >= timeout)); then
            echo "vllm_up: no answer from http://127.0.0.1:${port}/v1/models after ${timeout} s; the end of ${log}:" >&2
            tail -n 40 "$log" >&2
            return 1
        fi
        sleep 2
        waited=$((waited + 2))
    done
    echo "vllm_up: ${name} served at http://127.0.0.1:${port}/v1 after ${waited} s"
    BCAS_BASE_URL="http://127.0.0.1:${port}/v1"
    export BCAS_BASE_URL
}
