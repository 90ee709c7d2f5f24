#!/usr/bin/env bash
# Issue 48's next AMX sitting, in one go: do nmt's caps on the bf16 kernel caches (128 entries
# in oneDNN's and in ideep's: nmt/ops/primitive_cache.py) keep bf16's peak RSS within 1.3x of
# fp32's at no cost in speed there, as on a Zen 5 EPYC, and do train.batch_multiple
# (nmt/ops/shapes.py) and train.batch_trim (nmt/data/bucketing.py) make bf16 training faster?
#
#   [PAUSE_PIDS="PID..."] [ROUNDS=3] [SEARCH_ROUNDS=3] [OLD_TREE=DIR] [BM=8] [DATA=DIR] \
#     [JOEY=1] bash benchmarks/speed/amx_sitting.sh
#
# Refuses (exit 2) a CPU without amx_bf16, unless SMOKE=1: a check of this script itself on
# any CPU before an AMX sitting, e.g. `SMOKE=1 ROUNDS=1 WARMUP=1 STEPS=2 WINDOW=2 SEARCH_ROUNDS=1
# OUT=/tmp/amx_smoke bash benchmarks/speed/amx_sitting.sh` (3 minutes on a Zen 5; not a
# measurement). PAUSE_PIDS: the other work on the machine, stopped
# (kill -STOP) for the sitting and resumed (kill -CONT) at its end, on an error or Ctrl-C.
# Each round runs fp32, bf16 (nmt's caps), bf16_caches1024 (the libraries' default, before
# the caps), bf16_bmBM, and bf16_trim32_bmBM and bf16_trim16_bmBM (train.batch_trim: batches
# cut to a multiple of 32 or 16 sentences, the caches then at 512: on a Zen 5 482 shapes in
# 160 steps against 1,583, 3.1 builds a step against 26.7; a build cost 6-11x more on an AMX
# Xeon; results/speed/2026-12-08-zen5-trim/, 2026-12-07-zen5-builds/)
# (benchmarks/speed/ab/bench_ab.sh: 2 threads, 10 warm-up + 60 timed steps, a 60 s window;
# about 2.5 min a run, 40-45 min for 3 rounds), and with JOEY=1 also Joey NMT 2.3.0
# (bench_ab.sh's `joey`: same architecture and data from scratch, 30 s warm-up, the same 60 s
# window, about 2 min a run; benchmarks/speed/joey/setup.sh installs it first, once), in
# reverse order every other round; then one 70-step run each of bf16, bf16_caches1024,
# bf16_bmBM and bf16_trim32_bmBM with ONEDNN_VERBOSE=profile_create counts the primitives oneDNN built, their
# milliseconds and shapes (builds_*.txt, benchmarks/speed/primitive_builds.py). Writes
# results/speed/DATE-amx-bucket/ (OUT=DIR to change; WARMUP, STEPS, WINDOW as bench_ab.sh's):
# machine.txt, VARIANT_roundN.{json,log,uptime}, builds_*.txt and table.md
# (benchmarks/speed/ab/variants_table.py; with JOEY=1 each variant's window tokens/s over
# Joey's). Then search (benchmarks/speed/search_rounds.sh, SEARCH_ROUNDS rounds, 0 leaves it
# out, about 3 min a round): `nmt bench` of models/deen-additive with --decode-precision auto
# (measured on a CPU), fp32, bf16 and int8, fp32 and int8 with --processes, int8 through
# oneDNN (NMT_INT8_ENGINE=onednn: AMX-INT8) with threads and with processes, and OLD_TREE's
# auto where OLD_TREE names a worktree of the commit before issue 48 (e6d2505). ROUNDS=0
# leaves the training rounds out.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! grep -qw amx_bf16 /proc/cpuinfo && [ "${SMOKE:-0}" != 1 ]; then
  echo "amx_sitting.sh: this CPU has no amx_bf16 in /proc/cpuinfo; run it on an AMX Xeon" >&2
  exit 2
fi
# the search runs; +processes: two search processes (--processes), not threads
# +onednn: int8 products through oneDNN (AMX-INT8), not fbgemm (VNNI)
runs=("new:auto" "new:fp32" "new:bf16" "new:int8" "new:fp32+processes" "new:int8+processes"
  "new:int8+onednn" "new:int8+onednn+processes")
if [ -n "${OLD_TREE:-}" ]; then
  [ -d "$OLD_TREE/nmt" ] || { echo "amx_sitting.sh: OLD_TREE=$OLD_TREE has no nmt/ package" >&2; exit 2; }
  OLD_TREE=$(realpath "$OLD_TREE"); runs+=("old:auto")
fi
. benchmarks/speed/pause_pids.sh
. benchmarks/speed/cpu_id.sh
pause_pids amx_sitting.sh
HERE=$PWD
OUT=${OUT:-results/speed/$(date +%F)-amx-bucket}
BM=${BM:-8}
DATA=$(realpath "${DATA:-../shared/data/multi30k}")
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
{ git rev-parse HEAD; cpu_id
  .venv/bin/python -c 'import torch; print("torch", torch.__version__)'; } > "$OUT/machine.txt"
variants=(fp32 bf16 bf16_caches1024 "bf16_bm$BM" "bf16_trim32_bm$BM" "bf16_trim16_bm$BM")
if [ "${JOEY:-0}" = 1 ]; then  # Joey NMT 2.3.0 in every training round; installed before them
  bash benchmarks/speed/joey/setup.sh
  variants+=(joey)
fi
for r in $(seq 1 "${ROUNDS:-3}"); do
  order=("${variants[@]}")
  if (( r % 2 == 0 )); then
    order=(); for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[i]}"); done
  fi
  echo "round $r: ${order[*]}"
  OUT=$OUT DATA=$DATA bash benchmarks/speed/ab/bench_ab.sh "$r" "${order[@]}"
done
for v in bf16 bf16_caches1024 "bf16_bm$BM" "bf16_trim32_bm$BM"; do
  (( ${ROUNDS:-3} > 0 )) || break  # no training rounds: no primitive counts either
  opt=() caches=()
  [ "$v" = "bf16_bm$BM" ] && opt=("train.batch_multiple=$BM")
  [ "$v" = "bf16_trim32_bm$BM" ] && opt=("train.batch_trim=32" "train.batch_multiple=$BM")
  [ "$v" = bf16_caches1024 ] && caches=(LRU_CACHE_CAPACITY=1024 ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024)
  env ${caches[@]+"${caches[@]}"} ONEDNN_VERBOSE=profile_create .venv/bin/python -m nmt bench \
    configs/bench_reference.yaml ${opt[@]+"${opt[@]}"} --threads 2 --warmup "${WARMUP:-10}" \
    --train-steps "${STEPS:-60}" --train-seconds 0 \
    --skip-decode --precision bf16 --data-path "$DATA" > "$OUT/verbose_$v.tmp" 2>&1
  # builds (create:cache_miss), their ms and distinct shapes, per step and by shape family
  .venv/bin/python benchmarks/speed/primitive_builds.py "$OUT/verbose_$v.tmp" --top 40 \
    --steps $(( ${WARMUP:-10} + ${STEPS:-60} )) > "$OUT/builds_$v.txt"
  rm "$OUT/verbose_$v.tmp"
done
. benchmarks/speed/search_rounds.sh
OUT=$OUT DATA=$DATA HERE=$HERE OLD_TREE=${OLD_TREE:-} search_rounds "${SEARCH_ROUNDS:-3}" "${runs[@]}"
.venv/bin/python benchmarks/speed/ab/variants_table.py "$OUT" | tee "$OUT/table.md"
