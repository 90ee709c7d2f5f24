"""Paired bootstrap of multihead (4 heads) against multihead-1h (1 head, same size) on the
long study's cached greedy hypotheses (runs/deen_long_*/hyps/, written by `nmt study`).

Run from the repository root after `nmt study configs/study_deen_long.yaml`:
    .venv/bin/python benchmarks/heads_deen/paired_multihead.py > results/heads_deen/paired_multihead.txt
"""

from pathlib import Path

from nmt.data.corpus import read_lines
from nmt.data.longsets import long_sentence_set
from nmt.evaluation.bootstrap import paired_bootstrap

DATA = Path("../shared/data/multi30k")
src = read_lines(DATA / "test_2016_flickr.de.gz")
ref = read_lines(DATA / "test_2016_flickr.en.gz")
joined = long_sentence_set(src, ref, (1, 2, 3, 4, 5))
sets = {
    "test_2016_flickr": (src, ref),
    "test_2016_flickr_joined": (joined.sources, joined.references),
}
for name, (sources, refs) in sets.items():
    hyps = {}
    for model in ("multihead", "multihead-1h"):
        lines = (
            (Path("runs") / f"deen_long_{model}" / "hyps" / f"{name}.txt")
            .read_text(encoding="utf-8")
            .split("\n")[:-1]
        )
        assert len(lines) == len(refs), (model, name, len(lines), len(refs))
        hyps[model] = lines
    for words in ((1, None), (41, None)) if name.endswith("joined") else ((1, None),):
        keep = [i for i, s in enumerate(sources) if len(s.split()) >= words[0]]
        r = paired_bootstrap(
            [hyps["multihead-1h"][i] for i in keep],
            [hyps["multihead"][i] for i in keep],
            [refs[i] for i in keep],
            n_samples=1000,
            seed=12345,
        )
        print(
            f"{name}, sources of {words[0]}+ words (n={len(keep)}): multihead (4 heads) "
            f"minus multihead-1h: {r.delta:+.2f} BLEU [{r.low:+.2f}, {r.high:+.2f}], "
            f"p={r.p_value:.3f} (1000 resamples, seed 12345)"
        )
