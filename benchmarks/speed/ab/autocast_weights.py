"""bf16 autocast training: what the decoder reads at every step (the weight views W_ih's
feed share, W_hh and the pre-output weight, transposed, and the encoder memory) cast to
bf16 once per batch (now, nmt.ops.precision.cast_for_autocast), against leaving them fp32, so
that autocast casts them at every decoder step, forward and backward (before). Run with
PRECISION=bf16."""
import nmt.model.decoder as D
from nmt.ops.precision import cast_for_autocast


def _set(f):
    def enter(model):
        D.cast_for_autocast = f
    return enter, lambda model: None


VARIANTS = {"cast once per batch (now)": _set(cast_for_autocast),
            "cast every step (before)": _set(lambda t: t)}
