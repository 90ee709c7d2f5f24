"""Scaled dot-product and multi-head attention, Vaswani et al. (2017), section 3.2.

:class:`MultiHeadAttention` is also the GRU decoder's ``attention: multihead``: one query
(the decoder state) per step over the encoder memory, keys and values projected once per
sentence (:meth:`MultiHeadAttention.precompute`). Axis letters: B batch, T query length,
S key length, h heads, d_k key/query size, d_v value size. Masks are bool with
True = may attend.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nmt.model.attention import masked_softmax
from nmt.ops.dropout import Dropout


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
        raise ValueError(f"query and key must share d_k, got {query.shape[-1]} and {key.shape[-1]}")
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
    W_q, W_k, W_v, which is the same map split column-wise into h blocks. The total size
    does not depend on h, so models with different h have the same parameter count, and
    h = 1 is single-head scaled dot-product attention over learned projections.

    Args:
        d_model: model width (in the GRU decoder: the encoder memory size M).
        num_heads: h.
        dropout: dropout probability on the attention weights (before multiplying V).
        query_dim: size of the queries if not d_model (the decoder state size D).

    Raises:
        ValueError: if d_model is not divisible by num_heads.
    """

    @staticmethod
    def macs(d_model: int, query_dim: int) -> tuple[int, int, int]:
        """Forward multiply-adds (per source token, per target token, per attended
        position), the context included: the key and value projections per source token,
        the query and output projections per step, a score and a weighted sum per
        position (summed over heads)."""
        return 2 * d_model * d_model, query_dim * d_model + d_model * d_model, 2 * d_model

    def __init__(
        self, d_model: int, num_heads: int, dropout: float = 0.0, query_dim: int | None = None
    ):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(query_dim or d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = Dropout(dropout)

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

    def precompute(self, memory: torch.Tensor) -> torch.Tensor:
        """Keys and values of a sentence, projected once: (B, S, d_model) memory ->
        (B, S, 2*d_model), ``[K W^K ; V W^V]`` side by side (one tensor, so beam search
        reorders it like any other scorer's keys)."""
        return torch.cat([self.W_k(memory), self.W_v(memory)], dim=-1)

    def read_heads(
        self, query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoder step: a single query per sentence over its precomputed keys.

        Args:
            query: (B, query_dim) decoder state. keys: (B, S, 2*d_model) from
                :meth:`precompute`. mask: (B, S) bool, True on real source positions.

        Returns:
            context (B, d_model), ``Concat(heads) W^O``, and per-head attention weights
            (B, h, S), each head's row summing to 1 (0 on padding).
        """
        k, v = keys.split(self.d_model, dim=-1)  # (B, S, d_model) each
        q = self._split_heads(self.W_q(query).unsqueeze(1))  # (B, h, 1, d_k)
        weights = _attention_weights(q, self._split_heads(k), mask[:, None, None, :])
        heads = self.dropout(weights) @ self._split_heads(v)  # (B, h, 1, d_k)
        context = self.W_o(heads.reshape(heads.size(0), self.d_model))  # (B, d_model)
        return context, weights.squeeze(2)  # (B, d_model), (B, h, S)

    def read(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor,
        t: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The decoder's attention read (the interface of nmt/model/attention.py's scorers):
        context (B, d_model), the mean of the heads' weights (B, S) for heatmaps and
        alignments, and every head's weights (B, h, S). ``memory`` and ``t`` are unused:
        the values are in ``keys`` (see :meth:`precompute`)."""
        context, heads = self.read_heads(query, keys, mask)
        return context, heads.mean(dim=1), heads
