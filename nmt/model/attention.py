"""Attention for the recurrent decoder: alignment scorers, masked softmax, local attention.

Each scorer turns a decoder state ``s`` (B, D) and the encoder memory ``h`` (B, S, M)
into alignment scores (B, S); :func:`masked_softmax` turns scores into attention weights
that are exactly 0 on padding; the context vector is the weighted sum of memory.

Keys that depend only on the memory (``U h_i`` for additive, ``W h_i`` for general) are
computed once per sentence by ``precompute`` and travel with the batch, not on the module.

Global attention reads every source position; :class:`LocalAttention` (Luong et al. 2015,
section 3.2) wraps any scorer and reads only a window of 2D+1 positions around a centre
p_t; multi-head attention is in nmt/model/multihead.py; nmt/model/attention_factory.py's
``build_attention`` is the one switch between them.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import nn

from nmt.config.schema import LOCAL_KINDS
from nmt.ops.precision import at_least_fp32


class Attention(Protocol):
    """What the decoder calls on its attention, whichever kind (global, local, multi-head):
    keys precomputed once per sentence, then one read per step returning context (B, M),
    weights (B, S) and per-head weights (B, h, S) or None."""

    def precompute(self, memory: torch.Tensor) -> torch.Tensor: ...

    def read(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor,
        t: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]: ...


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis where ``mask`` is True; masked positions get exactly 0.

    Args:
        scores: (..., S) alignment scores.
        mask: (..., S) bool, True on real positions (broadcastable to ``scores``).

    Returns:
        (..., S) attention weights, fp32 for bf16/fp16 scores (normalised in fp32 under
        autocast), else in the scores' own dtype (fp32, fp64); a row with no real position
        is all zeros (not NaN).
    """
    scores = at_least_fp32(scores)
    if not (torch.is_grad_enabled() and scores.requires_grad):
        # search: 4 calls a step, not 9, the same numbers. A row without a real position
        # goes through NaN, then every place is masked to 0; harmless without a gradient.
        hidden = ~mask
        return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1).masked_fill_(
            hidden, 0.0
        )
    mask = mask.expand_as(scores)
    scores = scores.masked_fill(~mask, float("-inf"))
    # softmax over an all -inf row is NaN (with NaN gradients); finite scores first, then 0
    scores = scores.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


class _TanhInPlace(torch.autograd.Function):
    """tanh computed in place as ``2 sigmoid(2x) - 1``, with tanh's own backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        torch.sigmoid(x.mul_(2), out=x).mul_(2).sub_(1)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)  # grad * (1 - y^2)


def tanh_(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)``, overwriting ``x`` (a temporary the caller does not need again).

    The additive scorer's tanh runs over (rows, S, A) every decoder step, the largest
    elementwise work of a step. For fp32 it is computed as ``2 sigmoid(2x) - 1``, about
    twice as fast as torch.tanh (results/speed/2026-11-30-b/README.md) and within
    2e-7 of it (absolute; the sigmoid form loses tanh's relative precision only near 0,
    where the score adds v_i tanh(.) terms of larger size). Other dtypes use torch.tanh.

    Args:
        x: a float tensor of any shape, e.g. the additive scorer's (B, S, A)
            ``keys + W s``; overwritten in fp32 (not for other dtypes).

    Returns:
        tanh(x), the same shape (``x`` itself in fp32). Under autograd the backward pass
        is tanh's, ``grad * (1 - y^2)`` (Bahdanau et al. 2015, eq. 6 is the use).
    """
    if x.dtype != torch.float32:
        return torch.tanh(x)
    if torch.is_grad_enabled() and x.requires_grad:
        return _TanhInPlace.apply(x)
    return torch.sigmoid(x.mul_(2), out=x).mul_(2).sub_(1)


class GlobalScorer(nn.Module):
    """A scorer over every source position. Subclasses give ``precompute(memory)`` and
    ``forward(query, keys) -> scores (B, S)``; :meth:`read` is the decoder's one call,
    shared with :class:`LocalAttention` and multi-head attention."""

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, M) memory -> keys (B, S, *); every subclass gives its own."""
        raise NotImplementedError

    def read(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor,
        t: int,
    ) -> tuple[torch.Tensor, torch.Tensor, None]:
        """context (B, M), attention weights (B, S), and None (one head); ``t`` unused."""
        return (*attend(self, query, keys, memory, mask), None)


class AdditiveScorer(GlobalScorer):
    """Bahdanau et al. (2015), eq. 6 / appendix A.1.2: ``e_i = v^T tanh(W s + U h_i)``.

    Args:
        query_dim: D, decoder state size.
        memory_dim: M, encoder memory size.
        attn_dim: A, hidden size of the scoring MLP.
        bias: a bias on the key projection, ``U h_i + b`` (the paper's MLP has none
            written out; Joey NMT leaves it out, OpenNMT-py keeps it).
    """

    @staticmethod
    def macs(memory_dim: int, query_dim: int, attn_dim: int) -> tuple[int, int, int]:
        """Forward multiply-adds (per source token, per target token, per attended
        position) of the scores, the context's weighted sum not included: ``U h_i`` once
        per source token, ``W s`` once per step, tanh and ``v`` over (S, A)."""
        return memory_dim * attn_dim, query_dim * attn_dim, 2 * attn_dim

    def __init__(self, query_dim: int, memory_dim: int, attn_dim: int, bias: bool = True):
        super().__init__()
        self.W = nn.Linear(query_dim, attn_dim, bias=False)
        self.U = nn.Linear(memory_dim, attn_dim, bias=bias)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, M) memory -> (B, S, A) keys ``U h_i``; at least fp32 for search under
        autocast.

        Each search step adds the query's projection to the keys and takes tanh,
        elementwise work over (B, S, A) that a CPU does faster in fp32 than in bf16. Training
        keeps the autocast dtype, where fp32 keys cost the step more than they save
        (benchmarks/speed/ab/attention_fp32_keys.py records both).
        """
        keys = self.U(memory)
        return keys if torch.is_grad_enabled() else at_least_fp32(keys)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(B, D) query, (B, S, A) keys -> (B, S) scores."""
        return self.v(tanh_(keys + self.W(query).unsqueeze(1))).squeeze(-1)


class DotScorer(GlobalScorer):
    """Luong et al. (2015), eq. 8 "dot": ``e_i = s . h_i``; needs D == M.

    With ``scaled=True``, Vaswani et al. (2017), eq. 1: ``e_i = s . h_i / sqrt(d_k)``.
    """

    @staticmethod
    def macs(memory_dim: int, query_dim: int, attn_dim: int) -> tuple[int, int, int]:
        """Forward multiply-adds (per source token, per target token, per attended
        position) of the scores: one M-long dot product per position."""
        return 0, 0, memory_dim

    def __init__(self, scaled: bool = False):
        super().__init__()
        self.scaled = scaled

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """Keys are the memory itself: (B, S, M)."""
        return memory

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(B, D) query, (B, S, D) keys -> (B, S) scores."""
        scores = torch.bmm(keys, query.unsqueeze(2)).squeeze(2)  # (B, S)
        if self.scaled:
            scores = scores / math.sqrt(keys.size(-1))
        return scores


class GeneralScorer(GlobalScorer):
    """Luong et al. (2015), eq. 8 "general": ``e_i = s^T W h_i``.

    Args:
        query_dim: D. memory_dim: M.
    """

    @staticmethod
    def macs(memory_dim: int, query_dim: int, attn_dim: int) -> tuple[int, int, int]:
        """Forward multiply-adds (per source token, per target token, per attended
        position) of the scores: ``W h_i`` once per source token, then a D-long dot
        product per position."""
        return memory_dim * query_dim, 0, query_dim

    def __init__(self, query_dim: int, memory_dim: int):
        super().__init__()
        self.W = nn.Linear(memory_dim, query_dim, bias=False)

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, M) memory -> (B, S, D) keys ``W h_i``."""
        return self.W(memory)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(B, D) query, (B, S, D) keys -> (B, S) scores."""
        return torch.bmm(keys, query.unsqueeze(2)).squeeze(2)


def attend(
    scorer: nn.Module,
    query: torch.Tensor,
    keys: torch.Tensor,
    memory: torch.Tensor,
    mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One attention read.

    Args:
        query: (B, D) decoder state. keys: (B, S, *) from ``scorer.precompute``.
        memory: (B, S, M) values. mask: (B, S) True on real source positions.

    Returns:
        context (B, M) and attention weights (B, S).
    """
    weights = masked_softmax(scorer(query, keys), mask)  # (B, S)
    context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)  # (B, M)
    return context, weights


class LocalAttention(nn.Module):
    """Luong et al. (2015), section 3.2: attention restricted to the window
    ``[p_t - D, p_t + D]`` of source positions around an aligned position p_t.

    * ``local_m`` (monotonic): ``p_t = t``, the target position (0-based), and the weights
      are the softmax of the scores over the window (the paper's eq. 7 on the window).
    * ``local_p`` (predictive, eq. 9-10): ``p_t = S * sigmoid(v_p^T tanh(W_p h_t))`` with
      S the sentence's source length, and the window softmax is multiplied by
      ``exp(-(s - p_t)^2 / (2 sigma^2))``, ``sigma = D / 2``. As in the paper the factor is
      applied after the softmax, so these weights sum to less than 1.

    Positions outside the window or on padding get weight exactly 0. p_t of ``local_m`` is
    clamped to the sentence's last position, so a target longer than its source still
    reads the source end (the paper leaves that case open). Scores are computed for every
    position and then masked: simpler than gathering windows, and the same result.

    Args:
        kind: ``local_m`` | ``local_p``.
        scorer: any global scorer (additive, dot, general, scaled dot) for ``align``.
        query_dim: D_q, decoder state size (local_p's position predictor reads it).
        window: D, half-width of the window in source pieces (the paper uses 10).
        predictor_dim: hidden size of W_p (local_p only).

    Raises:
        ValueError: unknown ``kind`` or ``window < 1``.
    """

    @staticmethod
    def predictor_macs(kind: str, query_dim: int, attn_dim: int) -> int:
        """Forward multiply-adds per step of ``local_p``'s position predictor,
        ``S sigmoid(v_p^T tanh(W_p s))`` (Luong et al. 2015, eq. 9); 0 for ``local_m``."""
        return query_dim * attn_dim + attn_dim if kind == "local_p" else 0

    def __init__(
        self, kind: str, scorer: GlobalScorer, query_dim: int, window: int, predictor_dim: int
    ):
        super().__init__()
        if kind not in LOCAL_KINDS:
            raise ValueError(f"unknown local attention {kind!r}; expected local_m or local_p")
        if window < 1:
            raise ValueError(f"local attention window D must be >= 1, got {window}")
        self.kind, self.score, self.window = kind, scorer, window
        if kind == "local_p":
            self.W_p = nn.Linear(query_dim, predictor_dim, bias=False)
            self.v_p = nn.Linear(predictor_dim, 1, bias=False)

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, M) memory -> the inner scorer's keys (B, S, *)."""
        return self.score.precompute(memory)

    def centre(self, query: torch.Tensor, mask: torch.Tensor, t: int) -> torch.Tensor:
        """The aligned source position p_t, (B,) float, in [0, S] for each sentence.

        Args:
            query: (B, D_q) decoder state. mask: (B, S) True on real source positions.
            t: target position (0-based) of the step.
        """
        src_len = mask.sum(dim=-1).to(query.dtype)  # (B,)
        if self.kind == "local_m":
            return torch.full_like(src_len, float(t)).minimum((src_len - 1).clamp(min=0))
        return src_len * torch.sigmoid(self.v_p(torch.tanh(self.W_p(query)))).squeeze(-1)

    def read(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor,
        t: int,
    ) -> tuple[torch.Tensor, torch.Tensor, None]:
        """One local attention read.

        Args:
            query: (B, D_q). keys: (B, S, *) from :meth:`precompute`. memory: (B, S, M).
            mask: (B, S) bool, True on real positions. t: target position (0-based).

        Returns:
            context (B, M), attention weights (B, S) (0 outside the window), and None
            (one head).
        """
        p = self.centre(query, mask, t)  # (B,)
        positions = torch.arange(mask.size(1), device=mask.device, dtype=query.dtype)
        offset = positions.unsqueeze(0) - p.unsqueeze(1)  # (B, S): s - p_t
        in_window = mask & (offset.abs() <= self.window)
        weights = masked_softmax(self.score(query, keys), in_window)  # (B, S)
        if self.kind == "local_p":
            sigma = self.window / 2.0
            weights = weights * torch.exp(-offset.pow(2) / (2.0 * sigma * sigma))
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)  # (B, M)
        return context, weights, None
