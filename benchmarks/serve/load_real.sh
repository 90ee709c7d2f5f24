#!/usr/bin/env bash
# Issue 50's load test with the shipped pair, old server against new, in one command:
#
#   bash benchmarks/serve/load_real.sh [OUTDIR]     (default results/serve/load_real_<UTC time>)
#
# old = git $OLD_COMMIT (e6d2505: nmt serve before cross-request batching), a `git archive`
# in /tmp run under this checkout's .venv with its own source first on PYTHONPATH; it reads
# checkpoint files only, so models/deen-{additive,none} are converted to .pt first
# (benchmarks/serve/folder_to_checkpoint.py: the same fp32 weights). new = this checkout,
# serving the model folders. Runs alternate old, new, old, new ... ($ROUNDS rounds); a run is
# skipped when the previous run of the same server, added to the time so far, would pass
# $BUDGET_S. Each run: benchmarks/serve/load_test.py, concurrency 1 (solo answers) then
# $LEVELS, $REQUESTS single-sentence requests per level (both models, beam 5), each level
# cut after $MAX_SECONDS. Then benchmarks/serve/load_summary.py writes OUTDIR/summary.md.
# OUTDIR also gets machine.txt (CPU, cores, load, the busiest processes at start and end).
#
# Meant for an otherwise idle machine: every other process's CPU shows in the numbers
# (machine.txt lists what ran). Environment (defaults): REQUESTS=240 MAX_SECONDS=60
# LEVELS=1,4,8,16 ROUNDS=3 BUDGET_S=720 THREADS=1 (each server's --threads; at 2 the new
# server searches its two models at once, one thread each, the old one gives a search both)
# OLD_COMMIT=e6d2505 NEW_ARGS="" (more `nmt serve`
# options for the new server only) NEW2_ARGS="" (when set, e.g. "--workers 2", each round
# also runs the new server with these options, labelled new2) DATA=<corpus folder, default
# ../shared/data/multi30k>.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
PY="$REPO/.venv/bin/python"
REQUESTS=${REQUESTS:-240}
MAX_SECONDS=${MAX_SECONDS:-60}
LEVELS=${LEVELS:-1,4,8,16}
ROUNDS=${ROUNDS:-3}
BUDGET_S=${BUDGET_S:-720}
THREADS=${THREADS:-1}
OLD_COMMIT=${OLD_COMMIT:-e6d2505}
NEW_ARGS=${NEW_ARGS:-}
NEW2_ARGS=${NEW2_ARGS:-}
DATA=${DATA:-$(cd .. && pwd)/shared/data/multi30k}
OUT=${1:-results/serve/load_real_$(date -u +%Y-%m-%dT%H%M)}

[[ -x $PY ]] || { echo "load_real.sh: no $PY; run bash scripts/setup.sh first" >&2; exit 1; }
[[ -f $DATA/test_2016_flickr.de.gz ]] || {
    echo "load_real.sh: DATA=$DATA has no test_2016_flickr.de.gz; set DATA to the corpus folder" >&2
    exit 1
}
mkdir -p "$OUT"
OLD_TREE=/tmp/nmt_load_old_$OLD_COMMIT
CKPT=/tmp/nmt_load_ckpt_$OLD_COMMIT
if [[ ! -f $OLD_TREE/nmt/__init__.py ]]; then
    mkdir -p "$OLD_TREE"
    git archive "$OLD_COMMIT" | tar -x -C "$OLD_TREE"
fi
mkdir -p "$CKPT"
for m in additive none; do
    # the same weights as the folder, each time: a stale .pt would compare other models
    "$PY" benchmarks/serve/folder_to_checkpoint.py "models/deen-$m" "$CKPT/$m.pt" \
        --check-old "$OLD_TREE"
done

machine() {
    echo "== $1 $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    grep -m1 'model name' /proc/cpuinfo
    echo "cores: $(nproc)"
    uptime
    ps -eo pid,ni,pcpu,etime,args --sort=-pcpu | head -8 | cut -c1-150
}
{
    machine start
    echo "new: $REPO $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- || echo +dirty)"
    echo "old: $OLD_TREE (git archive $OLD_COMMIT)"
    echo "REQUESTS=$REQUESTS MAX_SECONDS=$MAX_SECONDS LEVELS=$LEVELS ROUNDS=$ROUNDS BUDGET_S=$BUDGET_S THREADS=$THREADS NEW_ARGS=$NEW_ARGS NEW2_ARGS=$NEW2_ARGS"
} > "$OUT/machine.txt"

start=$SECONDS
declare -A took=([old]=0 [new]=0 [new2]=0)
run() {  # run LABEL ROUND
    local label=$1 round=$2 t0=$SECONDS
    if (( SECONDS - start + took[$label] > BUDGET_S )); then
        echo "load_real.sh: $label round $round skipped: the budget of $BUDGET_S s would pass" \
            | tee -a "$OUT/machine.txt"
        return
    fi
    local common=(--requests "$REQUESTS" --levels "$LEVELS" --max-seconds "$MAX_SECONDS"
        --beam 5 --threads "$THREADS" --data "$DATA/test_2016_flickr.de.gz" --label "$label"
        --out "$OUT/${label}_r$round.json")
    if [[ $label == old ]]; then
        "$PY" benchmarks/serve/load_test.py --model "additive=$CKPT/additive.pt" \
            --model "none=$CKPT/none.pt" --checkout "$OLD_TREE" --commit "$OLD_COMMIT" \
            "${common[@]}" -- --data-path "$DATA"
    else
        local extra=$NEW_ARGS
        [[ $label == new2 ]] && extra=$NEW2_ARGS
        # shellcheck disable=SC2086  # several options, split on purpose
        "$PY" benchmarks/serve/load_test.py --model additive=models/deen-additive \
            --model none=models/deen-none "${common[@]}" -- --data-path "$DATA" $extra
    fi
    took[$label]=$((SECONDS - t0))
    echo "load_real.sh: $label round $round took ${took[$label]} s" | tee -a "$OUT/machine.txt"
}
for ((r = 1; r <= ROUNDS; r++)); do
    run old "$r"
    run new "$r"
    [[ -z $NEW2_ARGS ]] || run new2 "$r"
done
machine end >> "$OUT/machine.txt"
"$PY" benchmarks/serve/load_summary.py "$OUT" | tee "$OUT/summary.md"
echo "load_real.sh: $((SECONDS - start)) s; results in $OUT"
