#!/usr/bin/env bash
# `nmt bench` training runs of the reference architecture, one process per variant, in the
# order given (run it again for the next round, so that variants alternate):
#
#   [OUT=DIR] [OLD_TREE=DIR] [DATA=DIR] [WARMUP=10 STEPS=60 WINDOW=60] [JOEY_WARMUP_S=30] \
#     bash benchmarks/speed/ab/bench_ab.sh ROUND VARIANT...
#
# VARIANT: fp32 | bf16 (this tree) | fp32_old | bf16_old (the tree at OLD_TREE, e.g.
# `git worktree add /tmp/nmt_old COMMIT`) | bf16_capN (this tree, bf16, with
# ONEDNN_PRIMITIVE_CACHE_CAPACITY=N) | bf16_bmM (this tree, bf16, train.batch_multiple=M) |
# bf16_bmM_capN (both) | bf16_cachesN, bf16_bmM_cachesN (N entries in both caches of bf16
# kernels, oneDNN's and ideep's LRU_CACHE_CAPACITY: nmt/ops/primitive_cache.py; N=1024 is the
# libraries' default, before nmt capped them) | bf16_trimT, bf16_trimT_bmM (train.batch_trim=T,
# and batch_multiple M; the caches then at nmt's size for trimmed runs), bf16_trimT_bmM_cachesN
# | joey. The caches' variables are set only
# where the variant names them; otherwise the caller's environment, else nmt's caps, hold. (Joey NMT 2.3.0 on the same architecture and data from scratch,
# benchmarks/speed/joey/bench_joey.sh: 2 threads, a WINDOW-second window after JOEY_WARMUP_S
# seconds; its own files in /tmp/joey_roundROUND). Each nmt run: 2 threads, 10 warm-up steps,
# 60 timed steps, then a 60 s window, training only. Writes OUT/VARIANT_roundROUND.{json,log,
# uptime}, the log with /usr/bin/time -v's peak RSS. Where other work shares the machine, stop
# it for the sitting (kill -STOP / -CONT); the uptime file records the load before each run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
HERE=$PWD
ROUND=${1:?round number}
shift
OUT=${OUT:-results/speed/$(date +%F)}
OLD_TREE=${OLD_TREE:-/tmp/nmt_old}
DATA=$(realpath "${DATA:-../shared/data/multi30k}")
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
for v in "$@"; do
  if [ "$v" = joey ]; then
    uptime > "$OUT/joey_round$ROUND.uptime"
    JOEY_OUT=/tmp/joey_round$ROUND DATA=$DATA WARMUP_S=${JOEY_WARMUP_S:-30} \
      WINDOW_S=${WINDOW:-60} bash benchmarks/speed/joey/bench_joey.sh 2 \
      > "$OUT/joey_round$ROUND.log" 2>&1 \
      || { tail -n 5 "$OUT/joey_round$ROUND.log" >&2; exit 1; }
    cp "/tmp/joey_round$ROUND/joey_bench.json" "$OUT/joey_round$ROUND.json"
    continue
  fi
  tree=$HERE opt=() caches=()
  case $v in
    fp32|bf16) p=$v ;;
    fp32_old|bf16_old) tree=$OLD_TREE p=${v%_old} ;;
    bf16_caches*) p=bf16 n=${v#bf16_caches}
      caches=("ONEDNN_PRIMITIVE_CACHE_CAPACITY=$n" "LRU_CACHE_CAPACITY=$n") ;;
    bf16_bm*_caches*) p=bf16 bm=${v#bf16_bm} n=${v#*_caches} opt=("train.batch_multiple=${bm%_caches*}")
      caches=("ONEDNN_PRIMITIVE_CACHE_CAPACITY=$n" "LRU_CACHE_CAPACITY=$n") ;;
    bf16_cap*) p=bf16 caches=("ONEDNN_PRIMITIVE_CACHE_CAPACITY=${v#bf16_cap}") ;;
    bf16_bm*_cap*) p=bf16 bm=${v#bf16_bm} opt=("train.batch_multiple=${bm%_cap*}")
      caches=("ONEDNN_PRIMITIVE_CACHE_CAPACITY=${v#*_cap}") ;;
    bf16_bm*) p=bf16 opt=("train.batch_multiple=${v#bf16_bm}") ;;
    bf16_trim*_bm*_caches*) p=bf16 t=${v#bf16_trim} m=${v#*_bm} n=${v#*_caches}
      opt=("train.batch_trim=${t%_bm*}" "train.batch_multiple=${m%_caches*}")
      caches=("ONEDNN_PRIMITIVE_CACHE_CAPACITY=$n" "LRU_CACHE_CAPACITY=$n") ;;
    bf16_trim*_bm*) p=bf16 t=${v#bf16_trim}
      opt=("train.batch_trim=${t%_bm*}" "train.batch_multiple=${v#*_bm}") ;;
    bf16_trim*) p=bf16 opt=("train.batch_trim=${v#bf16_trim}") ;;
    *) echo "bench_ab.sh: unknown variant '$v'" >&2; exit 2 ;;
  esac
  uptime > "$OUT/${v}_round$ROUND.uptime"
  (cd "$tree" && env ${caches[@]+"${caches[@]}"} PYTHONPATH=$tree /usr/bin/time -v \
     "$HERE/.venv/bin/python" -m nmt bench configs/bench_reference.yaml ${opt[@]+"${opt[@]}"} \
     --threads 2 --warmup "${WARMUP:-10}" --train-steps "${STEPS:-60}" \
     --train-seconds "${WINDOW:-60}" --skip-decode --precision "$p" \
     --data-path "$DATA" --json "$OUT/${v}_round$ROUND.json") > "$OUT/${v}_round$ROUND.log" 2>&1
done
