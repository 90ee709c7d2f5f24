"""Markdown table of a bench_ab.sh sitting (benchmarks/speed/amx_sitting.sh): per variant, the
target tokens/s of each round (fixed steps; window), their means against fp32's, and peak RSS
(/usr/bin/time -v of the whole process, MiB) against fp32's. Reads only the sitting's files.

    python benchmarks/speed/ab/variants_table.py results/speed/DATE-amx-bucket > .../table.md
"""

import json
import re
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
runs: dict[str, list[tuple[float, float | None, float | None]]] = {}
for path in sorted(out.glob("*_round*.json"), key=lambda p: p.name):
    variant = path.name.rsplit("_round", 1)[0]
    train = json.loads(path.read_text())["train"]
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
    "| variant | fixed steps, tok/s | window, tok/s | window vs fp32 | peak RSS, MiB | RSS vs fp32 |"
)
print("| --- | --- | --- | --- | --- | --- |")
for variant, rows in runs.items():
    fixed, window, rss = zip(*rows, strict=True)
    means = [mean(fixed), mean(window), mean(rss)]
    shown = [
        " / ".join(f"{v:,.0f}" if v is not None else "-" for v in col)
        for col in (fixed, window, rss)
    ]
    print(
        f"| {variant} | {shown[0]} | {shown[1]} | {vs(means[1], base[1])} | {shown[2]} "
        f"| {vs(means[2], base[2])} |"
    )
