#!/usr/bin/env bash
# BLEU after the same wall clock, fp32 against bf16 autocast (issue 13): the reference
# architecture (configs/bench_reference.yaml) trained for MINUTES in each precision, one
# after the other on an otherwise idle machine, 2 threads, the same seed and batches,
# validation every 250 steps (inside the budget); then each run's best checkpoint is
# scored on test_2016_flickr with beam 5 and greedy search.
#
#   [OUT=results/speed/DIR] [ORDER="fp32 bf16"] bash benchmarks/speed/wallclock.sh [MINUTES]
#
# ORDER's runs: fp32, bf16, or bf16_trimT_bmM (bf16 with train.batch_trim=T and
# train.batch_multiple=M, as benchmarks/speed/ab/bench_ab.sh names them).
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES=${1:-10}
OUT=${OUT:-results/speed/$(date +%F)-wallclock}
ORDER=${ORDER:-"fp32 bf16"}
for p in $ORDER; do  # every name checked before anything is written
  [[ $p =~ ^(fp32|bf16|bf16_trim[0-9]+_bm[0-9]+)$ ]] \
    || { echo "wallclock.sh: unknown run '$p' in ORDER" >&2; exit 2; }
done
mkdir -p "$OUT"
{ grep -m1 "model name" /proc/cpuinfo; grep -o -m1 -E 'avx512_bf16|amx_bf16' /proc/cpuinfo || true
  nproc; uptime; git rev-parse --short HEAD; } > "$OUT/machine.txt"
for p in $ORDER; do
  run=runs/wallclock_$p
  rm -rf "$run"
  case $p in
    fp32|bf16) opt=("train.precision=$p") ;;
    bf16_trim*_bm*) t=${p#bf16_trim}
      opt=(train.precision=bf16 "train.batch_trim=${t%_bm*}" "train.batch_multiple=${p#*_bm}") ;;
    *) echo "wallclock.sh: unknown run '$p' in ORDER" >&2; exit 2 ;;
  esac
  echo "$(date +%T) training $p for $MINUTES min" >&2
  .venv/bin/nmt train configs/bench_reference.yaml "train.max_minutes=$MINUTES" \
      train.threads=2 "${opt[@]}" train.valid_every_steps=250 \
      "train.out_dir=$run" > "$OUT/train_$p.log" 2>&1
  cp "$run/valid_log.jsonl" "$OUT/valid_$p.jsonl"
done
for p in $ORDER; do
  for beam in 5 1; do
    echo "$(date +%T) test BLEU of $p, beam $beam" >&2
    .venv/bin/nmt evaluate "runs/wallclock_$p/best.pt" --split test_2016_flickr --beam "$beam" \
        --precision fp32 --json "$OUT/test_${p}_beam$beam.json" > "$OUT/test_${p}_beam$beam.txt" 2>&1
  done
done
uptime >> "$OUT/machine.txt"
