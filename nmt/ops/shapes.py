"""Few matrix shapes for oneDNN: row counts rounded up, where a new shape costs a primitive.

On a CPU, bf16/fp16 matrix products go through oneDNN, which builds (JIT-compiles) one
primitive per distinct shape and keeps the last 1,024 in a cache. A training step's largest
products have a row count that changes with every batch (the N real target tokens of the
output layer, the T*B rows of the deferred weight gradients), so in bf16 nearly every batch
brought new shapes, each costing milliseconds to build (up to hundreds of milliseconds for
the output layer's 8000-row weight gradient), while fp32 goes through MKL and pays nothing
of the kind: results/speed/2026-12-06-amx/README.md. Rounding those row counts up to a
multiple of :data:`ROW_MULTIPLE` with rows that contribute zero leaves a few dozen shapes,
built once in the first batches, for at most ``ROW_MULTIPLE - 1`` extra rows per product
(about 3% of a 2,000-token batch).

With ``train.batch_multiple`` set, the training batch itself is padded as well
(:meth:`nmt.data.batches.Batch.padded`): its B sentences (the row count of every decoder
step's products) up to that multiple with dummy pairs, and its source width S (the width
of the attention products) up to a multiple of :data:`SOURCE_MULTIPLE`. nn.GRU's packed
input projection (one row per real source token) keeps its varying row count.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ROW_MULTIPLE = 64
SOURCE_MULTIPLE = 8  # source width S of a padded training batch (train.batch_multiple)


def stable_rows_wanted(device: torch.device) -> bool:
    """Whether products on ``device`` should get rounded row counts: on a CPU under bf16/fp16
    autocast (oneDNN), not in fp32 (MKL builds nothing per shape) nor on CUDA. Raises
    nothing."""
    return device.type == "cpu" and torch.is_autocast_enabled("cpu")


def rounded_rows(n: int, multiple: int | None = None) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (default :data:`ROW_MULTIPLE`; 0 stays 0).

    Raises:
        ValueError: ``multiple`` below 1 or ``n`` negative.
    """
    multiple = ROW_MULTIPLE if multiple is None else multiple
    if multiple < 1 or n < 0:
        raise ValueError(f"rounded_rows: need n >= 0 and multiple >= 1, got {n}, {multiple}")
    return -(-n // multiple) * multiple


def pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` (N, K) with zero rows appended up to ``rows`` (>= N) rows: (rows, K), same dtype
    and device; ``x`` itself when it already has them. Raises nothing for any N, K."""
    extra = rows - x.size(0)
    return x if extra <= 0 else F.pad(x, (0, 0, 0, extra))
