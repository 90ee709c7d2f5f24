"""bf16 autocast training: the loss takes bf16 logits to fp32 one cache-sized chunk at a
time and writes its gradient back in bf16 over them (now), against one whole fp32 copy of
the logits and a whole cast of the gradient back to bf16 (before: nmt/loss.py at 09e9ad5,
read from git by loss_at.py). Run with PRECISION=bf16, in a clone with the history:
  PRECISION=bf16 python benchmarks/speed/ab/step_ab.py STEPS benchmarks/speed/ab/bf16_loss_chunks.py
Flips nmt.model.seq2seq.summed_cross_entropy (the name Seq2Seq.forward calls)."""
import pathlib
import sys

import nmt.model.seq2seq as M
from nmt.model.loss import summed_cross_entropy

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from loss_at import old_loss

_before = old_loss("09e9ad5")


def _set(f):
    def enter(model):
        M.summed_cross_entropy = f
    return enter, lambda model: None


VARIANTS = {"chunked, bf16 gradient (now)": _set(summed_cross_entropy),
            "whole fp32 copy (before)": _set(_before.summed_cross_entropy)}
