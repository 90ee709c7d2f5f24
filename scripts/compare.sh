#!/usr/bin/env bash
# Evaluate finished runs side by side on both Multi30k test sets, greedy and beam 5,
# and keep the numbers (JSON and the printed tables) under results/.
# Usage: scripts/compare.sh NAME RUN_DIR [RUN_DIR ...]   e.g. scripts/compare.sh deen runs/deen_additive runs/deen_none
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1; shift
ckpts=()
for run in "$@"; do ckpts+=("$run/best.pt"); done
mkdir -p results
for split in test_2016_flickr test_2017_flickr; do
    for beam in 1 5; do
        out="results/${name}_${split}_beam${beam}"
        .venv/bin/nmt evaluate "${ckpts[@]}" --split "$split" --beam "$beam" --json "$out.json" \
            | tee "$out.txt"
    done
done
