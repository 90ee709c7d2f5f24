"""int8 matrix products for CPU search (``search.precision: int8``).

A search step's linear maps (the decoder's GRU and pre-output weights, and the output
layer, the largest) run as fbgemm's dynamically quantized products: each weight is
rounded once to int8 per output row (symmetric, scale ``max |row| / 127``); at each step
the activations are rounded to uint8 with the range of that step's rows, and the int32
sums are scaled back to fp32. Everything else (the recurrent state, the attention, the
softmax, the search's totals) stays fp32.

The activations use 7 of their 8 bits (``reduce_range``): without AVX512-VNNI fbgemm
multiplies uint8 by int8 pairs into int16 (``vpmaddubsw``), which saturates at full range
(a relative error of 0.2 in the output layer's logits against 0.02 with 7 bits).

Which products run in int8 is decided per thread, as autocast is: :func:`int8_products`
turns it on for the searches of the current thread.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

import torch

# fbgemm without VNNI saturates at the full uint8 range (module docstring)
REDUCE_RANGE = True

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
    for fbgemm's dynamically quantized product.

    Args:
        weight: (N, K) float tensor (a parameter or a view of one); read, not kept.

    Attributes:
        shape: (N, K).
    """

    def __init__(self, weight: torch.Tensor):
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
        self.shape = tuple(w.shape)

    def addmm(self, base: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        """``base + x @ W^T`` with int8 products.

        Args:
            base: (N,) bias or (B, N), or None. x: (B, K) fp32 rows.

        Returns:
            (B, N) fp32. Raises what fbgemm raises for a K other than the weight's.
        """
        y = torch.ops.quantized.linear_dynamic(x.float().contiguous(), self._packed, REDUCE_RANGE)
        return y if base is None else y.add_(base)


def check_int8_device(device: torch.device, option: str) -> None:
    """Raise :class:`nmt.ops.precision.PrecisionError` naming ``option`` unless ``device``
    is a CPU: fbgemm's int8 products run on x86 CPUs only."""
    if device.type != "cpu":
        from nmt.ops.precision import PrecisionError

        raise PrecisionError(
            f"{option}: int8 runs on a CPU only (this run uses {device}); "
            "use fp32, bf16, fp16 or auto"
        )
