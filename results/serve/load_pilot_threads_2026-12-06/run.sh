#!/bin/bash
cd /work/main
D=../shared/data/multi30k
for t in 1 2 1 2; do
  .venv/bin/python benchmarks/serve/load_test.py --model additive=models/deen-additive --model none=models/deen-none \
    --requests 160 --levels 1,8 --max-seconds 60 --threads $t --label new_t$t --out results/serve/load_pilot_threads_2026-12-06/t${t}_rN.json -- --data-path $D > /tmp/pilot/log_$t.txt 2>&1
  tail -n 4 /tmp/pilot/log_$t.txt
done
