"""Alignment scorers for the recurrent decoder.

Each scorer turns a decoder state ``s`` (B, D) and the encoder memory ``h`` (B, S, M)
into alignment scores (B, S); :func:`masked_softmax` turns scores into attention weights
that are exactly 0 on padding; the context vector is the weighted sum of memory.

Keys that depend only on the memory (``U h_i`` for additive, ``W h_i`` for general) are
computed once per sentence by ``precompute`` and travel with the batch, not on the module.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis where ``mask`` is True; masked positions get exactly 0.

    Args:
        scores: (..., S) alignment scores.
        mask: (..., S) bool, True on real positions (broadcastable to ``scores``).

    Returns:
        (..., S) attention weights; a row with no real position is all zeros (not NaN).
    """
    mask = mask.expand_as(scores)
    scores = scores.masked_fill(~mask, float("-inf"))
    # softmax over an all -inf row is NaN (with NaN gradients); finite scores first, then 0
    scores = scores.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


class AdditiveScorer(nn.Module):
    """Bahdanau et al. (2015), eq. 6 / appendix A.1.2: ``e_i = v^T tanh(W s + U h_i)``.

    Args:
        query_dim: D, decoder state size.
        memory_dim: M, encoder memory size.
        attn_dim: A, hidden size of the scoring MLP.
    """

    def __init__(self, query_dim: int, memory_dim: int, attn_dim: int):
        super().__init__()
        self.W = nn.Linear(query_dim, attn_dim, bias=False)
        self.U = nn.Linear(memory_dim, attn_dim, bias=True)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, M) memory -> (B, S, A) keys ``U h_i``."""
        return self.U(memory)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(B, D) query, (B, S, A) keys -> (B, S) scores."""
        return self.v(torch.tanh(keys + self.W(query).unsqueeze(1))).squeeze(-1)


class DotScorer(nn.Module):
    """Luong et al. (2015), eq. 8 "dot": ``e_i = s . h_i``; needs D == M.

    With ``scaled=True``, Vaswani et al. (2017), eq. 1: ``e_i = s . h_i / sqrt(d_k)``.
    """

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


class GeneralScorer(nn.Module):
    """Luong et al. (2015), eq. 8 "general": ``e_i = s^T W h_i``.

    Args:
        query_dim: D. memory_dim: M.
    """

    def __init__(self, query_dim: int, memory_dim: int):
        super().__init__()
        self.W = nn.Linear(memory_dim, query_dim, bias=False)

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, M) memory -> (B, S, D) keys ``W h_i``."""
        return self.W(memory)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(B, D) query, (B, S, D) keys -> (B, S) scores."""
        return torch.bmm(keys, query.unsqueeze(2)).squeeze(2)


def build_scorer(kind: str, query_dim: int, memory_dim: int, attn_dim: int) -> nn.Module | None:
    """The scorer for ``kind``; ``none`` (fixed-vector model) has no scorer.

    Raises:
        ValueError: unknown kind, or dot/scaled_dot with ``query_dim != memory_dim``.
    """
    match kind:
        case "additive":
            return AdditiveScorer(query_dim, memory_dim, attn_dim)
        case "dot" | "scaled_dot":
            if query_dim != memory_dim:
                raise ValueError(
                    f"{kind} attention needs decoder size {query_dim} == memory size {memory_dim}"
                )
            return DotScorer(scaled=kind == "scaled_dot")
        case "general":
            return GeneralScorer(query_dim, memory_dim)
        case "none":
            return None
    raise ValueError(f"unknown attention type {kind!r}")


def attend(
    scorer: nn.Module, query: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor,
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
