"""nmt.ops.topk.top_k: torch.topk's values through block maxima."""

import pytest
import torch

from nmt.ops.topk import BLOCK, KnownTop, row_max, top_k


@pytest.mark.parametrize("V", [8000, 8003, BLOCK * 12, 100, 7])
@pytest.mark.parametrize("k", [1, 11, 16])
def test_top_k_gives_torch_topk_values_and_matching_indices(V, k):
    k = min(k, V)
    g = torch.Generator().manual_seed(V * 31 + k)
    x = torch.randn(33, V, generator=g)
    # the largest values crowded into one block, the case block maxima must not lose
    x[0, :k] = 10 + torch.arange(k, dtype=torch.float)
    values, idx = top_k(x, k)
    ref = x.topk(k, dim=-1)
    assert torch.equal(values, ref.values)
    assert torch.equal(x.gather(1, idx), values)
    assert idx.dtype == torch.long and idx.shape == (33, k)


def test_top_k_keeps_the_values_of_ties_across_blocks():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 4, (20, 8000), generator=g).float()  # thousands of equal values
    for k in (1, 11):
        values, idx = top_k(x, k)
        assert torch.equal(values, x.topk(k, dim=-1).values)
        assert torch.equal(x.gather(1, idx), values)
        assert all(len(set(row)) == k for row in idx.tolist())  # no column twice


def test_top_k_works_on_bf16():
    x = torch.randn(8, 8000).to(torch.bfloat16)
    values, idx = top_k(x, 16)
    assert torch.equal(values, x.topk(16, dim=-1).values)


def test_top_k_takes_known_columns_only_where_every_row_leads_with_k_of_them():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 8000, generator=g)
    ref = x.topk(16, dim=-1)
    # the true top 16, and a lead of 16 in every row: read, not searched again
    known = KnownTop(ref.indices, torch.full((6,), 16))
    values, idx = top_k(x, 11, known)
    assert torch.equal(idx, ref.indices[:, :11]) and torch.equal(values, ref.values[:, :11])
    # wrong columns that claim a lead are believed: the proof that nothing is searched
    wrong = KnownTop(ref.indices.flip(1), torch.full((6,), 16))
    assert torch.equal(top_k(x, 3, wrong)[1], ref.indices[:, -3:].flip(1))
    # one row whose lead is short of k: every row is searched, and the wrong columns lost
    short = KnownTop(wrong.cols, torch.tensor([16, 16, 2, 16, 16, 16]))
    values, idx = top_k(x, 3, short)
    assert torch.equal(values, ref.values[:, :3]) and torch.equal(x.gather(1, idx), values)
    # k beyond the known columns: searched
    assert torch.equal(top_k(x, 17, known)[0], x.topk(17, dim=-1).values)


def test_known_top_rows_selects_rows_of_both_tensors():
    known = KnownTop(torch.arange(12).view(4, 3), torch.tensor([3, 2, 1, 0]))
    picked = known.rows(torch.tensor([2, 2, 0]))
    assert picked.cols.tolist() == [[6, 7, 8], [6, 7, 8], [0, 1, 2]]
    assert picked.lead.tolist() == [1, 1, 3]


def test_top_k_reads_views_at_an_offset_and_non_contiguous_matrices():
    """The blocks are copied from a strided view of the storage: a matrix that starts
    inside a larger one, or a transposed one, must give torch.topk's values too."""
    g = torch.Generator().manual_seed(5)
    big = torch.randn(50, 8003, generator=g)
    for x in (big[7:40], big[7:40, 3:], big.t().contiguous().t()[5:9]):
        values, idx = top_k(x, 11)
        assert torch.equal(values, x.topk(11, dim=-1).values)
        assert torch.equal(x.gather(1, idx), values)


@pytest.mark.parametrize("V", [7931, 8000, 8003, BLOCK * 4, BLOCK * 4 - 1, 7])
@pytest.mark.parametrize("N", [1, 15, 16, 64])
def test_row_max_is_max_with_the_lowest_column_among_equals(V, N):
    g = torch.Generator().manual_seed(V + N)
    for x in (
        torch.randn(N, V, generator=g),
        torch.randint(0, 3, (N, V), generator=g).float(),  # ties everywhere
    ):
        ref = x.max(dim=-1)
        values, idx = row_max(x)
        assert torch.equal(values, ref.values) and torch.equal(idx, ref.indices)
    # the largest value only in the last, partial block, or twice across blocks
    x = torch.zeros(N, V)
    x[:, V - 1] = 1.0
    x[0, V // 2] = x[0, V - 1] = 2.0
    assert torch.equal(row_max(x)[1], x.max(dim=-1).indices)


def test_row_max_reads_a_view_at_an_offset():
    big = torch.randn(40, 8100)
    x = big[3:, 50:7981]  # strided rows, a partial last block
    ref = x.max(dim=-1)
    values, idx = row_max(x)
    assert torch.equal(values, ref.values) and torch.equal(idx, ref.indices)
