#!/usr/bin/env bash
# The project's first GPU figures, in one short call of the device tool (a lent GPU machine
# has 15 minutes of device time per session, its start included, and nothing can be fetched
# there): the reference model's training speed in fp32 and bf16, and a converged-study model
# (configs/study_deen_converged.yaml's additive recipe) trained there.
#
# Prepare here, once (the folder .gpu/ is git-ignored through .git/info/exclude and travels by
# the device tool's `carry`):
#
#   bash benchmarks/speed/gpu_sitting.sh --prepare      # .gpu/multi30k (de, en) + sacremoses wheel
#
# Then one device call, `carry: [".gpu"]`, `timeout_s: 600`:
#
#   bash benchmarks/speed/gpu_sitting.sh
#
# It writes into $OUT (the device tool brings it back; default /tmp/gpu_sitting elsewhere):
# machine.txt (nvidia-smi, torch, CUDA), bench_fp32.json and bench_bf16.json (`nmt bench
# configs/bench_reference.yaml`: target tokens/s over fixed steps and over a window, peak
# memory), train.log and valid_log.jsonl of the converged-study additive model (the study's
# overrides read from its config; stopped by the study's rule, or by TRAIN_MINUTES, whichever
# comes first: the log says which), its BLEU by source length on joined test_2016
# (eval_joined.json, beam 5, alpha 1.0) and its search speed (bench_search.json). Copy the
# files into results/speed/DATE-gpu/ with a README naming the GPU.
#
# Settings: TRAIN_SECONDS (bench window, default 45), TRAIN_STEPS (bench fixed steps, default
# 60), WARMUP (bench warm-up steps, default 10), TRAIN_MINUTES (cap on the study model's
# training, default 4.5), DEVICE (default cuda; `DEVICE=cpu WARMUP=1 TRAIN_STEPS=2
# TRAIN_SECONDS=5 TRAIN_MINUTES=0.3`
# rehearses the script on a CPU), PY (default python3: the device image's Python with torch).
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--prepare" ]; then
  src=${DATA:-../shared/data/multi30k}
  mkdir -p .gpu/multi30k .gpu/wheels
  for f in train val test_2016_flickr; do cp "$src/$f.de.gz" "$src/$f.en.gz" .gpu/multi30k/; done
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d .gpu/wheels sacremoses
  grep -qsx '/.gpu/' "$(git rev-parse --git-path info/exclude)" \
    || echo '/.gpu/' >> "$(git rev-parse --git-path info/exclude)"
  du -sh .gpu
  exit 0
fi
OUT=${OUT:-/tmp/gpu_sitting}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
TRAIN_SECONDS=${TRAIN_SECONDS:-45}
TRAIN_STEPS=${TRAIN_STEPS:-60}
WARMUP=${WARMUP:-10}
TRAIN_MINUTES=${TRAIN_MINUTES:-4.5}
DATA=.gpu/multi30k
mkdir -p "$OUT"
[ -d "$DATA" ] || { echo "error: $DATA not found: run --prepare here and carry .gpu" >&2; exit 2; }
# the image has torch and most of nmt's needs; sacremoses (papers' BLEU) comes as a wheel
if compgen -G ".gpu/wheels/*.whl" > /dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/wheels/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nmt() { "$PY" -m nmt "$@"; }
{ date -u; nvidia-smi 2>&1 | head -15; "$PY" -c "import torch, sys; print('python', sys.version.split()[0]);
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available());
print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
for p in fp32 bf16; do
  echo "== bench $p $(date -u +%T)"
  nmt bench configs/bench_reference.yaml --device "$DEVICE" --precision "$p" --warmup "$WARMUP" \
    --train-steps "$TRAIN_STEPS" --train-seconds "$TRAIN_SECONDS" --skip-decode --data-path "$DATA" \
    --json "$OUT/bench_$p.json" 2>&1 | tail -n 25
done
echo "== train $(date -u +%T)"
mapfile -t study < <("$PY" -c "import yaml
for o in yaml.safe_load(open('configs/study_deen_converged.yaml'))['overrides']: print(o)")
run=/tmp/gpu_runs/gpu_conv_additive
rm -rf "$run"
nmt train configs/multi30k_deen_additive.yaml "${study[@]}" model.attention=additive \
  "data.path=$DATA" "train.device=$DEVICE" "train.max_minutes=$TRAIN_MINUTES" \
  "train.out_dir=/tmp/gpu_runs/{name}" name=gpu_conv_additive > "$OUT/train.log" 2>&1
echo "train exit $?"; tail -n 8 "$OUT/train.log"
cp "$run/valid_log.jsonl" "$OUT/" 2>/dev/null
if [ -f "$run/best.pt" ]; then
  echo "== evaluate joined $(date -u +%T)"
  nmt evaluate "$run/best.pt" --split test_2016_flickr_joined --beam 5 --alpha 1.0 \
    --buckets 1-10,11-20,21-30,31-40,41-50,51-60,61- --device "$DEVICE" --data-path "$DATA" \
    --json "$OUT/eval_joined.json" 2>&1 | tail -n 14
  echo "== bench search $(date -u +%T)"
  nmt bench "$run/best.pt" --skip-train --device "$DEVICE" --sentences 1000 --beam 5 \
    --data-path "$DATA" --json "$OUT/bench_search.json" 2>&1 | tail -n 12
fi
echo "== done $(date -u +%T)"
