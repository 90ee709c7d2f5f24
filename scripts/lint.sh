#!/usr/bin/env bash
# Lint (ruff) and type-check (mypy) with the tools of .venv; exits non-zero on any finding.
# Settings are in pyproject.toml ([tool.ruff], [tool.mypy]).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
status=0
.venv/bin/ruff check nmt tests scripts benchmarks || status=1
# the formatter ([tool.ruff.format]): a file it would change is a finding
.venv/bin/ruff format --check nmt tests scripts benchmarks || status=1
# a bound on positional parameters ([tool.ruff.lint.pylint]); PLR0917 is a preview rule, so
# preview is switched on for this one rule alone
.venv/bin/ruff check --preview --select PLR0917 nmt || status=1
# [tool.mypy] files (nmt, tests)
.venv/bin/mypy || status=1
exit "$status"
