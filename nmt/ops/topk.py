"""The k largest entries of each row of a wide matrix, for search steps over the vocabulary."""

from __future__ import annotations

import torch

BLOCK = 64  # columns per block; see top_k


def top_k(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``x.topk(k, dim=-1)`` of a (N, V) matrix, through block maxima.

    The row is cut into blocks of ``BLOCK`` columns; the k largest entries lie in the k
    blocks with the largest maxima (a block outside them has k blocks whose maxima are at
    least its own), so ``torch.topk`` runs over the block maxima (N, V/BLOCK) and then over
    the k*BLOCK columns of those blocks. The values are torch.topk's, largest first; among
    equal values the indices may differ, as torch.topk leaves them in no set order either.
    torch.topk reads a row of 8,000 log-probabilities slowly; this took about half its time
    for beam search's k (results/speed/2026-12-01-e/README.md).

    Args:
        x: (N, V) floats. k: 1..V.

    Returns:
        values (N, k) and indices (N, k), int64. Raises what torch.topk raises for k > V.
    """
    N, V = x.shape
    n_blocks = V // BLOCK
    if n_blocks <= k:
        return x.topk(k, dim=-1)
    block_max = x[:, : n_blocks * BLOCK].view(N, n_blocks, BLOCK).amax(dim=-1)  # (N, nb)
    best = block_max.topk(k, dim=-1).indices  # (N, k)
    cols = (best[:, :, None] * BLOCK + torch.arange(BLOCK, device=x.device)).view(N, k * BLOCK)
    if n_blocks * BLOCK < V:  # the last, partial block is always searched
        tail = torch.arange(n_blocks * BLOCK, V, device=x.device).expand(N, -1)
        cols = torch.cat([cols, tail], dim=1)
    values, at = x.gather(1, cols).topk(k, dim=-1)
    return values, cols.gather(1, at)
