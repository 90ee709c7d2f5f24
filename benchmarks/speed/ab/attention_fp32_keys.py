"""bf16 autocast training: the additive scorer's keys in fp32 and its tanh as
2 sigmoid(2x) - 1 in bf16 too, against bf16 keys and torch.tanh for bf16 (52bc3a6, kept).
Run with PRECISION=bf16. Search keeps fp32 keys (AdditiveScorer.precompute); training
does not (result below).
  PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/attention_fp32_keys.py

Switches flipped: nmt.model.attention.tanh_ (the additive scorer's tanh) and
nmt.model.attention.AdditiveScorer.precompute (the keys U h), both replaced for the run
(neither put back: run it in a process of its own, as step_ab.py does)."""
import torch

import nmt.model.attention as A

_fp32_tanh = A.tanh_  # 2 sigmoid(2x) - 1 for fp32, torch.tanh for other dtypes


def _old_tanh(x):
    return _fp32_tanh(x)


def _now_tanh(x):  # the sigmoid form for bf16 too
    if x.dtype == torch.bfloat16 and torch.is_grad_enabled() and x.requires_grad:
        return A._TanhInPlace.apply(x)
    if x.dtype == torch.bfloat16:
        return torch.sigmoid(x.mul_(2), out=x).mul_(2).sub_(1)
    return _fp32_tanh(x)


def _old_pre(self, memory):
    return self.U(memory)


def _now_pre(self, memory):
    return self.U(memory).float()


def _set(tanh, pre):
    def enter(model):
        A.tanh_, A.AdditiveScorer.precompute = tanh, pre
    return enter, lambda model: None


VARIANTS = {"fp32 keys, sigmoid tanh (tried)": _set(_now_tanh, _now_pre),
            "bf16 keys, torch.tanh (kept)": _set(_old_tanh, _old_pre),
            "bf16 keys, sigmoid tanh": _set(_now_tanh, _old_pre)}
# 2026-12-01 13:05, 2-core AMD EPYC (AVX-512, avx512_bf16), 2 threads, nothing else running:
# PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/attention_fp32_keys.py
# fp32 keys, sigmoid tanh (tried): 4035 target tok/s over 30 steps
# bf16 keys, torch.tanh (kept): 4161 target tok/s over 30 steps
# bf16 keys, sigmoid tanh: 4122 target tok/s over 30 steps
