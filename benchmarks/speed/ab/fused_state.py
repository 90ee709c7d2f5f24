"""Training step, reference architecture (luong order, additive attention, one layer):
the three products of each new decoder state s_t (the next step's W_hh s_t, the scorer's
query W s_t, and the attentional layer's share W_c[:, M:] s_t) as one GEMM against the
concatenated weight, and the dropout masks of all steps drawn at once with torch.rand,
against the step as it is (one product each, F.dropout per step). ONLY="a,b" runs only
the variants named.
  PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 20 benchmarks/speed/ab/fused_state.py

Switch flipped: nmt.model.decoder.Decoder.unroll, replaced by a loop written out for the
reference architecture, put back after each step. The written-out loops take autograd's
per-step weight gradients ("now" defers them since 35623e3, which the runs below predate)."""
import os

import torch
import torch.nn.functional as F

import nmt.model.decoder as D
from nmt.model.attention import masked_softmax, tanh_
from nmt.ops.precision import cast_for_autocast as cast

NOW = D.Decoder.unroll


def _fused(masks: bool, fuse: bool):
    def unroll(self, tgt_in, state, mem, keep_attention=True):
        B, T = tgt_in.shape
        w = mem.weights
        cell, Dh = self.cells[0], self.hidden
        sc = self.scorer
        Wc = self.pre_output.weight
        M = Wc.size(1) - Dh
        A, O = sc.W.weight.size(0), Wc.size(0)
        y, gates, _ = self._embed_inputs(tgt_in, w)
        gates_t = gates.unbind(1)
        p = self.dropout.p if self.training else 0.0
        if masks and p > 0:
            keep = (torch.rand(T, B, O, device=tgt_in.device) >= p).to(
                torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
            ).mul_(1.0 / (1.0 - p)).unbind(0)
        if fuse:
            W_s = cast(torch.cat([cell.weight_hh, sc.W.weight, Wc[:, M:]], 0))
            b_s = torch.cat([cell.bias_hh, cell.bias_hh.new_zeros(A), self.pre_output.bias])
            W_cc = cast(Wc[:, :M])
        h = state.hidden[0].float()
        feed = state.feed
        gh = F.linear(h, w.hh, cell.bias_hh).float()
        outs = []
        for t in range(T):
            gi = torch.addmm(gates_t[t], feed, w.feed.t()).float()
            gi_rz, gi_n = gi.split((2 * Dh, Dh), dim=1)
            gh_rz, gh_n = gh.split((2 * Dh, Dh), dim=1)
            r, z = torch.sigmoid(gi_rz + gh_rz).split(Dh, dim=1)
            n = torch.tanh(gi_n + r * gh_n)
            h = torch.lerp(n, h, z)
            if fuse:
                P = F.linear(h, W_s if t < T - 1 else W_s[3 * Dh:], b_s if t < T - 1 else b_s[3 * Dh:])
                if t < T - 1:
                    gh, q, pre_s = P.split((3 * Dh, A, O), 1)
                    gh = gh.float()
                else:
                    q, pre_s = P.split((A, O), 1)
                scores = sc.v(tanh_(mem.keys + q.unsqueeze(1))).squeeze(-1)
                weights = masked_softmax(scores, mem.mask)
                context = torch.bmm(weights.unsqueeze(1).to(mem.memory.dtype), mem.memory).squeeze(1)
                out = torch.tanh(torch.addmm(pre_s, context, W_cc.t()))
            else:
                context, weights, _ = self._read(h, mem, t)
                out = torch.tanh(D.step_addmm(self.pre_output.bias, torch.cat([context, h], -1), w.pre))
                if t < T - 1:
                    gh = F.linear(h, w.hh, cell.bias_hh).float()
            if masks and p > 0:
                out = out * keep[t]
            else:
                out = self.dropout(out)
            feed = out
            outs.append(out)
        return torch.stack(outs, 1), None, None
    return unroll


def _set(f):
    return (lambda model: setattr(D.Decoder, "unroll", f)), (lambda model: setattr(D.Decoder, "unroll", NOW))


VARIANTS = {"now": _set(NOW),
            "rewritten loop": _set(_fused(False, False)),
            "rand masks": _set(_fused(True, False)),
            "fused s_t": _set(_fused(False, True)),
            "fused + masks": _set(_fused(True, True))}
if os.environ.get("ONLY"):
    VARIANTS = {k: VARIANTS[k] for k in os.environ["ONLY"].split(",")}
# Tried 2026-12-01 14:18-14:26, 2-core AMD EPYC (AVX-512, avx512_bf16), 2 threads, nothing
# else running, nmt 493eb53. "rewritten loop" is the same step written as one loop body
# (the control), "rand masks" adds the masks, "fused s_t" the one GEMM; not kept: no
# variant is ahead of the control by more than the noise, and fusing is not ahead at all.
# PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 20 benchmarks/speed/ab/fused_state.py
# now: 3951, rewritten loop: 4073, rand masks: 4115, fused s_t: 4047, fused + masks: 4025
# PRECISION=fp32 (same command)
# now: 2373, rewritten loop: 2374, rand masks: 2397, fused s_t: 2374, fused + masks: 2385
# ONLY="now,rewritten loop,rand masks" PRECISION=bf16 ... step_ab.py 40 ...
# now: 4032, rewritten loop: 4133, rand masks: 4158
# ONLY="now,rewritten loop,rand masks" PRECISION=fp32 ... step_ab.py 30 ...
# now: 2455, rewritten loop: 2439, rand masks: 2483   (target tokens/s)
