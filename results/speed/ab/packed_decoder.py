"""Training step: the decoder unrolled over every (B, T) position with the output layer on
the real rows (Seq2Seq.forward), against a packed unroll (tried 2026-12-01, not kept: no
gain, results/speed/2026-12-01-c/ab_packed_decoder.txt): step t runs only the b_t sentences
whose target has a position t (sorted by target length, as pack_padded_sequence does),
outputs already in the real tokens' order."""
import torch

import nmt.model as M
from ab.forward_variants import NOW, variants
from nmt.decoder import DecoderState, Memory



def _rows(m: Memory, b: int) -> Memory:
    f = lambda t: None if t is None else t[:b]  # noqa: E731
    return Memory(f(m.memory), f(m.keys), f(m.mask), f(m.fixed_context))


def _packed(self, src, src_len, tgt_in, tgt_out, label_smoothing=0.0):
    mem, state = self.encode(src, src_len)
    real = tgt_out != M.PAD
    order = real.sum(1).argsort(descending=True, stable=True)
    mem, state = mem.index_select(order), state.index_select(order)
    tgt_in, tgt_out, real = tgt_in[order], tgt_out[order], real[order]
    active = real.sum(0).tolist()  # b_t, non-increasing
    dec, B = self.decoder, tgt_in.size(0)
    y, gates, out_y = dec._embed_inputs(tgt_in)
    ys, gates_t = y.unbind(1), gates.unbind(1)
    outs_y = [None] * len(active) if out_y is None else out_y.unbind(1)
    recurrent = dec._recurrent_weights()
    outs, rows, cur = [], B, mem
    for t, b in enumerate(active):
        if b == 0:
            break
        if b < rows:  # sentences from row b on have ended
            rows, cur = b, _rows(mem, b)
            state = DecoderState(state.hidden[:, :b],
                                 None if state.feed is None else state.feed[:b], state.t)
        y_t, g_t, o_t = ys[t], gates_t[t], outs_y[t]
        if b < B:
            y_t, g_t, o_t = y_t[:b], g_t[:b], None if o_t is None else o_t[:b]
        step = dec._step(y_t, g_t, o_t, state, cur, recurrent)
        state = step.state
        outs.append(step.pre_output)
    pre, target = torch.cat(outs, 0), tgt_out.t()[real.t()]
    return M.summed_cross_entropy(self.generator(pre), target, label_smoothing,
                                  overwrite_logits=True)


VARIANTS = variants({"padded unroll, real rows to the output layer (now)": NOW,
                     "packed unroll": _packed})
