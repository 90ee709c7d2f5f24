"""Hypothesis/reference length ratio on the joined long-sentence set, per k, for the runs
of a length study (reads the hypotheses `nmt study` cached in runs/*/hyps/).

Usage: python benchmarks/deen_joined_length_ratio.py runs/deen_none runs/deen_additive runs/deen_dot
"""

import sys
from pathlib import Path

from nmt.data.corpus import read_lines
from nmt.data.longsets import long_sentence_set

DATA = Path("../shared/data/multi30k")
src = read_lines(DATA / "test_2016_flickr.de.gz")
ref = read_lines(DATA / "test_2016_flickr.en.gz")
joined = long_sentence_set(src, ref, (1, 2, 3, 4))
for run in sys.argv[1:]:
    hyps = (Path(run) / "hyps" / "test_2016_flickr_joined.txt").read_text().split("\n")[:-1]
    cells = []
    for k in (1, 2, 3, 4):
        idx = [i for i, kk in enumerate(joined.k) if kk == k]
        ratio = sum(len(hyps[i].split()) for i in idx) / sum(
            len(joined.references[i].split()) for i in idx
        )
        cells.append(f"k={k}: {ratio:.2f}")
    print(f"{run}: hypothesis/reference words  " + "  ".join(cells))
