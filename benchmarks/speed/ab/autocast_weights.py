"""bf16 autocast training: what the decoder reads at every step (the weight views W_ih's
feed share, W_hh and the pre-output weight, transposed, and the encoder memory) cast to
bf16 once per batch (now, nmt.ops.precision.cast_for_autocast), against leaving them fp32, so
that autocast casts them at every decoder step, forward and backward (before). Run with
PRECISION=bf16:
  PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/autocast_weights.py

Switches flipped: nmt.model.decoder.cast_for_autocast, the name Decoder.start and
Decoder.step_weights call (the identity for "before"), and, for both variants, the
decoder's defer_weight_grads (False during the step, put back after it): deferred weight
gradients (35623e3, after this A/B was made) need the step weights cast, and without them
both variants take autograd's per-step products, as when this A/B was made."""
import nmt.model.decoder as D
from nmt.ops.precision import cast_for_autocast


def _set(f):
    def enter(model):
        D.cast_for_autocast = f
        model.decoder.defer_weight_grads = False

    def leave(model):
        D.cast_for_autocast = cast_for_autocast
        model.decoder.defer_weight_grads = True
    return enter, leave


VARIANTS = {"cast once per batch (now)": _set(cast_for_autocast),
            "cast every step (before)": _set(lambda t: t)}
