#!/usr/bin/env bash
# Installs everything onceflow needs on a fresh machine: a virtual environment in .venv with the
# package and its test dependencies, and Debian's kcat for the interop tests. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet -e '.[test]'

if ! command -v kcat >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "setup: installing Debian's kcat" >&2
    $SUDO apt-get update -qq >/dev/null || echo "setup: apt-get update failed; trying the install anyway" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat >/dev/null
fi
