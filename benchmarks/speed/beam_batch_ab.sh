#!/usr/bin/env bash
# A/B of beam search CPU time per sentence: OLD (a `git archive` of main's nmt/, given as
# $1) against this checkout, alternating, 3 rounds, batch 8 and batch 1, both shipped
# models, 64 test_2016_flickr lines, beam 5, one torch thread
# (results/speed/beam_batch_2026-12-06/README.md).
set -euo pipefail
old=$1
cd "$(dirname "$0")/../.."
for round in 1 2 3; do
  for batch in 8 1; do
    for code in "$old" .; do
      echo "round $round batch $batch code $code"
      .venv/bin/python benchmarks/speed/beam_batch_profile.py --code "$code" --batch "$batch" \
        --rounds 2 2>&1 | grep -v USDT
    done
  done
done
