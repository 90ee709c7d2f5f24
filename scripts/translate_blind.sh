#!/usr/bin/env bash
# Translate the blind test sources (../shared/blind/*.de.gz, whose references the project never
# sees) with one model or ensemble, one line out per line in, into results/blind/LABEL/.
#
#   bash scripts/translate_blind.sh LABEL ALPHA MODEL [MODEL ...]
#
# LABEL names the output folder (e.g. deen-additive); ALPHA is the GNMT length penalty chosen
# on val for this model (never on a test set); MODEL is a model folder, shipped name,
# checkpoint or hf:// address; two or more are decoded as an ensemble. Beam 5, fp32 search.
# Writes results/blind/LABEL/{FILE_STEM}.en.gz and decoding.json (beam, alpha, precision and
# each model's SHA-256: its model.safetensors in a folder, else the checkpoint file).
# BLIND_DIR overrides ../shared/blind.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: bash scripts/translate_blind.sh LABEL ALPHA MODEL [MODEL ...]" >&2; exit 2; }
label=$1 alpha=$2
shift 2
NMT=${NMT:-.venv/bin/nmt}
BLIND_DIR=${BLIND_DIR:-../shared/blind}
BEAM=5
out=results/blind/$label
shopt -s nullglob
sources=("$BLIND_DIR"/*.de.gz)
[ ${#sources[@]} -gt 0 ] || { echo "error: no *.de.gz in $BLIND_DIR" >&2; exit 2; }
# every file is written into a hidden folder first and moved into $out only when all of them
# and decoding.json are complete: a failed run leaves nothing behind
mkdir -p results/blind
work=$(mktemp -d "results/blind/.$label.XXXXXX")
trap 'rm -rf "$work"' EXIT
for src in "${sources[@]}"; do
    stem=$(basename "$src" .de.gz)
    tmp=$work/$stem.en
    zcat "$src" | "$NMT" translate "$@" --beam "$BEAM" --alpha "$alpha" --precision fp32 \
        > "$tmp"
    n_in=$(zcat "$src" | wc -l) n_out=$(wc -l < "$tmp")
    if [ "$n_in" -ne "$n_out" ]; then
        echo "error: $src has $n_in lines but the translation has $n_out" >&2
        rm -f "$tmp"
        exit 1
    fi
    gzip -n -c "$tmp" > "$work/$stem.en.gz"
    rm -f "$tmp"
    echo "$out/$stem.en.gz: $n_out lines"
done
models_json=$(for m in "$@"; do
    if [ -f "$m/model.safetensors" ]; then f=$m/model.safetensors
    elif [ -d "models/$m" ]; then f=models/$m/model.safetensors
    else f=$m; fi
    sha=$( [ -f "$f" ] && printf '"%s"' "$(sha256sum "$f" | cut -d' ' -f1)" || echo null)
    printf '{"model": "%s", "weights_sha256": %s}\n' "$m" "$sha"
done | paste -sd, -)
cat > "$work/decoding.json" <<EOF
{
  "models": [$models_json],
  "ensemble": $([ $# -gt 1 ] && echo true || echo false),
  "beam": $BEAM,
  "alpha": $alpha,
  "alpha_chosen_on": "val",
  "length_penalty": "gnmt",
  "precision": "fp32",
  "command": "bash scripts/translate_blind.sh $label $alpha $*",
  "sources": "$(basename "$BLIND_DIR")/*.de.gz, one line out per line in; references withheld"
}
EOF
mkdir -p "$out"
mv "$work"/*.en.gz "$work/decoding.json" "$out/"
echo "$out/decoding.json"
