"""Write a synthetic parallel corpus of N training pairs built from Multi30k, streaming.

    python benchmarks/big_corpus/make_corpus.py ../shared/data/multi30k /tmp/big5m --pairs 5000000

Copy 0 is the training split as it is; every later copy takes the pairs in a seeded
random order and joins a fifth of them with the next pair in that order (source to
source, target to target), so copies differ in their lines and the length distribution
gets a longer tail, as a web-crawled corpus has. The output is
``{out}/train.{src,tgt}.gz`` with N lines each; the validation and test files are
copied unchanged. Nothing is held in memory but Multi30k's 29,000 pairs.
"""

from __future__ import annotations

import argparse
import gzip
import random
import shutil
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("multi30k", type=Path, help="directory of {split}.{lang}.gz files")
    ap.add_argument("out", type=Path)
    ap.add_argument("--pairs", type=int, default=5_000_000)
    ap.add_argument("--src", default="de")
    ap.add_argument("--tgt", default="en")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--join-fraction", type=float, default=0.2)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    def lines(lang: str) -> list[str]:
        with gzip.open(args.multi30k / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]

    src, tgt = lines(args.src), lines(args.tgt)
    rng = random.Random(args.seed)
    written = 0
    with (
        gzip.open(args.out / f"train.{args.src}.gz", "wt", encoding="utf-8", compresslevel=1) as fs,
        gzip.open(args.out / f"train.{args.tgt}.gz", "wt", encoding="utf-8", compresslevel=1) as ft,
    ):
        copy = 0
        while written < args.pairs:
            order = list(range(len(src)))
            if copy:
                rng.shuffle(order)
            for j, i in enumerate(order):
                if written >= args.pairs:
                    break
                s, t = src[i], tgt[i]
                if copy and rng.random() < args.join_fraction:
                    k = order[(j + 1) % len(order)]
                    s, t = f"{s} {src[k]}", f"{t} {tgt[k]}"
                fs.write(s + "\n")
                ft.write(t + "\n")
                written += 1
            copy += 1
    for split in ("val", "test_2016_flickr", "test_2017_flickr"):
        for lang in (args.src, args.tgt):
            name = f"{split}.{lang}.gz"
            if (args.multi30k / name).exists():
                shutil.copyfile(args.multi30k / name, args.out / name)
    print(f"wrote {written:,} training pairs ({copy} copies) to {args.out}")


if __name__ == "__main__":
    main()
