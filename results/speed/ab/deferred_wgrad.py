"""Training step: each decoder step's weight gradients as T small GEMMs (autograd, now)
against one GEMM per weight over all steps after the unroll's backward (what fused RNN
kernels do). Prototype for the reference architecture only (luong order, additive
attention, one layer, fp32): the step's four weight matrices (GRU feed and recurrent
weights, the query projection W, the attentional layer W_c) are used detached inside the
loop; each step's backward stashes its (input, output gradient) pair, and a node placed
before the loop (on every tensor the loop reads) returns X^T G for each weight once all
steps are done. Tried 2026-12-01, not kept: +2% and -2% in two runs
(results/speed/2026-12-01-c/ab_deferred_wgrad.txt)."""
import torch

import nmt.decoder as D
import nmt.model as M
from ab.forward_variants import NOW, variants
from nmt.attention import masked_softmax, tanh_



class _DeferredMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, base, x, w_t, pairs):
        ctx.save_for_backward(x, w_t)
        ctx.pairs, ctx.base_dim = pairs, None if base is None else base.dim()
        return torch.mm(x, w_t) if base is None else torch.addmm(base, x, w_t)

    @staticmethod
    def backward(ctx, g):
        x, w_t = ctx.saved_tensors
        ctx.pairs.append((x, g))
        gb = None
        if ctx.base_dim is not None and ctx.needs_input_grad[0]:
            gb = g.sum(0) if ctx.base_dim == 1 else g
        gx = g.mm(w_t.t()) if ctx.needs_input_grad[1] else None
        return gb, gx, None, None


class _Collect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, slots, n, *tensors):
        ctx.slots, ctx.n = slots, n
        return tuple(t.view_as(t) for t in tensors[:n])

    @staticmethod
    def backward(ctx, *grads):
        out = []
        for pairs in ctx.slots:
            X = torch.cat([x for x, _ in pairs])
            G = torch.cat([g for _, g in pairs])
            out.append(X.t().mm(G))
            pairs.clear()
        return (None, None, *grads, *out)


def _deferred(self, src, src_len, tgt_in, tgt_out, label_smoothing=0.0):
    mem, state = self.encode(src, src_len)
    dec = self.decoder
    cell, Dh = dec.cells[0], dec.hidden
    y, gates, _ = dec._embed_inputs(tgt_in)
    w_feed, w_hh = dec._recurrent_weights()
    w_q, w_c = dec.scorer.W.weight.t(), dec.pre_output.weight.t()
    slots = ([], [], [], [])
    h0, feed0, memory, keys = _Collect.apply(slots, 4, state.hidden[0], state.feed, mem.memory,
                                             mem.keys, w_feed, w_hh, w_q, w_c)
    wf, wh, wq, wc = (w.detach() for w in (w_feed, w_hh, w_q, w_c))
    h, feed, outs = h0, feed0, []
    for g_t in gates.unbind(1):
        gi = _DeferredMM.apply(g_t, feed, wf, slots[0])
        gh = _DeferredMM.apply(cell.bias_hh, h, wh, slots[1])
        gi_rz, gi_n = gi.split((2 * Dh, Dh), dim=1)
        gh_rz, gh_n = gh.split((2 * Dh, Dh), dim=1)
        r, z = torch.sigmoid(gi_rz + gh_rz).split(Dh, dim=1)
        n = torch.tanh(gi_n + r * gh_n)
        h = torch.lerp(n, h, z)
        q = _DeferredMM.apply(None, h, wq, slots[2])
        scores = dec.scorer.v(tanh_(keys + q.unsqueeze(1))).squeeze(-1)
        weights = masked_softmax(scores, mem.mask)
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
        out = torch.tanh(_DeferredMM.apply(dec.pre_output.bias, torch.cat([context, h], -1),
                                           wc, slots[3]))
        feed = out  # input feeding takes h~_t before dropout, as Decoder._step
        outs.append(dec.dropout(out))
    pre = torch.stack(outs, dim=1)
    target = tgt_out.reshape(-1)
    rows = (target != M.PAD).nonzero().squeeze(1)
    logits = self.generator(pre.reshape(-1, pre.size(-1)).index_select(0, rows))
    return M.summed_cross_entropy(logits, target.index_select(0, rows), label_smoothing,
                                  overwrite_logits=True)


VARIANTS = variants({"per-step weight gradients (now)": NOW,
                     "deferred weight gradients": _deferred})
