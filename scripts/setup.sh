#!/usr/bin/env bash
# Create .venv and install nmt with its test tools. Safe to run again.
# torch is installed first and pinned: on the project's CPU machines 2.13.0 is a local
# CPU wheel, and any other version would pull a multi-GB CUDA build. Set NMT_TORCH to
# choose another build (e.g. NMT_TORCH="torch" for the newest from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# skip the (slow, offline-index) resolution when nothing changed since the last install
stamp=.venv/.nmt-installed
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && .venv/bin/python -c "import nmt, torch" 2>/dev/null; then
    exit 0
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet "${NMT_TORCH:-torch==2.13.0}"
# setuptools' advice on editable installs (a UserWarning) is not for our users
PYTHONWARNINGS=ignore::UserWarning .venv/bin/python -m pip install --quiet -e '.[dev]'
touch "$stamp"
