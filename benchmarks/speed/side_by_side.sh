#!/usr/bin/env bash
# Side by side on one idle machine, alternating: nmt at this commit (`nmt bench`), nmt at an
# earlier commit checked out in a worktree at OLD_TREE (its own `nmt bench`, which
# exists since ce5caac; OLD_TREE=none skips it), on a CPU with
# native bf16 (avx512_bf16 or amx_bf16) also nmt's training and, in another process, its
# search with bf16 autocast (`nmt bench --skip-decode --precision bf16`, `nmt bench
# --skip-train --decode-precision bf16`; the first run is fp32 throughout), and Joey NMT 2.3.0
# (JOEY_HARNESS, default benchmarks/speed/joey/bench_joey.sh: training only, from scratch, a 60 s
# window after 30 s; see results/speed/README.md for its settings; the harness of the sittings
# up to 2026-12-01-e, which also decoded with JOEY_CHECKPOINT, lived outside this repository
# and is lost). Every run uses 2 threads and the reference architecture of
# configs/bench_reference.yaml.
#
#   [OUT=results/speed/DIR] [OLD_TREE=DIR] [OLD_CKPT=FILE] [JOEY_HARNESS=FILE] \
#       bash benchmarks/speed/side_by_side.sh NMT_CHECKPOINT [JOEY_CHECKPOINT|-] [ROUNDS]
#
# Writes into OUT (default results/speed/DATE, from the repository root): per round
# nmt_round*.{json,md,log}, nmt_bf16_round*, nmt_bf16dec_round*, nmt_before_round*,
# joey_round*.{json,log}, and machine.txt; benchmarks/speed/summarize.py OUT makes the table.
# An OLD_TREE from before `nmt bench` (a79503b, the 2026-11-30 sitting) ran
# `python -m nmt.benchmark`, a module that no longer exists; the script that ran it:
# git show 068c3a9:results/speed/side_by_side.sh
#
# OLD_CKPT: the checkpoint the old tree runs (default NMT_CHECKPOINT), for an old tree that
# cannot load the new checkpoint (e.g. one from before model.output_bias existed).
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=$PWD
CKPT=$(realpath "${1:?an nmt checkpoint of configs/bench_reference.yaml}")
JOEY_CKPT=${2:--}  # for a harness that decodes; `-` (the default): none
[ "$JOEY_CKPT" != - ] || JOEY_CKPT=
ROUNDS=${3:-2}
FIRST=${FIRST:-1}  # the first round number (to add rounds to a sitting)
OUT=${OUT:-results/speed/$(date +%F)}
OLD_TREE=${OLD_TREE:-/work/runtree}
BF16=$(grep -q -m1 -E 'avx512_bf16|amx_bf16' /proc/cpuinfo && echo 1 || echo 0)
OLD_CKPT=$(realpath "${OLD_CKPT:-$CKPT}")
JOEY_HARNESS=${JOEY_HARNESS:-benchmarks/speed/joey/bench_joey.sh}
mkdir -p "$OUT"
{ grep -m1 "model name" /proc/cpuinfo; nproc; uptime; } > "$OUT/machine.txt"
for r in $(seq "$FIRST" "$ROUNDS"); do
  echo "round $r: nmt bench" >&2
  /usr/bin/time -v .venv/bin/nmt bench "$CKPT" --threads 2 --warmup 5 --train-steps 40 \
      --train-seconds 30 --sentences 1000 --batch-size 64 --beam 5 --decode-precision fp32 \
      --json "$OUT/nmt_round$r.json" > "$OUT/nmt_round$r.md" 2> "$OUT/nmt_round$r.log"
  if [ "$BF16" = 1 ]; then
    echo "round $r: nmt bench, training with bf16 autocast" >&2
    /usr/bin/time -v .venv/bin/nmt bench "$CKPT" --threads 2 --warmup 5 --train-steps 40 \
        --train-seconds 30 --skip-decode --precision bf16 \
        --json "$OUT/nmt_bf16_round$r.json" > "$OUT/nmt_bf16_round$r.md" 2> "$OUT/nmt_bf16_round$r.log"
    # a process of its own: decoding first left the bf16 training 10-15% slower (2026-12-01-e)
    echo "round $r: nmt bench, search with bf16 matrix products" >&2
    /usr/bin/time -v .venv/bin/nmt bench "$CKPT" --threads 2 --skip-train --sentences 1000 \
        --batch-size 64 --beam 5 --decode-precision bf16 \
        --json "$OUT/nmt_bf16dec_round$r.json" > "$OUT/nmt_bf16dec_round$r.md" \
        2> "$OUT/nmt_bf16dec_round$r.log"
  fi
  if [ "$OLD_TREE" = none ]; then
    :
  else
  echo "round $r: nmt before ($(git -C "$OLD_TREE" rev-parse --short HEAD))" >&2
  # `nmt bench` lives in nmt/bench.py before the subpackages (ba82f16), nmt/commands/ after
  if [ ! -f "$OLD_TREE/nmt/bench.py" ] && [ ! -f "$OLD_TREE/nmt/commands/bench.py" ]; then
    echo "OLD_TREE=$OLD_TREE has no nmt bench (a tree from before it existed); use a later" \
         "commit or OLD_TREE=none" >&2
    exit 2
  fi
  # from the old tree's root: `python -m` puts the working directory first on sys.path
  (cd "$OLD_TREE" && /usr/bin/time -v "$HERE/.venv/bin/python" -m nmt bench "$OLD_CKPT" \
      --threads 2 --warmup 5 --train-steps 40 --train-seconds 30 --sentences 1000 \
      --batch-size 64 --beam 5 --json "$HERE/$OUT/nmt_before_round$r.json" \
      > "$HERE/$OUT/nmt_before_round$r.md" 2> "$HERE/$OUT/nmt_before_round$r.log")
  fi
  echo "round $r: Joey NMT" >&2
  JOEY_CKPT="$JOEY_CKPT" JOEY_OUT="/tmp/joey_round$r" bash "$JOEY_HARNESS" 2 \
      > "$OUT/joey_round$r.log" 2>&1
  cp "/tmp/joey_round$r/joey_bench.json" "$OUT/joey_round$r.json"
done
{ grep -m1 "model name" /proc/cpuinfo; uptime; } >> "$OUT/machine.txt"
