"""bf16 search: how many logits per row are recomputed in fp32 (nmt.model.seq2seq.EXACT_TOP): 16 against 11, the 2K + 1 beam 5 ranks."""
import nmt.model.seq2seq
def _set(n):
    def f():
        nmt.model.seq2seq.EXACT_TOP = n
    return f
VARIANTS = {"EXACT_TOP=16": _set(16), "EXACT_TOP=11": _set(11)}
