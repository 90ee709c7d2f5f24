"""Markdown tables of a bench_ab.sh sitting (benchmarks/speed/amx_sitting.sh,
noamx_sitting.sh): per training variant, the target tokens/s of each round over the fixed
steps and over the window, and the peak RSS (/usr/bin/time -v of the whole process, MiB),
each with its mean over fp32's mean, and where the sitting ran Joey NMT 2.3.0 (JOEY=1,
``joey_round*.json`` of benchmarks/speed/joey/bench_joey.sh: a window only, no fixed steps)
also each variant's window mean over Joey's; then, where the sitting decoded too
(``search_*.json``), sentences/s and BLEU of greedy and beam-5 search per variant and round.
Reads only the sitting's files.

    python benchmarks/speed/ab/variants_table.py results/speed/DATE-amx-bucket > .../table.md
"""

import json
import re
import statistics
import sys
from pathlib import Path

Run = tuple[float | None, float | None, float | None]  # fixed, window tok/s; peak RSS MiB


def read_sitting(out: Path) -> tuple[dict[str, list[Run]], dict[str, list[dict]]]:
    """Each training variant's runs in round order, and each search variant's ``decode``."""
    runs: dict[str, list[Run]] = {}
    searches: dict[str, list[dict]] = {}
    for path in sorted(out.glob("*_round*.json"), key=lambda p: p.name):
        variant = path.name.rsplit("_round", 1)[0]
        record = json.loads(path.read_text())
        if record.get("train") is None:  # a search run: decoding only
            searches.setdefault(variant, []).append(record["decode"])
            continue
        train = record["train"]
        if "fixed_steps" not in train:  # Joey's: a window after warm-up, its own peak RSS
            runs.setdefault(variant, []).append(
                (None, train["target_tokens_per_s"], train.get("peak_rss_mib"))
            )
            continue
        log = path.with_suffix(".log").read_text() if path.with_suffix(".log").exists() else ""
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", log)
        window = train["window"]["target_tokens_per_s"] if train["window"] else None
        runs.setdefault(variant, []).append(
            (
                train["fixed_steps"]["target_tokens_per_s"],
                window,
                int(rss[1]) / 1024 if rss else None,
            )
        )
    return runs, searches


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


def vs(value, base, fmt="{:.2f}x"):
    return fmt.format(value / base) if value and base else "-"


def training_table(runs: dict[str, list[Run]]) -> list[str]:
    """The training table's lines: fp32 first, then bf16, the rest by name (joey among them)."""
    base = [mean(col) for col in zip(*runs.get("fp32", [(None, None, None)]), strict=True)]
    joey = mean([r[1] for r in runs.get("joey", [])])
    head = "| variant | fixed steps, tok/s | vs fp32 | window, tok/s | vs fp32 |"
    head += " window vs Joey |" if joey else ""
    lines = [head + " peak RSS, MiB | vs fp32 |", "| --- " * (8 if joey else 7) + "|"]
    for variant in sorted(runs, key=lambda v: (v != "fp32", v != "bf16", v)):
        cols = list(zip(*runs[variant], strict=True))  # fixed, window, rss: one value a round
        cells = []
        for i, (col, b) in enumerate(zip(cols, base, strict=True)):
            shown = " / ".join("-" if v is None else f"{v:,.0f}" for v in col)
            cells += [shown, vs(mean(col), b)]
            if i == 1 and joey:
                cells.append(vs(mean(col), joey))
        lines.append(f"| {variant} | {' | '.join(cells)} |")
    return lines


def search_table(searches: dict[str, list[dict]]) -> list[str]:
    lines = [
        "| search variant | precision | greedy, sentences/s | BLEU | beam 5, sentences/s | BLEU |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for variant, decodes in sorted(searches.items()):
        precision = " / ".join(sorted({d["greedy"]["precision"] for d in decodes}))
        cells = []
        for search in ("greedy", "beam5"):
            rates = " / ".join(f"{d[search]['sentences_per_s']:,.1f}" for d in decodes)
            bleus = " / ".join(f"{d[search]['bleu']:.2f}" for d in decodes)
            cells += [rates, bleus]
        lines.append(f"| {variant} | {precision} | {' | '.join(cells)} |")
    return lines


def main(out: Path) -> None:
    runs, searches = read_sitting(out)
    print("\n".join(training_table(runs)))
    if searches:
        print()
        print("\n".join(search_table(searches)))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
