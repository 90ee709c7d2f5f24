"""CPU time of two versions of nmt/ops/topk.py's ``top_k`` on the step log-probabilities of
a real search: the first ``--steps`` steps of an int8 beam-5 search of 64 test_2016_flickr
sentences with models/deen-additive (up to 320 rows of 7,931), one thread, best of 7 passes,
alternating; checks that both give torch.topk's values.

  python benchmarks/speed/topk_ab.py OLD_TOPK.py NEW_TOPK.py [--k 17 11]

OLD_TOPK.py: e.g. ``git show eb27f57:nmt/ops/topk.py > /tmp/topk_old.py``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.top_k


def step_log_probs(steps: int) -> list[torch.Tensor]:
    """The log-probabilities of the first ``steps`` beam steps (each (rows, V))."""
    import nmt.model.seq2seq as seq2seq
    from nmt.inference.translator import Translator

    seen: list[torch.Tensor] = []
    exact_top = seq2seq.Seq2Seq._exact_top

    def keep(self, logits, pre_output, **kwargs):
        out = exact_top(self, logits, pre_output, **kwargs)
        if len(seen) < steps:
            seen.append(logits.float().clone())
        return out

    seq2seq.Seq2Seq._exact_top = keep
    data = Path(os.environ.get("NMT_MULTI30K", "/work/shared/data/multi30k"))
    with gzip.open(data / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(64), f, strict=False)]
    tr = Translator.from_checkpoint(
        ROOT / "models/deen-additive", precision="int8", beam_size=5, workers=1, threads=1
    )
    tr.translate(lines)
    seq2seq.Seq2Seq._exact_top = exact_top
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--k", type=int, nargs="+", default=[17, 11])
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = step_log_probs(args.steps)
    versions = {"old": load(args.old, "topk_old"), "new": load(args.new, "topk_new")}
    sizes = sorted({x.size(0) for x in rows})
    print(f"{len(rows)} steps of {sizes[0]}-{sizes[-1]} rows, 1 thread, torch {torch.__version__}")
    for k in args.k:
        best = {name: float("inf") for name in versions}
        for _ in range(7):
            for name, top_k in versions.items():
                start = time.process_time()
                for x in rows:
                    top_k(x, k)
                best[name] = min(best[name], time.process_time() - start)
        for top_k in versions.values():
            for x in rows:
                values, idx = top_k(x, k)
                assert torch.equal(values, x.topk(k, dim=-1).values)
                assert torch.equal(x.gather(1, idx), values)
        ms = {name: 1e3 * s / len(rows) for name, s in best.items()}
        print(
            f"k={k}: old {ms['old']:.3f} ms a call, new {ms['new']:.3f} ({ms['old'] / ms['new']:.2f}x)"
        )


if __name__ == "__main__":
    main()
