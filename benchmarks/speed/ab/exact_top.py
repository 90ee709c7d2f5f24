"""bf16 search: how many logits per row are recomputed in fp32: 16 against 11, the 2K + 1
beam 5 ranks (kept 16).
  python benchmarks/speed/ab/dec_ab.py 5 N ROUNDS benchmarks/speed/ab/exact_top.py CKPT DATA_DIR
(with a bf16 search.precision in the checkpoint's config, or on a CPU where auto is bf16).

Switch flipped: the module global nmt.model.seq2seq.EXACT_TOP, which
Seq2Seq.exact_top_log_probs reads at every step."""
import nmt.model.seq2seq


def _set(n):
    def f():
        nmt.model.seq2seq.EXACT_TOP = n
    return f


VARIANTS = {"EXACT_TOP=16": _set(16), "EXACT_TOP=11": _set(11)}
