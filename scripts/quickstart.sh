#!/usr/bin/env bash
# The main job in one command: install, train a small additive-attention model on
# Multi30k de->en for about 10 minutes, then print BLEU by sentence length on
# test_2016_flickr and a few example translations.
# Data: ../shared/data/multi30k when it exists, else Multi30k from the Hugging Face hub.
# Arguments are key=value overrides for `nmt train`, e.g. data.path=DIR for a corpus elsewhere
# (give the same ones again to continue an interrupted run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
RUN=runs/quickstart_deen
if [ -f "$RUN/last.pt" ]; then
    echo "continuing the earlier quick-start run in $RUN" >&2
    .venv/bin/nmt train configs/quickstart_deen.yaml --resume "$@"
else
    .venv/bin/nmt train configs/quickstart_deen.yaml "$@"
fi
.venv/bin/nmt evaluate "$RUN/best.pt" --split test_2016_flickr --examples 3 \
    --json "$RUN/test_2016_flickr.json"
cat <<'MSG'

Next steps
  Attention, 60 min on a 2-core CPU:      .venv/bin/nmt train configs/multi30k_deen_additive.yaml
  Same budget without attention:          .venv/bin/nmt train configs/multi30k_deen_none.yaml
  Compare them by sentence length:        .venv/bin/nmt evaluate runs/deen_additive/best.pt runs/deen_none/best.pt
  Translate your own sentences:           .venv/bin/nmt translate runs/quickstart_deen/best.pt --attention
  Best-quality recipe (85 min, see docs/results.md, "Recipes and the literature"):
                                          .venv/bin/nmt train configs/recipe_deen.yaml train.threads=2
MSG
