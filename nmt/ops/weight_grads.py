"""Weight gradients of a recurrent loop as one matrix product per weight.

A weight used at each of T decoder steps gets, from autograd, T small products
``g_t^T x_t`` (rows: the batch's sentences, about 120 in training) added one by one into
its gradient. Fused RNN kernels such as cuDNN's compute the same sum once, ``G^T X`` over
all steps' rows stacked, and so does this module: :func:`defer_weight_grads` hands the loop
detached copies of the weights, each step's :func:`deferred_linear` stashes its input and
output gradient during the backward pass, and a node placed before the loop turns them
into one product per weight after the last step's backward.

Each backward pass uses only its own pairs: a pass that reaches the steps but not the
collecting node (``torch.autograd.grad`` of an embedding, ``backward(inputs=...)``) leaves
none behind for the next pass over a retained graph, and the pairs hold no graph, so an
unfinished pass leaks nothing. The backward passes are first-order only: asking for a
second derivative through them raises.

It is a little faster and never slower, at a few percent more training memory for the
pairs kept until the loop's end (docs/results.md, "Performance"; results/speed/2026-12-01-f/).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.autograd.function import once_differentiable

from nmt.ops.shapes import pad_rows, rounded_rows


class _DeferredLinear(torch.autograd.Function):
    """``base + x @ w^T`` with ``w`` detached; backward returns the gradients of ``base``
    and ``x`` and appends ``(x, g)`` to ``pending`` for ``w``'s."""

    @staticmethod
    def forward(ctx, base, x, w, pending):
        dt = w.dtype  # the autocast dtype when the weights were cast for it
        xc = x.to(dt)
        out = xc.mm(w.t()) if base is None else torch.addmm(base.to(dt), xc, w.t())
        ctx.save_for_backward(xc, w)
        ctx.pending, ctx.base_dim = pending, None if base is None else base.dim()
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        xc, w = ctx.saved_tensors
        if not ctx.pending:
            # the first pair of this backward pass: drop what the pass leaves unused
            # (torch's engine runs the callback when the pass ends; DDP uses the same hook)
            torch.autograd.Variable._execution_engine.queue_callback(ctx.pending.clear)
        # detached: a pair left behind must not keep the graph alive through ctx.pending
        ctx.pending.append((xc.detach(), g.detach()))
        g_base = None
        if ctx.base_dim is not None and ctx.needs_input_grad[0]:
            g_base = g.sum(0) if ctx.base_dim == 1 else g
        g_x = g.mm(w) if ctx.needs_input_grad[1] else None
        return g_base, g_x, None, None


class _WeightGrads(torch.autograd.Function):
    """Identity on the loop's inputs. Every step reads them, so autograd runs this node's
    backward after every step's; it returns, beside their gradients, ``G^T X`` for each
    deferred weight."""

    @staticmethod
    def forward(ctx, pending, n_inputs, *tensors):
        ctx.pending, ctx.n_inputs = pending, n_inputs
        return tuple(t.view_as(t) for t in tensors[:n_inputs])

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        weight_grads: list[torch.Tensor | None] = []
        for pairs in ctx.pending:
            if not pairs:
                weight_grads.append(None)
                continue
            x = torch.cat([x for x, _ in pairs])  # (T*B, K)
            g = torch.cat([g for _, g in pairs])  # (T*B, N)
            if x.device.type == "cpu" and x.dtype in (torch.bfloat16, torch.float16):
                # zero rows add nothing to G^T X and keep oneDNN's shapes few (ops/shapes.py)
                n = rounded_rows(x.size(0))
                x, g = pad_rows(x, n), pad_rows(g, n)
            weight_grads.append(g.t().mm(x))  # (N, K)
            pairs.clear()
        return (None, None, *grads, *weight_grads)


def defer_weight_grads(
    weights: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]
) -> tuple[list[torch.Tensor], list[list], list[torch.Tensor]]:
    """Prepare a loop whose products with ``weights`` go through :func:`deferred_linear`.

    Args:
        weights: (N_i, K_i) weights in nn.Linear layout, read at every step (parameters,
            views of them, or copies cast for autocast).
        inputs: the tensors the loop starts from, (B, *) each, such that every step's
            input to a product depends on one of them (the initial hidden state, the
            encoder memory, the first feed). The loop must read the returned copies.

    Returns:
        the weights detached (use them inside the loop), one pending list per weight
        (pass it to :func:`deferred_linear` with that weight), and ``inputs`` as the loop
        must read them. After the backward pass each weight's gradient is one product
        ``G^T X`` (N_i, K_i) over all steps. Raises nothing.
    """
    pending: list[list] = [[] for _ in weights]
    outs = _WeightGrads.apply(pending, len(inputs), *inputs, *weights)
    return [w.detach() for w in weights], pending, list(outs)


def deferred_linear(
    base: torch.Tensor | None, x: torch.Tensor, w: torch.Tensor, pending: list
) -> torch.Tensor:
    """``base + x @ w^T`` whose gradient for ``w`` is left to :func:`defer_weight_grads`.

    Args:
        base: (N,) bias, (B, N), or None. x: (B, K). w: (N, K), a detached weight from
            :func:`defer_weight_grads`. pending: that weight's pending list.

    Returns:
        (B, N) in ``w``'s dtype. Raises what torch.addmm raises for mismatched shapes.
    """
    return _DeferredLinear.apply(base, x, w, pending)
