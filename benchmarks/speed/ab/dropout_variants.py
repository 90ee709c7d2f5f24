"""Variants for step_ab.py: the training step with torch's F.dropout (what nmt used before
nmt/ops/dropout.py) against nmt's dropout with 16-bit masks from 64-bit draws.
  [PRECISION=bf16] python benchmarks/speed/ab/step_ab.py 40 benchmarks/speed/ab/dropout_variants.py"""

import torch.nn.functional as F

from nmt.ops.dropout import Dropout


def _torch(model):
    for m in model.modules():
        if isinstance(m, Dropout):
            m.forward = lambda x, m=m: F.dropout(x, m.p, m.training)


def _nmt(model):
    for m in model.modules():
        if isinstance(m, Dropout) and "forward" in vars(m):
            del m.forward


VARIANTS = {"torch_dropout": (_torch, _nmt), "nmt_dropout": (_nmt, _nmt)}
