"""Training step: the output layer and loss on every (B*T) row, padding included (before
2026-12-01-b), against the real target tokens only (nmt.model.seq2seq.Seq2Seq.forward now).
  python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/real_rows.py

Switch flipped: nmt.model.seq2seq.Seq2Seq.forward (forward_variants.py), put back after
each step."""
from ab.forward_variants import NOW, variants

import nmt.model.seq2seq as M


def _all_rows(self, src, src_len, tgt_in, tgt_out, label_smoothing=0.0):
    mem, state = self.encode(src, src_len)
    pre, _, _ = self.decoder.unroll(tgt_in, state, mem, keep_attention=False)
    logits = self.generator(pre)
    return M.summed_cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1),
                                  label_smoothing, overwrite_logits=True)


VARIANTS = variants({"every row, padding included (before)": _all_rows,
                     "real target tokens only (now)": NOW})
