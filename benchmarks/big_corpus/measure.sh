#!/usr/bin/env bash
# Peak memory (RSS) and wall time of preparing and training the reference model on a
# 5M-pair synthetic corpus with data.store=arrow, against plain Multi30k with the default
# memory store. Run from the repository root:
#   bash benchmarks/big_corpus/measure.sh /tmp/nmt_big/corpus5m /tmp/nmt_big/runs
# (make the corpus first with benchmarks/big_corpus/make_corpus.py). Each step runs under
# /usr/bin/time -v; its log goes to $OUT/logs/, a summary to $OUT/numbers.txt
# (OUT default results/big_corpus, where the recorded run is).
set -euo pipefail
CORPUS=${1:?corpus directory}
RUNS=${2:?directory for the runs and the cache}
PY=${PY:-python}
BENCH=$(dirname "$0")
HERE=${OUT:-results/big_corpus}
mkdir -p "$HERE/logs" "$RUNS"
COMMON=(configs/bench_reference.yaml train.max_steps=30 train.valid_max_sentences=100
        train.progress=false train.threads=1 "train.out_dir=$RUNS/{name}")

step() {  # step NAME COMMAND...: run under /usr/bin/time -v, log to logs/NAME.txt
  local name=$1; shift
  echo "== $name: $*" >&2
  /usr/bin/time -v "$@" > "$HERE/logs/$name.txt" 2>&1 || { tail -20 "$HERE/logs/$name.txt"; exit 1; }
  local rss wall
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$HERE/logs/$name.txt")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$HERE/logs/$name.txt")
  printf '%-18s peak RSS %6s MiB  wall %9s  %s\n' "$name" "$rss" "$wall" "$*" >> "$HERE/numbers.txt"
}

{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores,"
  echo "# $(free -g | awk '/Mem:/ {print $2}') GiB RAM, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# corpus: $CORPUS ($(du -sh "$CORPUS" | cut -f1)); train.threads=1"
} > "$HERE/numbers.txt"
rm -rf "$RUNS"/m30k_memory "$RUNS"/m30k_arrow "$RUNS"/big_arrow "$RUNS"/big_fresh

# the baseline: Multi30k, every pair a Python object (data.store memory, the default)
step m30k_memory $PY -m nmt train "${COMMON[@]}" name=m30k_memory
# the same corpus from the arrow store (prepared in the same process)
step m30k_arrow $PY -m nmt train "${COMMON[@]}" name=m30k_arrow data.store=arrow
# 5M pairs: (a) preparing alone (vocabulary sample + SentencePiece + encoding pass)
step big_prepare $PY "$BENCH/prepare_only.py" "${COMMON[@]}" name=big_arrow data.store=arrow \
  "data.path=$CORPUS"
# (b) training: a new run of the same config finds the prepared store and reuses it
step big_train $PY -m nmt train "${COMMON[@]}" name=big_arrow data.store=arrow "data.path=$CORPUS"
# (c) --resume with a larger step budget: reuses the store, prepares nothing
step big_resume $PY -m nmt train "${COMMON[@]}" name=big_arrow data.store=arrow \
  "data.path=$CORPUS" train.max_steps=60 --resume
# (d) the one-command path: prepare and train in one process
step big_fresh $PY -m nmt train "${COMMON[@]}" name=big_fresh data.store=arrow "data.path=$CORPUS"
for name in m30k_memory m30k_arrow big_prepare big_train big_resume big_fresh; do
  grep -H "training store\|vocabulary sample: [0-9,]* of\|best val" "$HERE/logs/$name.txt" \
    | sed "s|^$HERE/logs/||; s/^/# /" >> "$HERE/numbers.txt"
done
cat "$HERE/numbers.txt"
