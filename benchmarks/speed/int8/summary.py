"""Table of the fp32/int8 ABAB bench runs (run_ab.sh): per model, thread count and precision,
sentences/s per run with the median, and BLEU and chrF of greedy and beam 5.

    python benchmarks/speed/int8/summary.py DIR     (DIR: the runs' MODEL_tT_PREC_rN.json)
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def main(folder: Path) -> None:
    """Print the Markdown table of the runs in ``folder``."""
    rows: dict[tuple[str, str, str], list[tuple[int, Any, Any]]] = defaultdict(list)
    for f in sorted(folder.glob("*.json")):
        m = re.match(r"(.+)_t(\d)_(fp32|int8)_r(\d)\.json", f.name)
        if m is None:
            continue
        d = json.loads(f.read_text(encoding="utf-8"))["decode"]
        rows[(m[1], m[2], m[3])].append((int(m[4]), d["greedy"], d["beam5"]))
    print(
        "| model | threads | precision | greedy sent/s (runs) | median | beam 5 sent/s (runs) "
        "| median | BLEU greedy / beam 5 | chrF greedy / beam 5 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (model, th, prec), runs in sorted(rows.items()):
        runs.sort(key=lambda r: r[0])
        g = [r[1]["sentences_per_s"] for r in runs]
        b = [r[2]["sentences_per_s"] for r in runs]
        first_g, first_b = runs[0][1], runs[0][2]
        print(
            f"| {model} | {th} | {prec} | {', '.join(f'{x:.1f}' for x in g)} "
            f"| {statistics.median(g):.1f} | {', '.join(f'{x:.1f}' for x in b)} "
            f"| {statistics.median(b):.1f} | {first_g['bleu']} / {first_b['bleu']} "
            f"| {first_g['chrf']} / {first_b['chrf']} |"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
