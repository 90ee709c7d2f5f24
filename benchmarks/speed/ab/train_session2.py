"""Training step: this session's two changes (the chunked in-place loss, the additive
scorer's sigmoid-form tanh) together and one at a time, against both off (226fa03)."""
import sys, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import nmt.model.attention, nmt.model.seq2seq
from loss_at import old_loss

_old = old_loss()
_new = nmt.model.seq2seq.summed_cross_entropy

def _old_fn(logits, target, eps=0.0, overwrite_logits=False):
    return _old.summed_cross_entropy(logits, target, eps)

def _set(loss_new, tanh_new):
    def f(model):
        nmt.model.seq2seq.summed_cross_entropy = _new if loss_new else _old_fn
        nmt.model.attention.FAST_TANH = tanh_new
    return f

_reset = _set(True, True)
VARIANTS = {"both (this session)": (_set(True, True), _reset),
            "chunked loss only": (_set(True, False), _reset),
            "fast tanh only": (_set(False, True), _reset),
            "neither (226fa03)": (_set(False, False), _reset)}
