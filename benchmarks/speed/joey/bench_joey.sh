#!/usr/bin/env bash
# Joey NMT 2.3.0's training speed on nmt's reference architecture (configs/bench_reference.yaml),
# from scratch, with THREADS torch threads: target tokens/s over a WINDOW_S-second window after
# WARMUP_S seconds of warm-up, padding, and the peak RSS of the process (/usr/bin/time -v):
#
#   [JOEY_OUT=/tmp/joey_bench] [WARMUP_S=30] [WINDOW_S=60] [DATA=DIR] [JOEY_VENV=/work/joey/venv] \
#     [JOEY_WORK=/work/joey/work] bash benchmarks/speed/joey/bench_joey.sh THREADS
#
# THREADS: a positive integer; WARMUP_S: seconds >= 0; WINDOW_S: seconds > 0 (plain decimal
# numbers). Relative paths are from the repository root. Bad input (those, or a DATA without
# Multi30k's train.de[.gz] and train.en[.gz]) ends with one line naming it and exit code 2,
# before anything is installed or prepared.
# Installs Joey first where JOEY_VENV lacks it (setup.sh: a few minutes, once), then
# (joey_config.py, in nmt's .venv) prepares, once per config and corpus, the plain-text
# training pairs and the 8,000-piece SentencePiece model in JOEY_WORK (a cache runs may share:
# a lock on JOEY_WORK/.lock lets one prepare at a time) and writes this run's Joey config to
# JOEY_OUT/config.yaml (nothing run-specific goes into JOEY_WORK); then trains
# (joey_train_bench.py in Joey's venv: one process, stopped after the window, nothing saved).
# DATA: the Multi30k directory (default ../shared/data/multi30k).
# Writes JOEY_OUT/joey_bench.json (n_params, train.target_tokens_per_s, ..., peak_rss_mib),
# JOEY_OUT/config.yaml, JOEY_OUT/prep.json (JOEY_WORK's record of the data it used),
# JOEY_OUT/model/train.log (Joey's log, a line a step) and JOEY_OUT/time_v.txt; prints the
# JSON and time -v's report. Exits 1 if Joey's model does not have nmt's parameter count.
# Training only: JOEY_CKPT (what side_by_side.sh passes for decoding) is noted and not used.
# The settings: results/speed/README.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
# every input is checked here, before setup.sh or joey_config.py runs: one line, exit 2
bad() {
  echo "bench_joey: $*" >&2
  exit 2
}
[ $# = 1 ] || bad "THREADS: expected one argument (torch threads, e.g. 2), got $#;" \
  "usage: [JOEY_OUT=DIR] [WARMUP_S=30] [WINDOW_S=60] [DATA=DIR]" \
  "bash benchmarks/speed/joey/bench_joey.sh THREADS"
THREADS=$1
[[ $THREADS =~ ^[1-9][0-9]*$ ]] \
  || bad "THREADS=$THREADS: must be a positive integer (torch threads)"
WARMUP=${WARMUP_S:-30}
WINDOW=${WINDOW_S:-60}
number='^([0-9]+[.]?[0-9]*|[.][0-9]+)$'  # a plain decimal without sign: never negative
[[ $WARMUP =~ $number ]] || bad "WARMUP_S=$WARMUP: must be a number of seconds >= 0"
# a window of 0 s would time a single step and report it as a rate
[[ $WINDOW =~ $number ]] && awk -v w="$WINDOW" 'BEGIN { exit !(w + 0 > 0) }' \
  || bad "WINDOW_S=$WINDOW: must be a number of seconds > 0"
DATA=${DATA:-../shared/data/multi30k}
[ -d "$DATA" ] || bad "DATA=$DATA: no such directory (the Multi30k directory, with" \
  "train.de.gz and train.en.gz; relative paths are from $PWD)"
# configs/bench_reference.yaml's languages (data.src_lang, data.tgt_lang): de -> en
for lang in de en; do
  [ -f "$DATA/train.$lang" ] || [ -f "$DATA/train.$lang.gz" ] \
    || bad "DATA=$DATA: no train.$lang.gz or train.$lang (not Multi30k's directory?)"
done
DATA=$(realpath "$DATA")
OUT=${JOEY_OUT:-/tmp/joey_bench}
VENV=${JOEY_VENV:-/work/joey/venv}
WORK=${JOEY_WORK:-/work/joey/work}
HERE=benchmarks/speed/joey
JOEY_VENV=$VENV bash "$HERE/setup.sh"
mkdir -p "$OUT" "$WORK"
OUT=$(realpath "$OUT")
# JOEY_WORK is shared by runs (the prepared data): one prepares at a time, the others then
# find prep.json up to date; the config (its model_dir is this run's) and a copy of the
# prep.json it was made with go to OUT only
(
  flock 9
  .venv/bin/python "$HERE/joey_config.py" "$WORK" --model-dir "$OUT/model" \
    --data-path "$DATA" --config-out "$OUT/config.yaml"
  cp "$WORK/prep.json" "$OUT/prep.json"
) 9> "$WORK/.lock"
if [ -n "${JOEY_CKPT:-}" ]; then
  echo "bench_joey: JOEY_CKPT=$JOEY_CKPT not used: this harness measures training only" >&2
fi
load=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${load%% *}" 'BEGIN { exit !(l > 0.5) }'; then
  echo "bench_joey: WARNING: load average is ${load%% *} before the run: other processes share the CPU" >&2
fi
echo "bench_joey: training, $THREADS threads, $WARMUP s warm-up, $WINDOW s window -> $OUT/model/train.log" >&2
rc=0
OMP_NUM_THREADS=$THREADS /usr/bin/time -v -o "$OUT/time_v.txt" "$VENV/bin/python" \
  "$HERE/joey_train_bench.py" train "$OUT/config.yaml" "$THREADS" "$WARMUP" \
  "$WINDOW" "$OUT/joey_bench.json" > "$OUT/train_stdout.log" 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
  tail -n 20 "$OUT/train_stdout.log" >&2
  echo "bench_joey: Joey's training failed (exit $rc); its output: $OUT/train_stdout.log" >&2
  exit 1
fi
"$VENV/bin/python" "$HERE/joey_train_bench.py" finish "$OUT/joey_bench.json" "$OUT/time_v.txt" \
  "$OUT/prep.json" "$load"
cat "$OUT/joey_bench.json" "$OUT/time_v.txt"
echo "bench_joey: wrote $OUT/joey_bench.json" >&2
"$VENV/bin/python" -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(r["n_params"] != r["n_params_nmt_reference"])' "$OUT/joey_bench.json" || {
  echo "bench_joey: Joey's model does not have nmt's parameter count (joey_bench.json)" >&2
  exit 1
}
