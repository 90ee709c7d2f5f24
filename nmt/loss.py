"""The training loss: summed, optionally label-smoothed cross-entropy over target pieces.

One autograd function instead of ``F.cross_entropy`` (log_softmax, then nll_loss): the
output layer's logits are the largest tensor of a training step (target tokens x V), and in
the composite form's backward pass nll_loss first fills a zero tensor of that size with
its gradient, which log_softmax's backward then reads beside its saved output. Here the
forward pass is one fused log_softmax and a gather, and the backward pass writes the
gradient once, ``softmax(x) - q`` scaled (q the target distribution), from the saved
log-probabilities. Same value and gradient as ``F.cross_entropy(..., reduction="sum",
ignore_index=PAD, label_smoothing=eps)`` up to float rounding (tests/test_loss.py).
"""

from __future__ import annotations

import torch

from nmt.vocab import PAD


class _SummedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
        # under autocast the logits may be bf16/fp16; the loss is computed in fp32
        logp = torch.log_softmax(logits.float(), dim=-1)  # (N, V), one fused pass
        real = target != PAD
        nll = -logp.gather(1, target[:, None]).squeeze(1)
        per_token = nll if eps == 0 else (1 - eps) * nll - eps * logp.mean(dim=-1)
        ctx.save_for_backward(logp, target, real)
        ctx.eps, ctx.dtype = eps, logits.dtype
        return (per_token * real).sum()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        logp, target, real = ctx.saved_tensors
        eps, V = ctx.eps, logp.size(-1)
        g = logp.exp()  # softmax, written once: (N, V)
        g.scatter_add_(1, target[:, None], g.new_full((g.size(0), 1), -(1 - eps)))
        if eps:
            g.sub_(eps / V)
        g.mul_((grad * real)[:, None])  # PAD rows get exactly 0
        return g.to(ctx.dtype), None, None


def summed_cross_entropy(logits: torch.Tensor, target: torch.Tensor,
                         label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy in nats summed over the real (non-PAD) targets.

    With label smoothing eps (Szegedy et al. 2016, sec. 7) the target distribution is
    ``(1 - eps) one_hot(y) + eps / V``, so each token's loss is
    ``(1 - eps) (lse(x) - x_y) + eps (lse(x) - mean(x))``, as in ``F.cross_entropy``.

    Args:
        logits: (N, V) unnormalised scores (any float dtype; the loss is computed in fp32).
        target: (N,) target ids; PAD positions add nothing and get a zero gradient.
        label_smoothing: eps in [0, 1).

    Returns:
        scalar fp32 tensor: the summed loss.
    """
    return _SummedCrossEntropy.apply(logits, target, float(label_smoothing))
