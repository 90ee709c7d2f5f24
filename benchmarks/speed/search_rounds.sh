# Sourced by the sittings (amx_sitting.sh, noamx_sitting.sh): `search_rounds ROUNDS RUN...`
# runs `nmt bench` of the shipped models/deen-additive (saved once as a .pt checkpoint, which
# an older tree reads too), 1,000 test_2016_flickr sentences, greedy and beam 5, 2 threads,
# once per RUN per round, the order reversed every other round. A RUN is TREE:PRECISION, TREE
# `new` (this checkout) or `old` ($OLD_TREE), PRECISION a --decode-precision (auto: what a
# user gets; on a CPU this tree measures it, nmt/inference/search_choice.py); a PRECISION
# ending in `+processes` searches with `--processes` (search processes), named
# search_PRECISION_processes; `+onednn` (before `+processes` where both) takes the int8
# products through oneDNN (NMT_INT8_ENGINE=onednn, nmt/ops/int8.py: AMX-INT8 on the Xeons
# that have it), named search_PRECISION_onednn. Needs HERE (the checkout), OUT and DATA; writes
# OUT/search_{new,old,PRECISION}_roundN.{json,log} and OUT/search_roundN.uptime.
search_rounds() {
  local rounds=$1 r run tree prec dir name i extra engine
  shift
  local runs=("$@") order
  local ckpt=$OUT/deen-additive.pt
  "$HERE/.venv/bin/python" - "$ckpt" <<'PY'
import sys

import torch

from nmt.model.checkpoint import read_payload

torch.save(read_payload("models/deen-additive"), sys.argv[1])
PY
  for r in $(seq 1 "$rounds"); do
    order=("${runs[@]}")
    if (( r % 2 == 0 )); then
      order=(); for ((i = ${#runs[@]} - 1; i >= 0; i--)); do order+=("${runs[i]}"); done
    fi
    echo "search round $r: ${order[*]}"
    uptime > "$OUT/search_round$r.uptime"
    for run in "${order[@]}"; do
      tree=${run%%:*} prec=${run#*:} extra=() engine=fbgemm
      dir=$HERE; [ "$tree" = old ] && dir=$OLD_TREE
      name=search_$tree; [ "$prec" != auto ] && name=search_$prec
      if [[ $prec == *+processes ]]; then
        prec=${prec%+processes} extra=(--processes) name=search_${prec}_processes
        [ "$tree" = new ] || name=search_${tree}_${prec}_processes
      fi
      if [[ $prec == *+onednn ]]; then
        prec=${prec%+onednn} engine=onednn name=${name/+onednn/_onednn}
      fi
      (cd "$dir" && NMT_INT8_ENGINE=$engine PYTHONPATH=$dir "$HERE/.venv/bin/python" -m nmt bench "$ckpt" --skip-train \
         --threads 2 --sentences 1000 --beam 5 --decode-precision "$prec" --data-path "$DATA" \
         "${extra[@]}" --json "$OUT/${name}_round$r.json") > "$OUT/${name}_round$r.log" 2>&1
    done
  done
  rm -f "$ckpt"
}
