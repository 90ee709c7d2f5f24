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
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

import torch

# the input grid: 0..126 with zero at 63, i.e. 7 bits (module docstring)
_ZERO_POINT = 63
_STEPS = 126

_state = threading.local()


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
    for fbgemm, with the fixed input grid of its inputs' bound (module docstring).

    Args:
        weight: (N, K) float tensor (a parameter or a view of one); read, not kept.
        bound: the largest magnitude an input can have (1 for tanh, sigmoid-gated GRU
            states and their convex combinations); larger inputs would be clipped.

    Attributes:
        shape: (N, K).
    """

    def __init__(self, weight: torch.Tensor, bound: float = 1.0):
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
        self._packed = torch.ops.quantized.linear_prepack(wq, None)
        self._x_scale = 2.0 * max(float(bound), 1e-12) / _STEPS
        self.shape = tuple(w.shape)

    def addmm(self, base: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        """``base + x @ W^T`` with int8 products; a row's result depends on that row alone.

        Args:
            base: (N,) bias or (B, N), or None. x: (B, K) rows within ``bound``.

        Returns:
            (B, N) fp32. Raises what fbgemm raises for a K other than the weight's.
        """
        # the dtype checked here, not by .float(): a no-op call still lets go of the
        # interpreter lock, a wait where two search threads share it (search_processes.py)
        x = x if x.dtype == torch.float32 else x.float()
        y = _LINEAR(x.contiguous(), self._x_scale, _ZERO_POINT, self._packed)
        return y if base is None else y.add_(base)


# quantize the input on the given grid, int8 product, fp32 out (fbgemm)
_LINEAR = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32
