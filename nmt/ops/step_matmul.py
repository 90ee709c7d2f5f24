"""A decoder step's linear maps: ``base + x @ W^T`` with weights taken once per batch.

:func:`step_addmm` is ``torch.addmm`` in whichever GEMM orientation is faster for the few
rows of a search step; :class:`StepWeights` holds the weights a step multiplies by, so that
autocast casts them once per batch rather than at every step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F

from nmt.ops.int8 import Int8Weight
from nmt.ops.precision import cpu_model_and_flags
from nmt.ops.weight_grads import deferred_linear


@functools.cache
def default_flip_rows() -> int:
    """The most rows a search step computes in the flipped orientation on this CPU: 160,
    or 0 (never) where the CPU has AVX-512. Decided on first use, not at import.

    Search steps (no autograd) with at most this many rows compute their linear maps in the
    other GEMM orientation (see step_addmm): faster on an AVX2 CPU, slower on an AVX-512
    one, so CPUs with AVX-512 never flip.
    """
    return 0 if "avx512f" in cpu_model_and_flags()[1] else 160


def step_addmm(
    base: torch.Tensor | None, x: torch.Tensor, w: torch.Tensor, *, flip_rows: int | None = None
) -> torch.Tensor:
    """``base + x @ w^T`` for one decoder step: ``torch.addmm``, up to float rounding.

    Args:
        base: (N,) bias or (B, N), or None for ``x @ w^T`` (a layer without bias).
        x: (B, K) the step's rows. w: (N, K), a weight as nn.Linear stores it (a parameter
            itself, or a copy :func:`nmt.ops.precision.cast_for_autocast` made, so that
            autocast does not cast it again at every step).
        flip_rows: the most rows a search step flips; None: :func:`default_flip_rows`.

    Returns:
        (B, N), contiguous.

    Search steps (autograd off) with B <= ``flip_rows`` rows compute ``(W x^T + base^T)^T``
    instead, because MKL runs that orientation faster when the rows are few and the weights
    come cold from memory (on AVX2; on AVX-512 it was slower: results/speed/2026-12-01-d/
    ab_flip_rows.txt, results/speed/2026-12-01-e/ab_flip_rows_bf16.txt). Training keeps
    ``torch.addmm``. Raises what torch.addmm raises for mismatched shapes.
    """
    limit = default_flip_rows() if flip_rows is None else flip_rows
    if torch.is_grad_enabled() or x.size(0) > limit:
        if base is None or base.dim() == 1:
            return F.linear(x, w, base)  # addmm(base, x, w^T)
        return torch.addmm(base, x, w.t())
    if base is None:  # a layer without bias (e.g. model.output_bias: false)
        return torch.mm(w, x.t()).t().contiguous()
    b = base[:, None] if base.dim() == 1 else base.t()
    return torch.addmm(b, w, x.t()).t().contiguous()


@dataclass
class StepWeights:
    """The weights a decoder step multiplies by, in nn.Linear layout (out, in), taken once
    per batch (:meth:`Decoder.step_weights`) rather than at every step.

    Attributes:
        emb: (3D, E) the embedding's share of the first GRU layer's W_ih.
        feed: (3D, F) the feed's share of it (context vector or input feeding's h~_{t-1}).
        hh: (3D, D) its W_hh. pre: (O, M+D) luong's ``W_c``, or (O, D+M) the bahdanau
            pre-output's weight for ``[s_t; c_t]``. pre_emb: (O, E) the bahdanau
            pre-output's share for ``E y_{t-1}``; None for luong.
        generator: (V, O) the output layer's weight, for search steps; None in training,
            which applies the generator module to all positions at once.
        pending: in teacher forcing with deferred weight gradients
            (:meth:`Decoder.unroll`), the pending lists of feed, hh and pre, whose
            tensors here are then detached; None otherwise.
        int8: in an int8 search (``search.precision: int8``), the weights above whose
            inputs are bounded as :class:`nmt.ops.int8.Int8Weight` by field name, which
            :meth:`addmm` then multiplies by instead (:meth:`with_int8`); None otherwise.
    """

    emb: torch.Tensor
    feed: torch.Tensor
    hh: torch.Tensor
    pre: torch.Tensor
    pre_emb: torch.Tensor | None
    generator: torch.Tensor | None = None
    pending: dict[str, list] | None = None
    int8: dict[str, Int8Weight] | None = None

    def addmm(self, name: str, base: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        """``base + x @ W^T`` (B, N) for the step weight ``name`` (a field: feed, hh, pre,
        ...) and the step's rows x (B, K): :func:`step_addmm`, the weight's int8 product
        when ``int8`` is set, or with the weight's gradient deferred
        (:func:`nmt.ops.weight_grads.deferred_linear`) when ``pending`` is set."""
        if self.int8 is not None and name in self.int8:
            return self.int8[name].addmm(base, x)
        w = getattr(self, name)
        if self.pending is None:
            return step_addmm(base, x, w)
        return deferred_linear(base, x, w, self.pending[name])

    def with_int8(self, bounds: dict[str, float]) -> StepWeights:
        """These weights (of this class or a subclass) with :attr:`int8` holding an int8
        copy of each weight named in ``bounds`` and set, on the input grid of its bound
        (the largest magnitude its inputs can have: :class:`nmt.ops.int8.Int8Weight`);
        the others stay fp32. Packing costs about a millisecond per million weights, so
        callers keep the result (Seq2Seq.encode)."""
        packed = {
            f.name: Int8Weight(w, bounds[f.name])
            for f in fields(self)
            if f.name in bounds and isinstance(w := getattr(self, f.name), torch.Tensor)
        }
        return replace(self, int8=packed)
