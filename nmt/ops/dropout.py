"""Dropout (Srivastava et al. 2014) whose CPU masks cost a fifth of torch's.

On a CPU, ``F.dropout`` draws its mask with ``bernoulli_``: one call of the generator per
element, about 6 ns each, single-threaded, then a division and a product. In a training
step of the reference model that was 4% of the bf16 step's op time
(benchmarks/speed/step_profile.py). Here the mask comes from 64-bit draws of the same
generator, each cut into four 16-bit uniform integers, compared with a threshold; the
product is ``x * keep * scale``, whose backward keeps only the 1-byte mask (F.dropout keeps
a mask of x's dtype). On CUDA, and for p within 2^-17 of 1, it is ``F.dropout`` itself.

The drop probability is p on a grid of 1/65,536: ``round(p * 65536) / 65536`` (0.2 is
0.199997), and the kept elements are scaled by the inverse of the exact keep probability,
so the expectation of the output is x, as in the paper's "inverted" dropout. Draws come
from torch's default generator, so ``torch.manual_seed`` makes the masks reproducible.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

GRID = 1 << 16  # the 16-bit uniform integers a mask compares


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> torch.Tensor:
    """A mask that keeps each element with probability ``1 - round(p * 65536) / 65536``.

    Args:
        shape: the mask's shape. p: drop probability in [0, 1]. device: where it lives.

    Returns:
        a bool tensor of ``shape``, True where the element is kept. Raises ValueError for
        p outside [0, 1].
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    n = math.prod(shape)
    # full-range draws (from the int64 minimum): all 64 bits uniform, so all four int16 lanes
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None)
    lanes = words.view(torch.int16)[:n].view(shape)  # uniform over [-32768, 32767]
    return lanes >= round(p * GRID) - GRID // 2


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``F.dropout(x, p, training)`` with the CPU mask of :func:`keep_mask` (module
    docstring): kept elements scaled by ``65536 / (65536 - round(p * 65536))``.

    Args:
        x: a tensor of any shape and float dtype, e.g. embeddings (B, S, E).
        p: drop probability in [0, 1]. training: off, x is returned as it is.

    Returns:
        a tensor shaped like x, in x's dtype; differentiable in x. Raises ValueError for
        p outside [0, 1].
    """
    if not training or p == 0.0:
        return x
    dropped = round(p * GRID)
    # p within 2^-17 of 1 drops every element on the grid: torch's own dropout then
    if x.device.type != "cpu" or dropped >= GRID or not x.is_floating_point():
        return F.dropout(x, p, training)
    keep = keep_mask(x.shape, p, x.device)
    # mul by the mask saves only the mask for its backward, so the in-place scale is safe
    return x.mul(keep).mul_(GRID / (GRID - dropped))


class Dropout(nn.Dropout):
    """``nn.Dropout`` with :func:`dropout`'s CPU mask; the same argument ``p`` and the same
    state (none), so checkpoints are unaffected. Input and output: any shape, e.g.
    (B, S, E)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x dropped out in training mode, x itself in eval mode."""
        return dropout(x, self.p, self.training)
