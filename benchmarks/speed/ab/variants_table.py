"""Markdown tables of a bench_ab.sh sitting (benchmarks/speed/amx_sitting.sh,
noamx_sitting.sh): per training variant, the target tokens/s of each round over the fixed
steps and over the window, and the peak RSS (/usr/bin/time -v of the whole process, MiB),
each with its mean over fp32's mean; then, where the sitting decoded too (``search_*.json``),
sentences/s and BLEU of greedy and beam-5 search per variant and round. Reads only the
sitting's files.

    python benchmarks/speed/ab/variants_table.py results/speed/DATE-amx-bucket > .../table.md
"""

import json
import re
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
runs: dict[str, list[tuple[float, float | None, float | None]]] = {}
searches: dict[str, list[dict]] = {}
for path in sorted(out.glob("*_round*.json"), key=lambda p: p.name):
    variant = path.name.rsplit("_round", 1)[0]
    record = json.loads(path.read_text())
    if record.get("train") is None:  # a search run: decoding only
        searches.setdefault(variant, []).append(record["decode"])
        continue
    train = record["train"]
    log = path.with_suffix(".log").read_text() if path.with_suffix(".log").exists() else ""
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", log)
    window = train["window"]["target_tokens_per_s"] if train["window"] else None
    runs.setdefault(variant, []).append(
        (train["fixed_steps"]["target_tokens_per_s"], window, int(rss[1]) / 1024 if rss else None)
    )


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


def vs(value, base, fmt="{:.2f}x"):
    return fmt.format(value / base) if value and base else "-"


base = [mean(col) for col in zip(*runs.get("fp32", [(None, None, None)]), strict=True)]
print(
    "| variant | fixed steps, tok/s | vs fp32 | window, tok/s | vs fp32 | peak RSS, MiB | vs fp32 |"
)
print("| --- | --- | --- | --- | --- | --- | --- |")
for variant in sorted(runs, key=lambda v: (v != "fp32", v != "bf16", v)):
    cols = list(zip(*runs[variant], strict=True))  # fixed, window, rss: one value a round
    cells = []
    for col, b in zip(cols, base, strict=True):
        shown = " / ".join("-" if v is None else f"{v:,.0f}" for v in col)
        cells += [shown, vs(mean(col), b)]
    print(f"| {variant} | {' | '.join(cells)} |")

if searches:
    print()
    print(
        "| search variant | precision | greedy, sentences/s | BLEU | beam 5, sentences/s | BLEU |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for variant, decodes in sorted(searches.items()):
        precision = " / ".join(sorted({d["greedy"]["precision"] for d in decodes}))
        cells = []
        for search in ("greedy", "beam5"):
            rates = " / ".join(f"{d[search]['sentences_per_s']:,.1f}" for d in decodes)
            bleus = " / ".join(f"{d[search]['bleu']:.2f}" for d in decodes)
            cells += [rates, bleus]
        print(f"| {variant} | {precision} | {' | '.join(cells)} |")
