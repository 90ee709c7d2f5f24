"""Scaled dot-product and multi-head attention, Vaswani et al. (2017), section 3.2.

Standalone reference implementation (not used by the GRU model). Axis letters: B batch,
T query length, S key length, h heads, d_k key/query size, d_v value size.
Masks are bool with True = may attend.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nmt.attention import masked_softmax


def _attention_weights(
    query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) over the last axis -> (B, ..., T, S); masked entries are 0."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if mask is None:
        return torch.softmax(scores, dim=-1)
    return masked_softmax(scores, mask)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Vaswani et al. (2017), section 3.2.1, eq. 1: ``softmax(Q K^T / sqrt(d_k)) V``.

    Args:
        query: (B, ..., T, d_k).
        key: (B, ..., S, d_k).
        value: (B, ..., S, d_v).
        mask: optional bool, broadcastable to (B, ..., T, S); True = may attend.
            Masked positions get weight exactly 0; a row with no True gets all-zero
            weights and a zero output (never NaN).

    Returns:
        output (B, ..., T, d_v) and weights (B, ..., T, S).

    Raises:
        ValueError: if query and key differ in d_k, or key and value differ in S.
    """
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share d_k, got {query.shape[-1]} and {key.shape[-1]}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must share length S, got {key.shape[-2]} and {value.shape[-2]}"
        )
    weights = _attention_weights(query, key, mask)
    return weights @ value, weights


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Key-padding mask: (B,) lengths -> (B, 1, S=max_len) bool, True on real positions.

    The singleton axis lets it broadcast over the T query positions.
    """
    positions = torch.arange(max_len, device=lengths.device)
    return (positions < lengths.unsqueeze(-1)).unsqueeze(1)


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) bool lower-triangular mask: query t may attend to keys 0..t (section 3.2.3)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


class MultiHeadAttention(nn.Module):
    """Vaswani et al. (2017), section 3.2.2: ``Concat(head_1..head_h) W^O`` with
    ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)`` and d_k = d_v = d_model / h.

    The h per-head projections are stored as one (d_model, d_model) linear each for
    W_q, W_k, W_v, which is the same map split column-wise into h blocks.

    Args:
        d_model: model width.
        num_heads: h.
        dropout: dropout probability on the attention weights (before multiplying V).

    Raises:
        ValueError: if d_model is not divisible by num_heads.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads})"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, d_model) -> (B, h, L, d_k)."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.d_k).transpose(1, 2)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from T queries to S keys/values in h heads.

        Args:
            query: (B, T, d_model).
            key: (B, S, d_model).
            value: (B, S, d_model).
            mask: optional bool broadcastable to (B, T, S), True = may attend, e.g.
                :func:`padding_mask` (B, 1, S) or :func:`causal_mask` (T, T).

        Returns:
            output (B, T, d_model) and weights (B, h, T, S) (before dropout).

        Raises:
            ValueError: if key and value lengths differ.
        """
        q = self._split_heads(self.W_q(query))
        k = self._split_heads(self.W_k(key))
        v = self._split_heads(self.W_v(value))
        if mask is not None:
            # A new head axis in front of (T, S) makes one mask serve every head.
            mask = mask.unsqueeze(-3)
        if k.shape[-2] != v.shape[-2]:
            raise ValueError(
                f"key and value must share length S, got {k.shape[-2]} and {v.shape[-2]}"
            )
        weights = _attention_weights(q, k, mask)
        heads = self.dropout(weights) @ v
        batch, _, length, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(batch, length, self.d_model)
        return self.W_o(concat), weights
