#!/usr/bin/env bash
# Install (into .venv) and run the test suite; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# one pytest worker per core (each test runs on one thread), whole files per worker so a
# file's module fixtures are built once; NMT_TEST_WORKERS=0 runs everything in one process
.venv/bin/python -m pytest -q -n "${NMT_TEST_WORKERS:-auto}" --dist loadfile "$@"
