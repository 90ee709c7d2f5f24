#!/bin/bash
echo 5 > /proc/self/autogroup
cd "$(dirname "$0")/../../.." && source .venv/bin/activate
OUT=${OUT:-results/speed/int8_search_2026-12-06/ab}
for rep in 3 4; do
  for v in fp32 int8; do
    model=deen-additive; th=2
    j=$OUT/${model}_t${th}_${v}_r${rep}.json
    nmt bench models/$model --skip-train --threads $th --decode-precision $v --data-path "${DATA:-../shared/data/multi30k}" --json $j > $j.log 2>&1
    echo "$(date +%T) $model t$th $v r$rep: $(grep -E 'greedy search|beam search' $j.log | sed 's/.*| \([0-9.]* sentences.s, BLEU [0-9.]*\).*/\1/' | tr '\n' ' ')"
  done
done
for v in fp32 int8; do
  nmt evaluate models/deen-additive --split test_2016_flickr --beam 5 --alpha 0.6 --precision $v --data-path "${DATA:-../shared/data/multi30k}" > "$OUT/../eval_$v.log" 2>&1
  echo "$(date +%T) evaluate $v: $(grep -i bleu "$OUT/../eval_$v.log" | head -3 | tr '\n' ' ')"
done
