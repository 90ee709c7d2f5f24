"""bf16 autocast training: the loss takes bf16 logits to fp32 one cache-sized chunk at a
time and writes its gradient back in bf16 over them (now), against one whole fp32 copy of
the logits and a whole cast of the gradient back to bf16 (before: nmt/model/loss.py at 09e9ad5,
read from git). Run with PRECISION=bf16, from the repository."""
import subprocess
import types
import nmt.model.seq2seq as M
from nmt.model.loss import summed_cross_entropy

_before = types.ModuleType("loss_before")
exec(subprocess.run(["git", "show", "09e9ad5:nmt/model/loss.py"], capture_output=True, text=True,
                    check=True).stdout, _before.__dict__)


def _set(f):
    def enter(model):
        M.summed_cross_entropy = f
    return enter, lambda model: None


VARIANTS = {"chunked, bf16 gradient (now)": _set(summed_cross_entropy),
            "whole fp32 copy (before)": _set(_before.summed_cross_entropy)}
