#!/usr/bin/env bash
# Transparent huge pages for torch's CPU allocations (THP_MEM_ALLOC_ENABLE=1: c10 asks
# madvise(MADV_HUGEPAGE) for allocations of 2 MiB and more) against without, in alternating
# processes (the allocator reads the variable once per process):
#   bash benchmarks/speed/ab/thp_ab.sh CHECKPOINT PRECISION ROUNDS [extra nmt bench options]
set -euo pipefail
cd "$(dirname "$0")/../../.."
CKPT=$1 PREC=$2 ROUNDS=$3; shift 3
for r in $(seq 1 "$ROUNDS"); do
  for thp in 0 1; do
    [ $((r % 2)) = 0 ] && thp=$((1 - thp))
    THP_MEM_ALLOC_ENABLE=$thp .venv/bin/nmt bench "$CKPT" --threads 2 --warmup 3 \
        --train-steps 20 --train-seconds 0 --precision "$PREC" "$@" --json /tmp/thp_$thp.json \
        > /dev/null 2>&1
    .venv/bin/python - "$thp" "$r" <<'PY'
import json, sys
thp, r = sys.argv[1], sys.argv[2]
j = json.load(open(f"/tmp/thp_{thp}.json"))
t = j["train"]["fixed_steps"]["target_tokens_per_s"] if j["train"] else None
d = j["decode"] or {}
dec = ", ".join(f"{k} {v['sentences_per_s']}" for k, v in d.items() if isinstance(v, dict))
print(f"round {r} THP_MEM_ALLOC_ENABLE={thp}: training {t} target tok/s; decoding {dec or '-'}; "
      f"peak train MiB {j['train']['peak_memory_mib'] if j['train'] else '-'}")
PY
  done
done
