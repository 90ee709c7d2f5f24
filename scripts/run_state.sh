# Sourced by scripts/ablation_deen.sh and scripts/quality.sh: where a training run of a
# fixed epoch budget stands, so that running a script again keeps finished runs and resumes
# interrupted ones (from last.pt) instead of starting them over.

# epochs_done RUN_DIR: the epochs RUN_DIR/valid_log.jsonl records (0 without one)
epochs_done() {
  python3 - "$1/valid_log.jsonl" <<'EOF'
import json, sys
try:
    rows = [json.loads(x) for x in open(sys.argv[1], encoding="utf-8") if x.strip()]
except FileNotFoundError:
    rows = []
print(int(rows[-1].get("epochs_done", rows[-1]["epoch"])) if rows else 0)
EOF
}

# resume_flag RUN_DIR: prints --resume when RUN_DIR holds an interrupted run's last.pt
resume_flag() {
  if [ -f "$1/last.pt" ]; then echo "--resume"; fi
}
