"""CPU seconds of whole searches by two or more trees, one thread, one worker: the shipped
models/deen-additive translates the first 1,000 test_2016_flickr sources (Translator,
batches of 64) with each tree's code, best of ``--passes`` passes after a warm-up, every
tree in its own process, trees alternating for ``--rounds`` rounds; the translations of
each tree's last pass go to OUT/TREE_PRECISION_beamK.txt, to check that a change kept the
output.

  python benchmarks/speed/search_cpu_ab.py OUT TREE... [--precisions int8 fp32] [--beams 5]

A TREE is a checkout's root (e.g. a worktree of an older commit); each is imported in a
process of its own. CPU time (time.process_time), not wall clock: at one thread the two
agree on an idle machine, and CPU time moves less with other work. Prints one line a run
and a summary; writes OUT/summary.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def one_run(tree: str, precision: str, beam: int, passes: int, out: str) -> None:
    """In a child process: import ``nmt`` from ``tree`` and time its searches."""
    sys.path.insert(0, tree)
    import torch

    from nmt.inference.translator import Translator

    data = Path(os.environ.get("NMT_MULTI30K", "/work/shared/data/multi30k"))
    with gzip.open(data / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(1000), f, strict=False)]
    tr = Translator.from_checkpoint(
        ROOT / "models/deen-additive", precision=precision, beam_size=beam, workers=1, threads=1
    )
    best, res = float("inf"), []
    with torch.inference_mode():
        tr.translate(lines[:128])
        for _ in range(passes):
            start = time.process_time()
            res = tr.translate(lines)
            best = min(best, time.process_time() - start)
    Path(out).write_text("\n".join(t.text for t in res) + "\n", encoding="utf-8")
    print(json.dumps({"tree": tree, "precision": precision, "beam": beam, "cpu_s": best}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--precisions", nargs="+", default=["int8", "fp32"])
    ap.add_argument("--beams", type=int, nargs="+", default=[5])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        tree, precision, beam, out = args.child
        one_run(tree, precision, int(beam), args.passes, out)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[tuple[str, str, int], list[float]] = {}
    for r in range(args.rounds):
        trees = args.trees if r % 2 == 0 else args.trees[::-1]
        for beam in args.beams:
            for precision in args.precisions:
                for tree in trees:
                    name = f"{Path(tree).resolve().name}_{precision}_beam{beam}.txt"
                    child = [tree, precision, str(beam), str(out / name)]
                    cmd = [sys.executable, __file__, str(out), tree, "--child", *child]
                    cmd += ["--passes", str(args.passes)]
                    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
                    rec = json.loads(done.stdout.strip().splitlines()[-1])
                    print(f"round {r + 1}: {tree} {precision} beam {beam}: {rec['cpu_s']:.3f} s")
                    rows.setdefault((tree, precision, beam), []).append(rec["cpu_s"])
    lines = [
        "| tree | precision | beam | CPU s per 1,000 sentences, each round |",
        "| --- | --- | --- | --- |",
    ]
    for (tree, precision, beam), secs in rows.items():
        lines.append(f"| {tree} | {precision} | {beam} | {' / '.join(f'{s:.3f}' for s in secs)} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
