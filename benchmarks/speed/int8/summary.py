"""Table of the ABAB bench runs: per model and thread count, sentences/s per run and BLEU."""

import json, sys, glob, os, re
from collections import defaultdict

rows = defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    m = re.match(r"(.+)_t(\d)_(fp32|int8)_r(\d)\.json", os.path.basename(f))
    d = json.load(open(f))["decode"]
    rows[(m[1], m[2], m[3])].append(
        (
            int(m[4]),
            d["greedy"]["sentences_per_s"],
            d["beam5"]["sentences_per_s"],
            d["greedy"]["bleu"],
            d["beam5"]["bleu"],
            d["greedy"]["chrf"],
            d["beam5"]["chrf"],
        )
    )
print(
    "| model | threads | precision | greedy sent/s (runs) | median | beam 5 sent/s (runs) | median | BLEU greedy / beam 5 | chrF greedy / beam 5 |"
)
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
med = lambda v: (
    sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1 : len(v) // 2 + 1]) / 2
)
for (model, th, prec), runs in sorted(rows.items()):
    runs.sort()
    g = [r[1] for r in runs]
    b = [r[2] for r in runs]
    print(
        f"| {model} | {th} | {prec} | {', '.join(f'{x:.1f}' for x in g)} | {med(g):.1f} | {', '.join(f'{x:.1f}' for x in b)} | {med(b):.1f} | {runs[0][3]} / {runs[0][4]} | {runs[0][5]} / {runs[0][6]} |"
    )
