#!/usr/bin/env bash
# Lint (ruff) and type-check (mypy) with the tools of .venv; exits non-zero on any finding.
# Settings are in pyproject.toml ([tool.ruff], [tool.mypy]).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
status=0
.venv/bin/ruff check nmt tests scripts benchmarks || status=1
.venv/bin/mypy nmt || status=1
exit "$status"
