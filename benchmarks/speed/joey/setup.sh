#!/usr/bin/env bash
# A venv of its own with Joey NMT 2.3.0 on torch 2.13.0, for bench_joey.sh. Safe to run again
# (a stamp skips the installs once they are done):
#
#   [JOEY_VENV=/work/joey/venv] [PYTHON=python3] bash benchmarks/speed/joey/setup.sh
#
# torch goes in first and stays pinned (a constraints file for every later install): on the
# project's CPU machines 2.13.0 is a local CPU wheel, and any other version would pull a
# multi-GB CUDA build (NMT_TORCH as scripts/setup.sh's to choose another build). What Joey
# 2.3.0 needs beyond its own requirements on torch 2.13 (results/speed/README.md):
# sentencepiece < 0.2 (Joey calls a function 0.2 removed) and importlib_metadata. Joey's code
# stays in the venv; none of it is copied into this repository.
set -euo pipefail
VENV=${JOEY_VENV:-/work/joey/venv}
PYTHON=${PYTHON:-python3}
TORCH=${NMT_TORCH:-torch==2.13.0}
stamp=$VENV/.joey-installed
want="joeynmt==2.3.0 $TORCH sentencepiece<0.2 importlib_metadata"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$VENV/bin/python" -c "import joeynmt, torch, sentencepiece, importlib_metadata" 2>/dev/null; then
  echo "joey setup: $VENV already has $want"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
"$VENV/bin/python" -m pip install --quiet "$TORCH"
# pin the torch that is there now, whatever TORCH named, so that no dependency replaces it;
# its version from the package metadata: importing torch before numpy is installed warns
# "Failed to initialize NumPy"
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
"$VENV/bin/python" -c 'from importlib.metadata import version; print("torch==" + version("torch"))' \
  > "$constraints"
echo 'sentencepiece<0.2' >> "$constraints"
"$VENV/bin/python" -m pip install --quiet -c "$constraints" joeynmt==2.3.0 'sentencepiece<0.2' \
    importlib_metadata
"$VENV/bin/python" -c 'import joeynmt, torch, sentencepiece
from importlib.metadata import version
print("joey setup:", "joeynmt", version("joeynmt"), "torch", torch.__version__,
      "sentencepiece", sentencepiece.__version__)'
echo "$want" > "$stamp"
