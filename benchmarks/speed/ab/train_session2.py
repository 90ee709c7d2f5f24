"""Training step: this session's two changes (the chunked in-place loss, the additive
scorer's sigmoid-form tanh) together and one at a time, against both off (226fa03).
  python benchmarks/speed/ab/step_ab.py STEPS benchmarks/speed/ab/train_session2.py
(in a clone with the history: the old loss is read from git, loss_at.py).

Switches flipped: nmt.model.seq2seq.summed_cross_entropy (the name Seq2Seq.forward calls;
"off" is nmt/loss.py of 226fa03) and nmt.model.attention.tanh_, the additive scorer's tanh
(torch.tanh for "off"; until ba82f16 the module global nmt.attention.FAST_TANH=False did
that)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import torch
from loss_at import old_loss

import nmt.model.attention
import nmt.model.seq2seq

_old = old_loss()
_new = nmt.model.seq2seq.summed_cross_entropy
_sigmoid_tanh = nmt.model.attention.tanh_


def _old_fn(logits, target, eps=0.0, overwrite_logits=False):
    return _old.summed_cross_entropy(logits, target, eps)


def _set(loss_new, tanh_new):
    def f(model):
        nmt.model.seq2seq.summed_cross_entropy = _new if loss_new else _old_fn
        nmt.model.attention.tanh_ = _sigmoid_tanh if tanh_new else torch.tanh
    return f


_reset = _set(True, True)
VARIANTS = {"both (this session)": (_set(True, True), _reset),
            "chunked loss only": (_set(True, False), _reset),
            "fast tanh only": (_set(False, True), _reset),
            "neither (226fa03)": (_set(False, False), _reset)}
