"""Training step, reference architecture: dropout masks drawn with torch.rand (keep where
u >= p, scaled by 1/(1-p)) against nn.Dropout (torch's bernoulli_), for the encoder's and
decoder's dropout modules.
  PRECISION=fp32 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/rand_dropout.py

Switch flipped: the class of model.encoder.dropout and model.decoder.dropout."""
import torch
from torch import nn


class RandDropout(nn.Dropout):
    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = (torch.rand(x.shape, device=x.device) >= self.p).to(x.dtype).mul_(1.0 / (1.0 - self.p))
        return x * keep


def _swap(cls):
    def enter(model):
        for m in (model.encoder, model.decoder):
            m.dropout.__class__ = cls
    return enter, lambda model: None


VARIANTS = {"nn.Dropout (bernoulli_)": _swap(nn.Dropout), "torch.rand masks": _swap(RandDropout)}
# Tried 2026-12-01 14:28-14:30, 2-core AMD EPYC (AVX-512, avx512_bf16), 2 threads, nothing
# else running, nmt 493eb53 (target tokens/s):
# PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 40 benchmarks/speed/ab/rand_dropout.py
# nn.Dropout (bernoulli_): 3704, torch.rand masks: 3699
# PRECISION=fp32 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/rand_dropout.py
# nn.Dropout (bernoulli_): 2293, torch.rand masks: 2341
# Not kept: +2% in fp32, nothing in bf16, and dropout draws a different random stream.
