"""int8 matrix products for CPU search (``search.precision: int8``).

A search step's linear maps (the decoder's GRU and pre-output weights, and the output
layer, the largest) run as fbgemm's int8 products: each weight is rounded once to int8 per
output row (symmetric, scale ``max |row| / 127``); at each step the input rows are rounded
to uint8 on a fixed grid, the products summed in int32 and scaled back to fp32.
Everything else (the recurrent state, the attention, the softmax, the search's totals)
stays fp32.

**A fixed input grid, not the batch's range.** torch's dynamic quantization
(``quantized::linear_dynamic``) takes the uint8 grid from the minimum and maximum of the
whole batch, so a sentence's products, and its search, changed with the sentences beside
it. Every input of these products has a range known beforehand: the GRU state, the
context (a convex combination of GRU outputs), input feeding's and the pre-output's tanh
all lie in [-1, 1], and an embedding row within the table's largest magnitude. On a grid
fixed by that bound the rounding of a row depends on the row alone, and int32 sums are
exact in any order, so a sentence gets the same numbers alone or in any batch (no fp32
rescoring of the finished hypotheses is needed, unlike bf16's; nmt/inference/rescore.py).

**7 of the 8 bits.** Without AVX512-VNNI fbgemm multiplies uint8 by int8 pairs into int16
(``vpmaddubsw``), which saturates when the inputs use the full uint8 range: the output
layer's logits had a relative error of 0.17-0.21 at 8 bits against 0.01 with the inputs
on 0..127 (torch's ``reduce_range``, used here).

Which products run in int8 is decided per thread, as autocast is: :func:`int8_products`
turns it on for the searches of the current thread.

**Two libraries** (:func:`int8_engine`, ``NMT_INT8_ENGINE``): fbgemm (the default) runs on
AVX2 and AVX512-VNNI; oneDNN (``onednn``, torch's ``onednn::qlinear_pointwise``) also on the
AMX-INT8 tiles of Intel Xeons from Sapphire Rapids on, which fbgemm does not use. Both take
the same int8 weights and the same input grid, so the same int32 sums; their fp32 outputs
differ only in the rounding of the scaling back (7.6e-6 at most over 64 x 1,536 outputs of
tests/test_int8.py's kind), and each keeps a row's result independent of its batch.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Iterator

import torch

# the input grid: 0..126 with zero at 63, i.e. 7 bits (module docstring)
_ZERO_POINT = 63
_STEPS = 126

_state = threading.local()

ENGINES = ("fbgemm", "onednn")  # NMT_INT8_ENGINE's values, the default first


def int8_engine() -> str:
    """The library of the int8 products: ``$NMT_INT8_ENGINE`` (any case), else ``fbgemm``
    (also when it is set but empty; module docstring). Read when a weight is packed, so a
    search process started with the variable set uses it.

    Raises:
        ValueError: a value other than fbgemm or onednn, or onednn where this torch build
            has no oneDNN quantized linear (``torch.ops.onednn.qlinear_pointwise``).
    """
    # set but empty is unset, as shells write it; the case of the letters does not matter
    given = os.environ.get("NMT_INT8_ENGINE", "")
    name = given.strip().lower() or ENGINES[0]
    if name not in ENGINES:
        raise ValueError(f"NMT_INT8_ENGINE={given!r}: must be one of {', '.join(ENGINES)}")
    if name == "onednn" and not hasattr(torch.ops.onednn, "qlinear_pointwise"):
        raise ValueError("NMT_INT8_ENGINE=onednn: this torch build has no oneDNN int8 linear")
    return name


@contextlib.contextmanager
def int8_products(enabled: bool = True) -> Iterator[None]:
    """Within this block, on this thread, searches take their step products in int8
    (``enabled``) or not; the previous setting comes back on exit. Raises nothing."""
    before = getattr(_state, "on", False)
    _state.on = enabled
    try:
        yield
    finally:
        _state.on = before


def int8_enabled() -> bool:
    """Whether :func:`int8_products` is on for this thread."""
    return bool(getattr(_state, "on", False))


class Int8Weight:
    """A weight (N, K), as nn.Linear stores it, rounded to int8 per output row and packed
    for the int8 library, with the fixed input grid of its inputs' bound (module docstring).

    Args:
        weight: (N, K) float tensor (a parameter or a view of one); read, not kept.
        bound: the largest magnitude an input can have (1 for tanh, sigmoid-gated GRU
            states and their convex combinations); larger inputs would be clipped.
        engine: fbgemm or onednn; None: :func:`int8_engine`.

    Attributes:
        shape: (N, K). engine: the library its products run in.

    Raises:
        ValueError: as :func:`int8_engine`.
    """

    def __init__(self, weight: torch.Tensor, bound: float = 1.0, engine: str | None = None):
        self.engine = int8_engine() if engine is None else engine
        if self.engine not in ENGINES:
            raise ValueError(f"int8 engine {self.engine!r}: must be one of {', '.join(ENGINES)}")
        w = weight.detach().float().contiguous()
        n = w.size(0)
        # symmetric per row: zero stays exactly zero; an all-zero row gets scale 1
        scale = w.abs().amax(dim=1).div(127.0)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale)).double()
        with warnings.catch_warnings():
            # torch 2.13 marks quantized tensor constructors deprecated (pytorch issue
            # 184982); linear_prepack still takes nothing else
            warnings.simplefilter("ignore", UserWarning)
            wq = torch.quantize_per_channel(
                w, scale, torch.zeros(n, dtype=torch.long), 0, torch.qint8
            )
        self._x_scale = 2.0 * max(float(bound), 1e-12) / _STEPS
        self.shape = tuple(w.shape)
        # the library chosen once here, not at every step's product
        self._product = self._fbgemm if self.engine == "fbgemm" else self._onednn
        if self.engine == "fbgemm":
            self._packed = torch.ops.quantized.linear_prepack(wq, None)
            return
        # the same int8 rows as fbgemm's, packed for oneDNN (x_shape None: any row count)
        self._packed = torch.ops.onednn.qlinear_prepack(wq.int_repr(), None)
        self._w_scale = scale.float()
        self._w_zero = torch.zeros(n, dtype=torch.int32)

    def addmm(self, base: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        """``base + x @ W^T`` with int8 products; a row's result depends on that row alone.

        Args:
            base: (N,) bias or (B, N), or None. x: (B, K) rows within ``bound``.

        Returns:
            (B, N) fp32. Raises what the library raises for a K other than the weight's.
        """
        # the dtype checked here, not by .float(): a no-op call still lets go of the
        # interpreter lock, a wait where two search threads share it (search_processes.py)
        x = x if x.dtype == torch.float32 else x.float()
        y = self._product(x)
        return y if base is None else y.add_(base)

    def _fbgemm(self, x: torch.Tensor) -> torch.Tensor:
        """(B, K) fp32 rows -> (B, N) fp32 through fbgemm, the rounding to the grid in
        the same call."""
        return _LINEAR(x.contiguous(), self._x_scale, _ZERO_POINT, self._packed)

    def _onednn(self, x: torch.Tensor) -> torch.Tensor:
        """(B, K) fp32 rows -> (B, N) fp32 through oneDNN: the rows rounded to the grid
        (uint8, zero point 63), then the int8 product scaled back."""
        q = x.div(self._x_scale).round_().add_(_ZERO_POINT).clamp_(0, _STEPS).to(torch.uint8)
        return torch.ops.onednn.qlinear_pointwise(
            q,
            self._x_scale,
            _ZERO_POINT,
            self._packed,
            self._w_scale,
            self._w_zero,
            None,  # bias: added by addmm, as for fbgemm
            1.0,  # output scale and zero point: unused for an fp32 output
            0,
            torch.float32,
            "none",  # no fused post-op
            [],
            "",
        )


# quantize the input on the given grid, int8 product, fp32 out (fbgemm)
_LINEAR = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32
