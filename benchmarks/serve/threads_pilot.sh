#!/usr/bin/env bash
# The new server at --threads 1 against --threads 2, alternating (1, 2, 1, 2), the shipped
# pair, concurrency 1 and 8, 160 single-sentence requests per level (docs/serve.md, "Load
# test"; the 2026-12-06 run is results/serve/load_pilot_threads_2026-12-06/):
#
#   bash benchmarks/serve/threads_pilot.sh [OUTDIR] [DATA]
#
# then `python benchmarks/serve/load_summary.py OUTDIR > OUTDIR/summary.md`.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/serve/load_pilot_threads_$(date -u +%Y-%m-%dT%H%M)}
DATA=${2:-../shared/data/multi30k}
mkdir -p "$OUT"
r=0
for t in 1 2 1 2; do
    r=$((r + 1))
    .venv/bin/python benchmarks/serve/load_test.py --model additive=models/deen-additive \
        --model none=models/deen-none --requests 160 --levels 1,8 --max-seconds 60 \
        --threads "$t" --label "new_t$t" --out "$OUT/t${t}_r$(((r + 1) / 2)).json" \
        -- --data-path "$DATA"
done
