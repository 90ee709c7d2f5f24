"""nmt.ops.topk.top_k: torch.topk's values through block maxima."""

import pytest
import torch

from nmt.ops.topk import BLOCK, top_k


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
