#!/usr/bin/env bash
# Issue 28's ablation on Multi30k de->en: the recipe and each addition alone, at one budget.
#
#   bash scripts/ablation_deen.sh NAME [NAME ...]     e.g. baseline-s1 baseline-s2
#
# Every run is configs/recipe_deen.yaml for exactly 20 epochs (no time budget, no early
# stop): the recipe's 85-minute runs reached 19.6 epochs. An epoch budget, unlike a
# minute budget, gives the same training on any CPU and beside any other work, so runs of
# different sessions compare; what an addition costs per epoch is measured apart (docs).
# Run again after an interruption: a run with results/ablation_deen/NAME.json is kept, one
# with its epochs done is only chosen and scored, and one with a last.pt resumes.
# Each run is then chosen on val by `nmt select` (average of the last 5 or best.pt, alpha),
# and its summary is written to results/ablation_deen/NAME.json. Runs go side by side, one
# thread each. Names:
#   baseline-s1, baseline-s2   the recipe, seeds 1 and 2 (the seed-to-seed spread)
#   subword-reg                 SentencePiece sampling of the source (Kudo 2018), alpha 0.1
#   subword-reg-a05             the same with alpha 0.5 (closer to the best segmentation)
#   enc2-residual               2-layer bidirectional encoder with a residual connection
#   word-dropout                source word dropout 0.1
#   tied                        target embeddings tied to the output layer
#   cgru                        Nematus's conditional GRU decoder (Sennrich et al. 2017)
set -euo pipefail
cd "$(dirname "$0")/.."
NMT=${NMT:-.venv/bin/nmt}
EPOCHS=${EPOCHS:-20}
# one precision for every run of the ablation, whatever `auto` picks on a session's CPU
# (bf16 autocast was 1.7x faster than fp32 on the EPYC it started on; PRECISION=fp32 to change)
PRECISION=${PRECISION:-bf16}
common=(train.max_minutes=null "train.max_epochs=$EPOCHS" "train.patience=$EPOCHS"
        "train.precision=$PRECISION" train.threads=1 train.progress=false)

NAMES="baseline-s1 baseline-s2 subword-reg subword-reg-a05 enc2-residual word-dropout tied cgru"
overrides() {
  case "$1" in
    baseline-s1) echo "train.seed=1" ;;
    baseline-s2) echo "train.seed=2" ;;
    subword-reg) echo "train.seed=1 subwords.sampling_alpha=0.1 subwords.nbest_size=-1" ;;
    subword-reg-a05) echo "train.seed=1 subwords.sampling_alpha=0.5 subwords.nbest_size=-1" ;;
    enc2-residual) echo "train.seed=1 model.enc_layers=2 model.enc_residual=true" ;;
    word-dropout) echo "train.seed=1 model.word_dropout=0.1" ;;
    tied) echo "train.seed=1 model.tie_embeddings=true" ;;
    cgru) echo "train.seed=1 model.step_order=cgru" ;;
    *) echo "scripts/ablation_deen.sh: unknown run '$1'; runs: $NAMES" >&2
       return 2 ;;
  esac
}

[ $# -ge 1 ] || { sed -n 2,21p "$0"; exit 2; }
for name in "$@"; do overrides "$name" > /dev/null; done  # every name checked before any run
dups=$(printf '%s\n' "$@" | sort | uniq -d)
[ -z "$dups" ] || { echo "scripts/ablation_deen.sh: run given twice: $dups" >&2; exit 2; }
mkdir -p runs results/ablation_deen
# shellcheck source=scripts/run_state.sh
. scripts/run_state.sh
require_tools
train() {  # train run $1, or resume it, or keep it when its EPOCHS are done
  local out=runs/ablation_deen_$1 done
  done=$(epochs_done "$out") || return 1  # a damaged valid_log.jsonl: named, nothing trained
  if [ "$done" -ge "$EPOCHS" ]; then echo "$1: $done epochs trained, kept"; return; fi
  # shellcheck disable=SC2046  # the overrides are meant to split into words
  "$NMT" train configs/recipe_deen.yaml "${common[@]}" $(overrides "$1") \
      "name=ablation_deen_$1" $(resume_flag "$out") >> "runs/ablation_deen_$1.log" 2>&1
}
for name in "$@"; do
  if [ -f "results/ablation_deen/$name.json" ]; then
    echo "$name: results/ablation_deen/$name.json exists, kept"; continue
  fi
  ( train "$name" \
    && "$NMT" select "runs/ablation_deen_$name" --device cpu \
        --json "results/ablation_deen/$name.json" >> "runs/ablation_deen_$name.log" 2>&1 \
    && cp "runs/ablation_deen_$name/valid_log.jsonl" "results/ablation_deen/${name}_valid_log.jsonl" \
    && tail -n 4 "runs/ablation_deen_$name.log" > "results/ablation_deen/${name}_log_tail.txt" \
    && echo "$name: done, results/ablation_deen/$name.json" \
    || show_failure "$name" "runs/ablation_deen_$name.log" ) &
done
wait
