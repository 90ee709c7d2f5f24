"""Markdown table of one side-by-side sitting (benchmarks/speed/side_by_side.sh):
Joey NMT 2.3.0, nmt at an earlier commit and nmt now, per round and the mean. Reads only
the sitting's JSON files (no nmt import), prints the table on stdout. Joey's records from
benchmarks/speed/joey/bench_joey.sh (since 2026-12-07) have training only: its search
cells show "-".

    python benchmarks/speed/summarize.py results/speed/2026-11-30 > results/speed/2026-11-30/table.md
    python benchmarks/speed/summarize.py results/speed/2026-11-30-b 226fa03 > .../table.md

The earlier commit (default label a79503b) ran `nmt bench`, like nmt now, or, in the
2026-11-30 sitting only, `python -m nmt.benchmark` (a module that no longer exists:
validation split, whole-run memory); the JSON it left in results/speed/2026-11-30/ is
still read, so that sitting's table can be remade.
"""

import json
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
before_label = sys.argv[2] if len(sys.argv) > 2 else "a79503b"


def rounds(prefix: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob(f"{prefix}_round*.json"))]


joey, before, now = rounds("joey"), rounds("nmt_before"), rounds("nmt")
bf16 = rounds("nmt_bf16")  # nmt's training with bf16 autocast, where the CPU has bf16
bf16dec = rounds("nmt_bf16dec")  # its search with bf16 matrix products (since 2026-12-01-e)


def col(values: list[float], fmt: str = "{:,.0f}") -> str:
    if not values:
        return "-"
    shown = " / ".join(fmt.format(v) for v in values)
    return shown if len(values) == 1 else f"{shown} (mean {fmt.format(statistics.mean(values))})"


def ratio(a: list[float], b: list[float]) -> str:
    return f"{statistics.mean(a) / statistics.mean(b):.2f}x" if a and b else "-"


rows = []
j = [r["train"]["target_tokens_per_s"] for r in joey]
n_fixed = [r["train"]["fixed_steps"]["target_tokens_per_s"] for r in now]
n_win = [r["train"]["window"]["target_tokens_per_s"] for r in now if r["train"]["window"]]
# the earlier commit's report: nmt bench's JSON (like now's), or nmt.benchmark's
bench_before = bool(before) and "train" in before[0]
b = [
    r["train"]["fixed_steps"]["target_tokens_per_s"]
    if bench_before
    else r["train_target_tokens_per_s"]
    for r in before
]
# Joey's harness timed steps 21-200 until 2026-12-07, since then a window after a warm-up
# (benchmarks/speed/joey/bench_joey.sh, no decoding: no "translate" in its JSON)
joey_window = sorted({r["train"].get("window_seconds_asked") for r in joey} - {None})
joey_timed = (
    f"{'/'.join(f'{w:g}' for w in joey_window)} s window" if joey_window else "steps 21-200"
)
rows.append(
    (
        f"training, target tokens/s (Joey: {joey_timed}; nmt: 40 steps / 30 s window)",
        col(j),
        col(b),
        f"{col(n_fixed)}; window {col(n_win)}",
        ratio(n_fixed, j),
    )
)
if bf16:
    n16 = [r["train"]["fixed_steps"]["target_tokens_per_s"] for r in bf16]
    n16_win = [r["train"]["window"]["target_tokens_per_s"] for r in bf16 if r["train"]["window"]]
    rows.append(
        (
            "training with bf16 autocast, target tokens/s (nmt: 40 steps / 30 s window)",
            "-",
            "-",
            f"{col(n16)}; window {col(n16_win)}",
            ratio(n16, j),
        )
    )
    f16 = [r["train"]["fixed_steps"]["fraction_of_bf16_peak"] for r in bf16]
    p16 = [r["matmul_peak_gflop_s"]["bf16"] for r in bf16]
    rows.append(
        (
            "nmt bf16 training: fraction of the measured bf16 matmul peak",
            "-",
            "-",
            f"{col([100 * f for f in f16], '{:.0f}%')} of {col(p16, '{:.0f}')} GFLOP/s",
            "",
        )
    )
frac = [r["train"]["fixed_steps"]["fraction_of_fp32_peak"] for r in now]
peak = [r["matmul_peak_gflop_s"]["fp32"] for r in now]
rows.append(
    (
        "nmt training: fraction of the measured fp32 matmul peak",
        "-",
        "-",
        f"{col([100 * f for f in frac], '{:.0f}%')} of {col(peak, '{:.0f}')} GFLOP/s",
        "",
    )
)
for key, label in (("greedy", "greedy"), ("beam5", "beam 5")):
    js = [r["translate"][key]["sentences_per_s"] for r in joey if r.get("translate")]
    jb = [r["translate"][key]["bleu"] for r in joey if r.get("translate")]
    ns = [r["decode"][key]["sentences_per_s"] for r in now]
    nb = [r["decode"][key]["bleu"] for r in now]
    bs = [
        r["decode"][key]["sentences_per_s"] if bench_before else r["decode_sentences_per_s"][key]
        for r in before
    ]
    rows.append(
        (
            f"{label}, sentences/s (1,000 test_2016_flickr sentences, batches of 64)",
            f"{col(js, '{:,.1f}')}, BLEU {col(jb, '{:.2f}')}" if js else "-",
            f"{col(bs, '{:,.1f}')}" + ("" if bench_before else " (val split)"),
            f"{col(ns, '{:,.1f}')}, BLEU {col(nb, '{:.2f}')}",
            ratio(ns, js),
        )
    )
    dec16 = [r for r in bf16dec + bf16 if r.get("decode")]
    if dec16:
        ns16 = [r["decode"][key]["sentences_per_s"] for r in dec16]
        nb16 = [r["decode"][key]["bleu"] for r in dec16]
        rows.append(
            (
                f"{label} with bf16 matrix products (search.precision=bf16), sentences/s",
                "-",
                "-",
                f"{col(ns16, '{:,.1f}')}, BLEU {col(nb16, '{:.2f}')}",
                ratio(ns16, js),
            )
        )
rows.append(
    (
        "peak RSS, training (MiB)",
        col([r["train"]["peak_rss_mib"] for r in joey]),
        col([r["train"]["peak_memory_mib"] for r in before])
        if bench_before
        else col([r["peak_memory_mib"] for r in before]) + (" (whole run)" if before else ""),
        col([r["train"]["peak_memory_mib"] for r in now]),
        "",
    )
)
print(f"| | Joey NMT 2.3.0 | nmt before ({before_label}) | nmt now | now / Joey |")
print("| --- | --- | --- | --- | --- |")
for r in rows:
    print("| " + " | ".join(r) + " |")
