"""Bidirectional GRU encoder over packed sequences."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.data.vocab import PAD


@dataclass
class EncoderOutput:
    """What the decoder reads.

    Attributes:
        memory: (B, S, M) annotations h_i, M = 2H (forward and backward states concatenated).
        final: (B, M) last layer's final forward state and final backward state.
        mask: (B, S) bool, True on real source positions.
    """

    memory: torch.Tensor
    final: torch.Tensor
    mask: torch.Tensor


class Encoder(nn.Module):
    """Embeddings, dropout and an L-layer bidirectional GRU (Bahdanau et al. 2015, sec. 3.2).

    Args:
        vocab_size: V_src. emb_dim: E. hidden: H per direction. layers: L.
        dropout: on embeddings and between GRU layers.
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, layers: int, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.GRU(emb_dim, hidden, num_layers=layers, batch_first=True,
                          bidirectional=True, dropout=dropout if layers > 1 else 0.0)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor) -> EncoderOutput:
        """Encode a padded batch.

        Args:
            src: (B, S) source ids, PAD-padded. src_len: (B,) true lengths (>= 1).

        Returns:
            :class:`EncoderOutput` with memory (B, S, 2H) (zeros at padding).
        """
        B, S = src.shape
        x = self.dropout(self.embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.rnn(packed)  # h_n: (2L, B, H)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=S)  # (B, S, 2H)
        final = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # (B, 2H): last layer fwd, bwd
        return EncoderOutput(memory=memory, final=final, mask=src != PAD)
