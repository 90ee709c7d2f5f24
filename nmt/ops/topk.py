"""The k largest entries of each row of a wide matrix, for search steps over the vocabulary."""

from __future__ import annotations

from dataclasses import dataclass

import torch

BLOCK = 64  # columns per block; see top_k


@dataclass(frozen=True)
class KnownTop:
    """Where each row's largest entries are, found before a top k is asked for (a
    reduced-precision search step finds them: :meth:`nmt.model.seq2seq.Seq2Seq.search_step`).

    Attributes:
        cols: (N, E) column ids, each row's in order of value, largest first.
        lead: (N,) how many leading columns of ``cols`` are certainly the row's largest:
            no column outside ``cols[n, :lead[n]]`` holds a larger value than
            ``x[n, cols[n, lead[n] - 1]]``.
    """

    cols: torch.Tensor
    lead: torch.Tensor

    def rows(self, idx: torch.Tensor) -> KnownTop:
        """The rows ``idx`` (N',) of both tensors."""
        return KnownTop(self.cols.index_select(0, idx), self.lead.index_select(0, idx))


def top_k(
    x: torch.Tensor, k: int, known: KnownTop | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x.topk(k, dim=-1)`` of a (N, V) matrix, through block maxima.

    With ``known`` whose ``lead`` is at least k in every row, the k columns come from it
    and only their values are read: a second search of the row would find the same ones.

    The row is cut into blocks of ``BLOCK`` columns; the k largest entries lie in the k
    blocks with the largest maxima (a block outside them has k blocks whose maxima are at
    least its own), so ``torch.topk`` runs over the block maxima (N, V/BLOCK) and then over
    the k*BLOCK numbers of those blocks, copied block by block. The values are torch.topk's,
    largest first; among equal values the indices may differ, as torch.topk leaves them in
    no set order either.
    torch.topk reads a row of 8,000 log-probabilities slowly; this took about half its time
    for beam search's k (results/speed/2026-12-01-e/README.md).

    Args:
        x: (N, V) floats. k: 1..V. known: where the row's largest entries are, when a
            step has found them (:class:`KnownTop`); used only where ``lead`` >= k in
            every row.

    Returns:
        values (N, k) and indices (N, k), int64. Raises what torch.topk raises for k > V.
    """
    if known is not None and k <= known.cols.size(1) and bool((known.lead >= k).all()):
        cols = known.cols[:, :k]
        return x.gather(1, cols), cols
    N, V = x.shape
    n_blocks = V // BLOCK
    if n_blocks <= k:
        return x.topk(k, dim=-1)
    x = x.contiguous()
    block_max = x[:, : n_blocks * BLOCK].view(N, n_blocks, BLOCK).amax(dim=-1)  # (N, nb)
    starts = block_max.topk(k, dim=-1).indices * BLOCK  # (N, k) first column of each block
    # every window of BLOCK consecutive numbers of x, as a view: copying whole blocks with
    # index_select took a quarter of the time of gathering their N*k*BLOCK columns one by one
    flat = x.view(-1)
    windows = flat.as_strided((flat.numel() - BLOCK + 1, BLOCK), (1, 1))
    at_row = torch.arange(N, device=x.device)[:, None] * V
    vals = windows.index_select(0, (starts + at_row).view(-1)).view(N, k * BLOCK)
    if n_blocks * BLOCK < V:  # the last, partial block is always searched, as block k
        vals = torch.cat([vals, x[:, n_blocks * BLOCK :]], dim=1)
        starts = torch.cat([starts, starts.new_full((N, 1), n_blocks * BLOCK)], dim=1)
    values, at = vals.topk(k, dim=-1)
    return values, starts.gather(1, at // BLOCK) + at % BLOCK


def row_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x.max(dim=-1)`` of a (N, V) matrix: each row's largest value (N,) and the lowest
    column holding it (N,), int64, through block maxima.

    The first block of ``BLOCK`` columns whose maximum equals the row's holds the row's first
    largest value, and only that block is searched for it. For 64 rows of 8,000 fp32
    log-probabilities on one EPYC thread this took 0.1 ms against ``max``'s 0.27 (a greedy
    fp32 step's largest single cost after its products; below 16 rows ``max`` is faster and
    is used). A row holding NaN gives NaN and a
    column of no meaning, as greedy search over it would. Raises nothing for N, V >= 1.
    """
    N, V = x.shape
    full = V // BLOCK
    if full < 4 or N < 16:  # few rows or columns: max's one pass costs less than the calls
        return x.max(dim=-1)
    block_max = x.unfold(1, BLOCK, BLOCK).amax(dim=-1)  # (N, full), a view of x's blocks
    if full * BLOCK < V:  # the last, partial block
        block_max = torch.cat([block_max, x[:, full * BLOCK :].amax(dim=-1, keepdim=True)], 1)
    best = block_max.amax(dim=-1, keepdim=True)  # (N, 1)
    first_block = (block_max == best).to(torch.uint8).argmax(dim=-1, keepdim=True)  # (N, 1)
    # a partial block's columns past the row's end repeat its last one, after the real ones
    cols = (first_block * BLOCK + torch.arange(BLOCK, device=x.device)).clamp_(max=V - 1)
    at = (x.gather(1, cols) == best).to(torch.uint8).argmax(dim=-1, keepdim=True)
    return best.squeeze(1), cols.gather(1, at).squeeze(1)
