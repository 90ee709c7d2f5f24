"""Training step, reference architecture (luong order, additive attention, one layer), on
today's code: each decoder step's weight gradients as T small GEMMs plus T gradient adds
(autograd, now) against one GEMM per weight over all steps after the unroll's backward.
The step's four weight matrices (the GRU's feed and recurrent weights, the query
projection W, the attentional layer W_c), as the batch's StepWeights hold them (cast once
under autocast), are used detached inside the loop; each step's backward stashes its
(input, output gradient) pair, and a node placed before the loop returns G^T X for each
weight once all steps are done. The 2026-12-01-c version (deferred_wgrad.py) ran on fp32
only and on an older tree. Run with PRECISION=bf16 or fp32.
The runs below were made with this machinery written out in this file; once it was kept
as nmt/ops/weight_grads.py (the same products, plus clearing unused pairs at the end of a
backward pass), this file calls that module instead.
  PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 40 benchmarks/speed/ab/deferred_wgrad_bf16.py

Switch flipped: nmt.model.seq2seq.Seq2Seq.forward, put back after each step. Since 35623e3
"now" defers the feed, hh and pre gradients itself (the decoder's defer_weight_grads), so
today this compares that against deferring W too; defer_switch.py is the A/B of the kept
version."""
import torch

import nmt.model.seq2seq as M
from nmt.model.attention import masked_softmax, tanh_
from nmt.ops.precision import cast_for_autocast
from nmt.ops.weight_grads import defer_weight_grads, deferred_linear

NOW = M.Seq2Seq.forward


def _deferred(self, src, src_len, tgt_in, tgt_out, label_smoothing=0.0):
    dec = self.decoder
    mem, state = dec.start(self.encoder(src, src_len))
    cell, Dh = dec.cells[0], dec.hidden
    sw = mem.weights
    y, gates, _ = dec._embed_inputs(tgt_in, sw)
    w_q = cast_for_autocast(dec.scorer.W.weight)
    (wf, wh, wq, wc), slots, (h0, feed0, memory, keys) = defer_weight_grads(
        [sw.feed, sw.hh, w_q, sw.pre], [state.hidden[0], state.feed, mem.memory, mem.keys])
    h, feed, outs = h0.float(), feed0, []
    for g_t in gates.unbind(1):
        gi = deferred_linear(g_t, feed, wf, slots[0]).float()
        gh = deferred_linear(cell.bias_hh, h, wh, slots[1]).float()
        gi_rz, gi_n = gi.split((2 * Dh, Dh), dim=1)
        gh_rz, gh_n = gh.split((2 * Dh, Dh), dim=1)
        r, z = torch.sigmoid(gi_rz + gh_rz).split(Dh, dim=1)
        n = torch.tanh(gi_n + r * gh_n)
        h = torch.lerp(n, h, z)
        q = deferred_linear(None, h, wq, slots[2])
        scores = dec.scorer.v(tanh_(keys + q.unsqueeze(1))).squeeze(-1)
        weights = masked_softmax(scores, mem.mask)
        context = torch.bmm(weights.unsqueeze(1).to(memory.dtype), memory).squeeze(1)
        out = torch.tanh(deferred_linear(dec.pre_output.bias,
                                         torch.cat([context, h.to(context.dtype)], -1), wc, slots[3]))
        feed = out  # input feeding takes h~_t before dropout, as Decoder._step
        outs.append(dec.dropout(out))
    pre = torch.stack(outs, dim=1)
    target = tgt_out.reshape(-1)
    rows = (target != M.PAD).nonzero().squeeze(1)
    logits = self.generator(pre.reshape(-1, pre.size(-1)).index_select(0, rows))
    return M.summed_cross_entropy(logits, target.index_select(0, rows), label_smoothing,
                                  overwrite_logits=True)


def _set(f):
    return (lambda model: setattr(M.Seq2Seq, "forward", f)), (lambda model: setattr(M.Seq2Seq, "forward", NOW))


VARIANTS = {"per-step weight gradients (now)": _set(NOW),
            "deferred weight gradients": _set(_deferred)}
# 2026-12-01 14:37-14:42, 2-core AMD EPYC (AVX-512, avx512_bf16), 2 threads, nothing else
# running, nmt 7ca3804 (target tokens/s). Gradients checked first against autograd's on one
# batch without dropout: fp32 within 4.4e-7 relative, bf16 within 0.8% (bf16 rounding).
# PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 40 benchmarks/speed/ab/deferred_wgrad_bf16.py
# now: 4363, deferred: 4407 (+1.0%); again: 4034, 4110 (+1.9%)
# PRECISION=fp32 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/deferred_wgrad_bf16.py
# now: 2370, deferred: 2442 (+3.0%); again: 2412, 2484 (+3.0%)
# Not kept: a steady 3% in fp32 and 1-2% in bf16, for two custom autograd functions in the
# decoder's training path of every attention type and step order; 3x and 5x need 9.5% and 18%.
