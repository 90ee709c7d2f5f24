#!/usr/bin/env bash
# Issue 48's check on a CPU without AMX (AVX2, or AVX-512 with or without avx512_bf16): is
# anything slower than before the issue's changes? One sitting, the two trees alternating:
#
#   OLD_TREE=DIR [PAUSE_PIDS="PID..."] [ROUNDS=2] [BM=8] [VARIANTS="fp32 bf16 ..."] [DATA=DIR] \
#     [JOEY=1] bash benchmarks/speed/noamx_sitting.sh
#
# ROUNDS sets both parts' rounds; TRAIN_ROUNDS or SEARCH_ROUNDS one part's (0 leaves it out).
#
# OLD_TREE: a worktree of the commit before the issue's changes (`git worktree add /tmp/nmt_old
# e6d2505`), run with this tree's .venv. Refuses (exit 2) a CPU with amx_bf16 (that CPU's
# sitting is amx_sitting.sh) and a missing OLD_TREE. PAUSE_PIDS: the other work on the
# machine, stopped (kill -STOP) for the sitting and resumed (kill -CONT) at its end.
# Training (benchmarks/speed/ab/bench_ab.sh, 2 threads, 10 warm-up + 60 timed steps, a 60 s
# window, about 2.5 min a run): fp32 and fp32_old, and where the CPU has avx512_bf16 also bf16,
# bf16_old and bf16_bmBM (VARIANTS: another list of bench_ab.sh variants), in reverse order
# every other round; JOEY=1 adds Joey NMT 2.3.0 (bench_ab.sh's `joey`: the same architecture
# and data from scratch, 2 threads, 30 s warm-up, then the same 60 s window; about 2 min a
# run; benchmarks/speed/joey/setup.sh installs it first, once) to every round. Search: `nmt
# bench` of the shipped models/deen-additive (saved as a .pt checkpoint that both trees read), 1,000 test_2016 sentences, greedy and beam 5,
# --decode-precision auto on both trees (what a user gets), and bf16 on this tree where the
# CPU has it (SEARCH_PRECISIONS="int8 ...": more precisions on this tree), every other round
# in reverse order. Writes results/speed/DATE-noamx/ (OUT=DIR
# to change): machine.txt, VARIANT_roundN.{json,log,uptime} (joey_roundN too with JOEY=1),
# search_*.json and table.md (benchmarks/speed/ab/variants_table.py: with Joey, each variant's
# window tokens/s over Joey's).
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=$PWD
if grep -qw amx_bf16 /proc/cpuinfo; then
  echo "noamx_sitting.sh: this CPU has amx_bf16; its sitting is benchmarks/speed/amx_sitting.sh" >&2
  exit 2
fi
OLD_TREE=${OLD_TREE:?OLD_TREE: a worktree of the commit before issue 48 (git worktree add /tmp/nmt_old e6d2505)}
[ -d "$OLD_TREE/nmt" ] || { echo "noamx_sitting.sh: OLD_TREE=$OLD_TREE has no nmt/ package" >&2; exit 2; }
. benchmarks/speed/pause_pids.sh
. benchmarks/speed/cpu_id.sh
pause_pids noamx_sitting.sh
OUT=${OUT:-results/speed/$(date +%F)-noamx}
BM=${BM:-8}
DATA=$(realpath "${DATA:-../shared/data/multi30k}")
OLD_TREE=$(realpath "$OLD_TREE")
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
{ echo "new $(git rev-parse HEAD)"; echo "old $(git -C "$OLD_TREE" rev-parse HEAD)"
  cpu_id
  .venv/bin/python -c 'import torch; print("torch", torch.__version__)'; } > "$OUT/machine.txt"
variants=(fp32 fp32_old)
if grep -qw avx512_bf16 /proc/cpuinfo; then variants+=(bf16 bf16_old "bf16_bm$BM"); fi
if [ -n "${VARIANTS:-}" ]; then read -r -a variants <<< "$VARIANTS"; fi
if [ "${JOEY:-0}" = 1 ]; then  # Joey NMT 2.3.0 in every training round; installed before them
  bash benchmarks/speed/joey/setup.sh
  [[ " ${variants[*]} " == *" joey "* ]] || variants+=(joey)
fi
for r in $(seq 1 "${TRAIN_ROUNDS:-${ROUNDS:-2}}"); do
  order=("${variants[@]}")
  if (( r % 2 == 0 )); then
    order=(); for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[i]}"); done
  fi
  echo "round $r: ${order[*]}"
  OUT=$OUT DATA=$DATA OLD_TREE=$OLD_TREE bash benchmarks/speed/ab/bench_ab.sh "$r" "${order[@]}"
done
# search: the two trees' `auto`, and this tree's bf16 where the CPU has it, and SEARCH_PRECISIONS
. benchmarks/speed/search_rounds.sh
runs=("new:auto" "old:auto")
if grep -qw avx512_bf16 /proc/cpuinfo; then runs+=("new:bf16"); fi
for p in ${SEARCH_PRECISIONS:-}; do runs+=("new:$p"); done
OUT=$OUT DATA=$DATA HERE=$HERE OLD_TREE=$OLD_TREE search_rounds "${SEARCH_ROUNDS:-${ROUNDS:-2}}" "${runs[@]}"
.venv/bin/python benchmarks/speed/ab/variants_table.py "$OUT" | tee "$OUT/table.md"
