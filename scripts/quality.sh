#!/usr/bin/env bash
# Issue 28's quality runs: an ensemble of N models of one direction's recipe, trained side by
# side on the 2 cores, each chosen on val, then the ensemble's length penalty chosen on val,
# then test scored (cased sacreBLEU and the papers' lowercased, Moses-tokenized BLEU).
#
#   bash scripts/quality.sh DIRECTION [N]     DIRECTION: deen | ende | enfr; N models (default 3)
#
# Model i is configs/recipe_DIRECTION.yaml, seed i, with the additions the de->en ablation
# measured to help (QUALITY_OVERRIDES; results/ablation_deen/README.md), for exactly EPOCHS
# epochs (default 20: the ablation's budget), one thread, train.precision=PRECISION (default
# auto: bf16 where the CPU multiplies it natively and measures it faster, else fp32).
# An interrupted model resumes from its last.pt when the script is run again, and a finished
# one is kept, so the ensemble can be trained over more than one sitting; the wall clock of
# every sitting is appended to results/quality/DIRECTION_timing.txt (issue 28's budget is
# 3 hours per direction, every ensemble model counted). Files: runs/quality_DIRECTION_sI/,
# results/quality/DIRECTION.json (`nmt select` of all N runs), DIRECTION_sI_valid_log.jsonl.
# DATA_PATH=DIR reads the corpus from DIR (relative: to where you run the script) instead of
# the recipe's data.path; test_2017_mscoco is scored too when DIR holds it in both languages of
# the direction, e.g. test_2017_mscoco.en.gz and .de.gz for ende (data/README.md: where to get it).
# ALPHAS: the GNMT length penalties `nmt select` tries on val (default 0.6,1.0,1.4,1.8,2.2:
# the protocol of docs/results.md, the wide grid in the one select before test).
set -euo pipefail
DATA_PATH=${DATA_PATH:-}
case "$DATA_PATH" in /*|'') ;; *) DATA_PATH=$PWD/$DATA_PATH ;; esac  # before the cd below
cd "$(dirname "$0")/.."
NMT=${NMT:-.venv/bin/nmt}
EPOCHS=${EPOCHS:-20}
PRECISION=${PRECISION:-auto}  # bf16 is emulated, ~20x slower, on an AVX2-only CPU
QUALITY_OVERRIDES=${QUALITY_OVERRIDES:-model.tie_embeddings=true model.step_order=cgru}
ALPHAS=${ALPHAS:-0.6,1.0,1.4,1.8,2.2}

case "${1:-}" in
  deen|ende|enfr) dir=$1 ;;
  *) sed -n 2,21p "$0"
     echo "scripts/quality.sh: DIRECTION must be deen, ende or enfr, got '${1:-}'" >&2
     exit 2 ;;
esac
n=${2:-3}
if [ $# -gt 2 ]; then
  echo "scripts/quality.sh: too many arguments: '${*:3}' (settings go before the command," \
       "e.g. DATA_PATH=DIR bash scripts/quality.sh $dir $n)" >&2
  exit 2
fi
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/quality.sh: N must be a positive integer, got '$n'" >&2; exit 2; }
config=configs/recipe_$dir.yaml
[ -f "$config" ] || { echo "scripts/quality.sh: $config not found" >&2; exit 2; }
mkdir -p runs results/quality
timing=results/quality/${dir}_timing.txt
common=(train.max_minutes=null "train.max_epochs=$EPOCHS" "train.patience=$EPOCHS"
        "train.precision=$PRECISION" train.threads=1 train.progress=false)
data=()  # select's --data-path
if [ -n "$DATA_PATH" ]; then
  [ -d "$DATA_PATH" ] || { echo "scripts/quality.sh: DATA_PATH $DATA_PATH is not a directory" >&2; exit 2; }
  common+=("data.path=$DATA_PATH")
  data=(--data-path "$DATA_PATH")
fi
# shellcheck source=scripts/run_state.sh
. scripts/run_state.sh
require_tools

start=$(date -u +%FT%TZ)
runs=()
failed=$(mktemp -d)  # one file per model whose training failed in this sitting
trap 'rm -rf "$failed"' EXIT
started=0 before=0
for i in $(seq 1 "$n"); do
  name=quality_${dir}_s$i
  out=runs/$name
  runs+=("$out")
  done_epochs=$(epochs_done "$out")
  before=$((before + done_epochs))
  if [ "$done_epochs" -ge "$EPOCHS" ]; then
    echo "$name: finished ($done_epochs epochs), kept"
    continue
  fi
  resume=$(resume_flag "$out")
  [ -z "$resume" ] || echo "$name: resuming after epoch $done_epochs"
  started=$((started + 1))
  # shellcheck disable=SC2086  # the overrides are meant to split into words
  ( if "$NMT" train "$config" "${common[@]}" $QUALITY_OVERRIDES "train.seed=$i" "name=$name" \
          $resume >> "runs/$name.log" 2>&1 \
       && cp "$out/valid_log.jsonl" "results/quality/${dir}_s${i}_valid_log.jsonl"; then
      echo "$name: trained"
    else
      touch "$failed/$i"; show_failure "$name" "runs/$name.log"
    fi ) &
done
wait
end=$(date -u +%FT%TZ)
after=0
for out in "${runs[@]}"; do after=$((after + $(epochs_done "$out"))); done
nfailed=$(find "$failed" -type f | wc -l)
# a sitting in which every model failed before an epoch (no corpus, a bad override) trained
# nothing: its time is not the budget's, and results/ holds measured data only
if [ "$started" -gt 0 ] && [ "$nfailed" -eq "$started" ] && [ "$after" -le "$before" ]; then
  echo "scripts/quality.sh: every model failed before training an epoch (errors above);" \
       "fix the cause and run the script again; no timing recorded" >&2
  exit 1
fi
chosen=$({ grep -o 'training precision: [a-z0-9]*' "runs/quality_${dir}_s1.log" || true; } | tail -n 1 | cut -d' ' -f3)
echo "training $start → $end, $n models of $config, $QUALITY_OVERRIDES, $EPOCHS epochs, $PRECISION ($chosen), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >> "$timing"
unfinished=0
for i in $(seq 1 "$n"); do
  out=${runs[$((i - 1))]}
  [ "$(epochs_done "$out")" -lt "$EPOCHS" ] || continue
  unfinished=1
  if [ -f "$failed/$i" ]; then
    echo "scripts/quality.sh: $out failed (its error is above; the whole log: $out.log); fix" \
         "the cause and run the script again, which resumes it" >&2
  else
    echo "scripts/quality.sh: $out did not finish $EPOCHS epochs; run the script again to resume" >&2
  fi
done
[ "$unfinished" -eq 0 ] || exit 1
# test_2017_mscoco is scored too when its two files are in the corpus directory: it is not in
# ../shared/data/multi30k nor on the hub dataset (data/README.md says where to get it)
data_path=${DATA_PATH:-$(sed -n 's/^  path: *\([^ #]*\).*/\1/p' "$config" | head -n 1)}
splits=test_2016_flickr,test_2017_flickr
if compgen -G "$data_path/test_2017_mscoco.${dir:0:2}*" > /dev/null \
   && compgen -G "$data_path/test_2017_mscoco.${dir:2:2}*" > /dev/null; then
  splits+=,test_2017_mscoco
fi
"$NMT" select "${runs[@]}" --device cpu --alphas "$ALPHAS" --test-splits "$splits" "${data[@]}" \
  --json "results/quality/$dir.json"  # N >= 2: and their ensemble
echo "select $end → $(date -u +%FT%TZ)" >> "$timing"
