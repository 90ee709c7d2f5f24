# Sourced by scripts/ablation_deen.sh and scripts/quality.sh: where a training run of a
# fixed epoch budget stands, so that running a script again keeps finished runs and resumes
# interrupted ones (from last.pt) instead of starting them over.

# epochs_done RUN_DIR: the epochs RUN_DIR/valid_log.jsonl records (0 without one), read by
# nmt's own reader, so a damaged log stops the script with the file and line named; that
# reader's module imports no torch (a script asks this a few times per model)
epochs_done() {
  "${PYTHON:-.venv/bin/python}" - "$1/valid_log.jsonl" <<'EOF'
import sys
from pathlib import Path

from nmt.ops.validlog import CheckpointError, read_valid_log

try:
    rows = read_valid_log(Path(sys.argv[1]))
except CheckpointError as e:
    sys.exit(f"error: {e}")
print(int(rows[-1].get("epochs_done", rows[-1].get("epoch", 0))) if rows else 0)
EOF
}

# resume_flag RUN_DIR: prints --resume when RUN_DIR holds an interrupted run's last.pt
resume_flag() {
  if [ -f "$1/last.pt" ]; then echo "--resume"; fi
}

# require_tools: stops with a hint when the nmt command or the Python that the helpers above
# use is missing (a fresh clone before scripts/setup.sh)
require_tools() {
  local tool
  for tool in "$NMT" "${PYTHON:-.venv/bin/python}"; do
    command -v "$tool" > /dev/null || {
      echo "$0: $tool not found; run 'bash scripts/setup.sh' first (or set NMT= and PYTHON=)" >&2
      exit 2
    }
  done
}

# show_failure NAME LOG: says that NAME failed, with the end of its log (nmt's one-line error
# is its last line), so the cause is on the screen and not only in LOG
show_failure() {
  echo "$1: failed; the end of $2:"
  tail -n 3 "$2" 2>/dev/null | sed 's/^/  /'
}
