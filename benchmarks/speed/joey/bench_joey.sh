#!/usr/bin/env bash
# Joey NMT 2.3.0's training speed on nmt's reference architecture (configs/bench_reference.yaml),
# from scratch, with THREADS torch threads: target tokens/s over a WINDOW_S-second window after
# WARMUP_S seconds of warm-up, padding, and the peak RSS of the process (/usr/bin/time -v):
#
#   [JOEY_OUT=/tmp/joey_bench] [WARMUP_S=30] [WINDOW_S=60] [DATA=DIR] [JOEY_VENV=/work/joey/venv] \
#     [JOEY_WORK=/work/joey/work] bash benchmarks/speed/joey/bench_joey.sh THREADS
#
# Installs Joey first where JOEY_VENV lacks it (setup.sh: a few minutes, once), then
# (joey_config.py, in nmt's .venv) writes Joey's config and, once per config and corpus, the
# plain-text training pairs and the 8,000-piece SentencePiece model into JOEY_WORK; then trains
# (joey_train_bench.py in Joey's venv: one process, stopped after the window, nothing saved).
# DATA: the Multi30k directory (default ../shared/data/multi30k from the repository root).
# Writes JOEY_OUT/joey_bench.json (n_params, train.target_tokens_per_s, ..., peak_rss_mib),
# JOEY_OUT/config.yaml, JOEY_OUT/model/train.log (Joey's log, a line a step) and
# JOEY_OUT/time_v.txt; prints the JSON and time -v's report. Exits 1 if Joey's model does not
# have nmt's parameter count. Training only: JOEY_CKPT (what side_by_side.sh passes for
# decoding) is noted and not used. The settings: results/speed/README.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
THREADS=${1:?THREADS: torch threads for Joey, e.g. 2}
OUT=${JOEY_OUT:-/tmp/joey_bench}
VENV=${JOEY_VENV:-/work/joey/venv}
WORK=${JOEY_WORK:-/work/joey/work}
DATA=$(realpath "${DATA:-../shared/data/multi30k}")
HERE=benchmarks/speed/joey
JOEY_VENV=$VENV bash "$HERE/setup.sh"
mkdir -p "$OUT" "$WORK"
OUT=$(realpath "$OUT")
.venv/bin/python "$HERE/joey_config.py" "$WORK" --model-dir "$OUT/model" --data-path "$DATA"
cp "$WORK/config.yaml" "$OUT/config.yaml"
if [ -n "${JOEY_CKPT:-}" ]; then
  echo "bench_joey: JOEY_CKPT=$JOEY_CKPT not used: this harness measures training only" >&2
fi
load=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${load%% *}" 'BEGIN { exit !(l > 0.5) }'; then
  echo "bench_joey: WARNING: load average is ${load%% *} before the run: other processes share the CPU" >&2
fi
echo "bench_joey: training, $THREADS threads, ${WARMUP_S:-30} s warm-up, ${WINDOW_S:-60} s window -> $OUT/model/train.log" >&2
rc=0
OMP_NUM_THREADS=$THREADS /usr/bin/time -v -o "$OUT/time_v.txt" "$VENV/bin/python" \
  "$HERE/joey_train_bench.py" train "$OUT/config.yaml" "$THREADS" "${WARMUP_S:-30}" \
  "${WINDOW_S:-60}" "$OUT/joey_bench.json" > "$OUT/train_stdout.log" 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
  tail -n 20 "$OUT/train_stdout.log" >&2
  echo "bench_joey: Joey's training failed (exit $rc); its output: $OUT/train_stdout.log" >&2
  exit 1
fi
"$VENV/bin/python" "$HERE/joey_train_bench.py" finish "$OUT/joey_bench.json" "$OUT/time_v.txt" \
  "$WORK/prep.json" "$load"
cat "$OUT/joey_bench.json" "$OUT/time_v.txt"
echo "bench_joey: wrote $OUT/joey_bench.json" >&2
"$VENV/bin/python" -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(r["n_params"] != r["n_params_nmt_reference"])' "$OUT/joey_bench.json" || {
  echo "bench_joey: Joey's model does not have nmt's parameter count (joey_bench.json)" >&2
  exit 1
}
