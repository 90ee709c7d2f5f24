"""The fused training loss against F.cross_entropy: value and gradient."""

import pytest
import torch
import torch.nn.functional as F

from nmt.loss import summed_cross_entropy
from nmt.vocab import PAD


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_matches_cross_entropy_value_and_gradient(eps):
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(37, 50, generator=g) * 3).requires_grad_()
    target = torch.randint(4, 50, (37,), generator=g)
    target[::5] = PAD  # padding must add nothing and get no gradient
    ours = summed_cross_entropy(logits, target, eps)
    (g_ours,) = torch.autograd.grad(ours * 1.7, logits)
    ref = F.cross_entropy(logits, target, ignore_index=PAD, reduction="sum", label_smoothing=eps)
    (g_ref,) = torch.autograd.grad(ref * 1.7, logits)
    assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-4)
    assert torch.allclose(g_ours, g_ref, rtol=1e-5, atol=1e-6)
    assert g_ours[::5].abs().max() == 0


def test_gradcheck_double():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 9, generator=g, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([4, 0, 8, 5, 0, 7])

    def f(x):  # the function computes in fp32; compare in fp64 through a wrapper
        return summed_cross_entropy(x.float(), target, 0.1).double()

    assert torch.autograd.gradcheck(f, (logits,), eps=1e-3, atol=1e-3, rtol=1e-2)


def test_bf16_logits_give_fp32_loss_and_bf16_gradient():
    logits = torch.randn(4, 11).bfloat16().requires_grad_()
    target = torch.tensor([4, 5, 0, 10])
    loss = summed_cross_entropy(logits, target)
    assert loss.dtype == torch.float32
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16
