"""The fused training loss against F.cross_entropy: value and gradient."""

import pytest
import torch
import torch.nn.functional as F

from nmt.data.vocab import PAD
from nmt.model.loss import summed_cross_entropy


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
    assert logits.grad is not None
    assert logits.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_chunks_and_overwrite_give_the_same_loss_and_gradient(monkeypatch, eps):
    import nmt.model.loss

    monkeypatch.setattr(nmt.model.loss, "CHUNK_ELEMENTS", 7 * 50)  # 7 rows a chunk: 6 chunks
    g = torch.Generator().manual_seed(2)
    base = torch.randn(40, 50, generator=g) * 4
    target = torch.randint(4, 50, (40,), generator=g)
    target[3::7] = PAD
    ref_x = base.clone().requires_grad_()
    ref = F.cross_entropy(ref_x, target, ignore_index=PAD, reduction="sum", label_smoothing=eps)
    (g_ref,) = torch.autograd.grad(ref, ref_x)
    leaf = base.clone().requires_grad_()
    logits = leaf * 1.0  # a non-leaf, as the generator's output is
    ours = summed_cross_entropy(logits, target, eps, overwrite_logits=True)
    (g_ours,) = torch.autograd.grad(ours, leaf)
    assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-4)
    assert torch.allclose(g_ours, g_ref, rtol=1e-5, atol=1e-6)
    # the gradient took the logits' memory: they now hold softmax - q, not the scores
    assert torch.allclose(logits.detach(), g_ref, atol=1e-6)
    assert torch.equal(leaf.detach(), base)  # the caller's own tensor is untouched


def test_a_target_far_below_the_best_piece_gives_a_finite_exact_loss():
    # p_y = exp(-200) underflows fp32: the loss must still be 200 nats, not inf
    logits = torch.zeros(2, 6)
    logits[0, 5] = 200.0
    logits.requires_grad_()
    target = torch.tensor([4, 4])
    ours = summed_cross_entropy(logits, target)
    ref = F.cross_entropy(logits, target, reduction="sum")
    assert torch.isfinite(ours)
    assert torch.allclose(ours, ref, rtol=1e-5)


def test_backward_scales_by_the_incoming_gradient_and_can_run_twice():
    logits = torch.randn(5, 9, generator=torch.Generator().manual_seed(3)).requires_grad_()
    target = torch.tensor([4, 5, 6, 7, 8])
    loss = summed_cross_entropy(logits, target)
    (g1,) = torch.autograd.grad(loss, logits, retain_graph=True)
    (g3,) = torch.autograd.grad(loss * 3.0, logits)
    assert torch.allclose(g3, 3 * g1)
