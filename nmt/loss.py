"""The training loss: summed, optionally label-smoothed cross-entropy over target pieces.

One autograd function instead of ``F.cross_entropy`` (log_softmax, then nll_loss): the
output layer's logits are the largest tensor of a training step (target tokens x V), and
the composite form writes a log-probability copy of them, then in the backward pass fills
a zero tensor of the same size for nll_loss's gradient before log_softmax's backward reads
both. Here the forward pass only reads the logits (log-sum-exp and the target's logit) and
the backward pass writes the gradient once: ``softmax(x) - q`` scaled, with q the target
distribution. Same value and gradient as ``F.cross_entropy(..., reduction="sum",
ignore_index=PAD, label_smoothing=eps)`` up to float rounding (tests/test_loss.py).
"""

from __future__ import annotations

import torch

from nmt.vocab import PAD


class _SummedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
        x = logits.float()  # under autocast the logits may be bf16/fp16; the loss is fp32
        lse = torch.logsumexp(x, dim=-1)  # (N,)
        real = target != PAD
        nll = lse - x.gather(1, target[:, None]).squeeze(1)
        per_token = nll if eps == 0 else (1 - eps) * nll + eps * (lse - x.mean(dim=-1))
        ctx.save_for_backward(logits, target, real)
        ctx.eps = eps
        return (per_token * real).sum()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        logits, target, real = ctx.saved_tensors
        eps, V = ctx.eps, logits.size(-1)
        g = torch.softmax(logits.float(), dim=-1)  # (N, V), written once
        g.scatter_add_(1, target[:, None], g.new_full((g.size(0), 1), -(1 - eps)))
        if eps:
            g.sub_(eps / V)
        g.mul_((grad * real)[:, None])  # PAD rows get exactly 0
        return g.to(logits.dtype), None, None


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
