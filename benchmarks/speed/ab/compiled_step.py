"""Training step, reference architecture: the decoder step's elementwise and attention work
(GRU gates, additive scores, softmax, context, attentional vector) as one torch.compile'd
function (inductor, dynamic shapes), against eager.
  WARM=12 PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/compiled_step.py

Switch flipped: nmt.model.decoder.Decoder.unroll, replaced by a loop written out for the
reference architecture (luong order, additive attention, one layer), put back after each
step. The written-out loop takes autograd's per-step weight gradients ("now" defers them
since 35623e3, which the runs below predate)."""
import torch
import torch.nn.functional as F

import nmt.model.decoder as D
from nmt.model.attention import masked_softmax

NOW = D.Decoder.unroll


def _body(gate_t, feed, gh, h, W_feed, W_hh, b_hh, W_q, v, keys, memory, mask, W_c, b_c, keep, Dh: int):
    gi = torch.addmm(gate_t, feed, W_feed.t()).float()
    gi_rz, gi_n = gi.split((2 * Dh, Dh), dim=1)
    gh_rz, gh_n = gh.split((2 * Dh, Dh), dim=1)
    r, z = torch.sigmoid(gi_rz + gh_rz).split(Dh, dim=1)
    n = torch.tanh(gi_n + r * gh_n)
    h = torch.lerp(n, h, z)
    q = F.linear(h, W_q)
    scores = F.linear(torch.tanh(keys + q.unsqueeze(1)), v).squeeze(-1)
    weights = masked_softmax(scores, mask)
    context = torch.bmm(weights.unsqueeze(1).to(memory.dtype), memory).squeeze(1)
    out = torch.tanh(F.linear(torch.cat([context, h], -1), W_c, b_c)) * keep
    gh = F.linear(h, W_hh, b_hh).float()
    return h, out, gh


def _make(compiled: bool):
    body = torch.compile(_body, dynamic=True) if compiled else _body

    def unroll(self, tgt_in, state, mem, keep_attention=True):
        B, T = tgt_in.shape
        w = mem.weights
        cell, Dh = self.cells[0], self.hidden
        sc = self.scorer
        O = self.pre_output.weight.size(0)
        y, gates, _ = self._embed_inputs(tgt_in, w)
        gates_t = gates.unbind(1)
        p = self.dropout.p if self.training else 0.0
        dt = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
        keep = ((torch.rand(T, B, O) >= p).to(dt) * (1.0 / (1.0 - p))).unbind(0)
        h = state.hidden[0].float()
        feed = state.feed
        gh = F.linear(h, w.hh, cell.bias_hh).float()
        Wq = D.cast_for_autocast(sc.W.weight)
        vv = D.cast_for_autocast(sc.v.weight)
        outs = []
        for t in range(T):
            h, feed, gh = body(gates_t[t], feed, gh, h, w.feed, w.hh, cell.bias_hh, Wq, vv,
                               mem.keys, mem.memory, mem.mask, w.pre, self.pre_output.bias,
                               keep[t], Dh)
            outs.append(feed)
        return torch.stack(outs, 1), None, None
    return unroll


def _set(f):
    return (lambda model: setattr(D.Decoder, "unroll", f)), (lambda model: setattr(D.Decoder, "unroll", NOW))


VARIANTS = {"now": _set(NOW), "eager body": _set(_make(False)), "compiled body": _set(_make(True))}
# Tried 2026-12-01 14:19-14:25, 2-core AMD EPYC (AVX-512, avx512_bf16), 2 threads, nothing
# else running, nmt 493eb53, torch 2.13.0+cpu, g++ 12.2 (target tokens/s):
# PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 20 benchmarks/speed/ab/compiled_step.py
# now: 4147, eager body: 4325, compiled body: 2030 (recompiling inside the timed steps)
# the same with 30 steps: now: 4284, eager body: 4343, compiled body: 4210
# WARM=12 PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/compiled_step.py
# now: 4079, eager body: 4152, compiled body: 3977 (after 12 warm-up batches)
# WARM=12 PRECISION=fp32 python benchmarks/speed/ab/step_ab.py 20 benchmarks/speed/ab/compiled_step.py
# now: 2389, eager body: 2329, compiled body: 1520
# Not kept: compiling is no faster in bf16 and slower in fp32. (The two runs above were made
# with an equivalent loop outside step_ab.py, before WARM was added to it; step_ab.py itself,
# 14:36: now: 4107, eager body: 4139, compiled body: 4001.)
