#!/bin/bash
# ABAB: fp32 and int8 (fixed input grid, no rescoring) alternating, per model and thread count
echo 5 > /proc/self/autogroup
cd "$(dirname "$0")/../../.." && source .venv/bin/activate
OUT=${OUT:-results/speed/int8_search_2026-12-06/ab}; mkdir -p "$OUT"
for cfg in "deen-additive 1" "deen-additive 2" "deen-none 1"; do
  set -- $cfg; model=$1; th=$2
  for rep in 1 2; do
    for v in fp32 int8; do
      j=$OUT/${model}_t${th}_${v}_r${rep}.json
      nmt bench models/$model --skip-train --threads $th --decode-precision $v --data-path "${DATA:-../shared/data/multi30k}" --json $j > $j.log 2>&1
      echo "$(date +%T) $model t$th $v r$rep: $(grep -E 'greedy search|beam search' $j.log | sed 's/.*| \([0-9.]* sentences.s, BLEU [0-9.]*\).*/\1/' | tr '\n' ' ')"
    done
  done
done
