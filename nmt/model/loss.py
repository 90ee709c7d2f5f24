"""The training loss: summed, optionally label-smoothed cross-entropy over target pieces.

One autograd function instead of ``F.cross_entropy`` (log_softmax, then nll_loss). The
output layer's logits are the largest tensor of a training step (target tokens x V, 64 MB
for 2,000 tokens and 8k pieces), larger than the CPU's caches, so the cost of the loss is
the number of passes over it in memory, not arithmetic. The composite form makes about
six (log_softmax writes its output, nll_loss's backward fills a zero tensor of that size,
log_softmax's backward reads both and writes the gradient). Here the rows are taken in
chunks that stay in cache: each chunk's softmax, loss ``-log p_y`` and gradient
``softmax(x) - q`` (q the target distribution) are computed while it is there, so the logits
are read once and the gradient written once. With ``overwrite_logits`` the gradient is
written over the logits themselves (no second tensor of that size), for callers that do
not need them after the loss. The backward pass scales the stored gradient by the incoming
one, in place.
Same value and gradient as ``F.cross_entropy(..., reduction="sum", ignore_index=PAD,
label_smoothing=eps)`` up to float rounding (tests/test_loss.py).
"""

from __future__ import annotations

import torch

from nmt.data.vocab import PAD

# elements per chunk: 2^19 fp32 = 2 MiB, which stays in the caches (faster than larger
# chunks and than the unchunked log_softmax it replaced: results/speed/2026-11-30-b/README.md)
CHUNK_ELEMENTS = 1 << 19


class _SummedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, logits: torch.Tensor, target: torch.Tensor, eps: float, overwrite: bool
    ) -> torch.Tensor:
        N, V = logits.shape
        want_grad = ctx.needs_input_grad[0]
        # under autocast the logits are bf16/fp16: each chunk is taken to fp32 while it is in
        # cache, and its gradient written back in the logits' dtype (what the output layer's
        # backward GEMMs read). A whole fp32 copy and a whole cast back would each cost a
        # pass over memory plus page faults for a fresh tensor
        # (results/speed/2026-12-01-d/ab_bf16_loss_chunks.txt).
        x = logits.detach()
        grad = None
        if want_grad:
            grad = x if overwrite else torch.empty_like(x)
        real = target != PAD
        # bf16/fp16 logits are taken to fp32; fp32 and fp64 are computed in their own dtype
        acc = torch.promote_types(x.dtype, torch.float32)
        per_token = x.new_empty(N, dtype=acc)
        # chunks serve the CPU's caches; on a GPU one pass is better, and each chunk's
        # underflow check would be a device sync
        rows = max(1, CHUNK_ELEMENTS // max(V, 1)) if x.device.type == "cpu" else max(N, 1)
        for i in range(0, N, rows):
            xc, tc = x[i : i + rows].to(acc), target[i : i + rows, None]
            p = torch.softmax(xc, dim=1)  # (n, V): one fused kernel while the chunk is in cache
            # -log p_y is the loss; where p_y underflows (a target more than ~87 nats below
            # the best piece) it is computed from the logits instead
            p_y = p.gather(1, tc).squeeze(1)
            nll = -torch.log(p_y)
            tiny = p_y < 1e-30
            if bool(tiny.any()):
                nll = torch.where(
                    tiny, torch.logsumexp(xc, dim=1) - xc.gather(1, tc).squeeze(1), nll
                )
            if eps:
                lse = xc.gather(1, tc).squeeze(1) + nll
                nll = (1 - eps) * nll + eps * (lse - xc.mean(dim=1))
            per_token[i : i + rows] = nll
            if grad is not None:
                p.scatter_add_(1, tc, p.new_full(tc.shape, -(1 - eps)))
                if eps:
                    p.sub_(eps / V)
                grad[i : i + rows].copy_(p)  # over xc's own memory when overwriting fp32 logits
        if grad is not None:
            pad_rows = (~real).nonzero().squeeze(1)
            if pad_rows.numel():
                grad.index_fill_(0, pad_rows, 0.0)  # PAD rows get exactly 0
        # kept on ctx, not save_for_backward: with overwrite_logits it is the logits'
        # storage, whose version counter this function has just bumped on purpose
        ctx.grad_buffer, ctx.dtype, ctx.scale, ctx.handed_out = grad, logits.dtype, 1.0, False
        return (per_token * real).sum()

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        g = ctx.grad_buffer
        if g.device.type != "cpu":
            return (g * grad_out).to(ctx.dtype), None, None, None
        # On the CPU the first backward scales the buffer in place: a new tensor of its
        # size would cost a page-faulting allocation (29 ms a step for 64 MB, measured).
        # A later backward on a retained graph must not change what the first returned,
        # so it scales a copy.
        scale = float(grad_out)
        if ctx.handed_out:
            if ctx.scale == 0.0:
                raise RuntimeError(
                    "summed_cross_entropy: cannot backpropagate again after "
                    "a zero gradient (the stored gradient was scaled to 0)"
                )
            g = g * (scale / ctx.scale)
        elif scale != 1.0:
            g.mul_(scale)
            ctx.scale = scale
        ctx.handed_out = True
        return g.to(ctx.dtype), None, None, None


def summed_cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    label_smoothing: float = 0.0,
    overwrite_logits: bool = False,
) -> torch.Tensor:
    """Cross-entropy in nats summed over the real (non-PAD) targets.

    With label smoothing eps (Szegedy et al. 2016, sec. 7) the target distribution is
    ``(1 - eps) one_hot(y) + eps / V``, so each token's loss is
    ``(1 - eps) (lse(x) - x_y) + eps (lse(x) - mean(x))``, as in ``F.cross_entropy``.

    Args:
        logits: (N, V) unnormalised scores (any float dtype; the loss is computed in fp32
            for bf16/fp16 and fp32 logits, in fp64 for fp64 ones).
        target: (N,) target ids; PAD positions add nothing and get a zero gradient.
        label_smoothing: eps in [0, 1).
        overwrite_logits: when the loss needs a gradient, write it over ``logits`` (the
            caller must not read them afterwards). Saves a tensor of their size; the
            training step's logits are used for nothing else. The gradient has the
            logits' dtype (bf16 logits under autocast: a bf16 gradient).

    Returns:
        scalar tensor, fp32 (fp64 for fp64 logits): the summed loss.
    """
    return _SummedCrossEntropy.apply(logits, target, float(label_smoothing), bool(overwrite_logits))
