#!/bin/sh
# Build Urchin's sdist and, from it, the wheel into OUT_DIR (without the `build` frontend: the wheel
# alone, through pip), from a copy of the source in a temporary folder: setuptools writes build/ and
# *.egg-info beside the pyproject.toml it builds, and the checkout must stay clean (`make install`,
# tests/test_dist.py).
#
#   scripts/dist.sh OUT_DIR [PYTHON]     PYTHON: the interpreter that builds (default python3)
#
# With `build` and setuptools >= 77 beside PYTHON (`make test`'s venv has both), nothing is fetched;
# otherwise pip or build set up an isolated build environment from the configured index.
set -eu

out=${1:?usage: scripts/dist.sh OUT_DIR [PYTHON]}
python=${2:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/urchin-dist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# What the sdist and wheel are made of: the package, its metadata and the files pyproject names.
(cd "$root" && tar -cf - --exclude=__pycache__ --exclude='*.py[co]' pyproject.toml README.md LICENSE urchin) \
    | (cd "$tmp" && tar -xf -)

if "$python" -c 'import build' 2>/dev/null; then
    isolation=""
    if "$python" -c 'import sys, setuptools; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null; then
        isolation=--no-isolation
    fi
    "$python" -m build --quiet $isolation --outdir "$out" "$tmp" >/dev/null
else
    "$python" -m pip wheel --quiet --no-deps --wheel-dir "$out" "$tmp"
fi
ls "$out"/*.whl
