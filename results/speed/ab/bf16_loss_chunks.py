"""bf16 autocast training: the loss takes bf16 logits to fp32 one cache-sized chunk at a
time and writes its gradient back in bf16 over them (now), against one whole fp32 copy of
the logits and a whole cast of the gradient back to bf16 (before: loss_before_bf16_chunks.py,
nmt/loss.py at 09e9ad5). Run with PRECISION=bf16."""
import importlib.util
import pathlib
import nmt.model as M
from nmt.loss import summed_cross_entropy

_spec = importlib.util.spec_from_file_location(
    "loss_before", pathlib.Path(__file__).with_name("loss_before_bf16_chunks.py"))
_before = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_before)


def _set(f):
    def enter(model):
        M.summed_cross_entropy = f
    return enter, lambda model: None


VARIANTS = {"chunked, bf16 gradient (now)": _set(summed_cross_entropy),
            "whole fp32 copy (before)": _set(_before.summed_cross_entropy)}
