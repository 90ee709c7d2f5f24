"""Whether two dumps of benchmarks/speed/beam_batch_profile.py ``--dump`` hold the same
search output, bit for bit: every hypothesis' pieces, score, log P, ``complete``, per-piece
log-probabilities and attention weights.

  python benchmarks/speed/beam_identity.py OLD.pt NEW.pt

Prints one line per model (sentences, identical ones, the largest score and attention
differences) and exits 1 when any differs.
"""

from __future__ import annotations

import sys

import torch


def main(old_path: str, new_path: str) -> int:
    old, new = torch.load(old_path), torch.load(new_path)
    bad = 0
    for model in old:
        a, b = old[model], new[model]
        same, d_score, d_attn = 0, 0.0, 0.0
        for x, y in zip(a, b, strict=True):
            ok = len(x) == len(y)
            for h, g in zip(x, y, strict=False):
                for key in ("tokens", "score", "log_prob", "complete", "token_logprobs"):
                    ok &= h[key] == g[key]
                d_score = max(d_score, abs(h["score"] - g["score"]))
                if (h["attention"] is None) != (g["attention"] is None):
                    ok = False
                elif h["attention"] is not None:
                    if h["attention"].shape != g["attention"].shape:
                        ok = False
                    else:
                        ok &= torch.equal(h["attention"], g["attention"])
                        diff = (h["attention"] - g["attention"]).abs().max()
                        d_attn = max(d_attn, float(diff))
            same += ok
        bad += same != len(a)
        print(
            f"{model}: {len(a)} sentences, {same} identical; max |score diff| {d_score:.3g}, "
            f"max |attention diff| {d_attn:.3g}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
