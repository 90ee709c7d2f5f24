"""Bidirectional GRU encoder over packed sequences, with optional residual connections."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from nmt.data.vocab import PAD
from nmt.ops.dropout import Dropout


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
        residual: from the second layer on, add each layer's input to its output
            (Wu et al. 2016, sec. 3.1: ``x_{l+1} = BiGRU_l(dropout(x_l)) + x_l``, both
            (B, S, 2H)); the layers are then separate modules (``layers.{l}``) with the
            same shapes, initial values and parameter count as the stacked ``rnn``.

    Raises:
        ValueError: ``residual`` with fewer than 2 layers (nothing to add to).
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden: int,
        layers: int,
        dropout: float,
        residual: bool = False,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.dropout = Dropout(dropout)
        self.rnn: nn.GRU | None = None
        self.layers: nn.ModuleList | None = None
        if not residual:
            self.rnn = nn.GRU(
                emb_dim,
                hidden,
                num_layers=layers,
                batch_first=True,
                bidirectional=True,
                dropout=dropout if layers > 1 else 0.0,
            )
            return
        if layers < 2:
            raise ValueError(f"model.enc_residual: needs model.enc_layers >= 2, got {layers}")
        # created in the stacked GRU's parameter order, so the same seed gives the same
        # initial weights with and without residual connections
        self.layers = nn.ModuleList(
            nn.GRU(emb_dim if i == 0 else 2 * hidden, hidden, batch_first=True, bidirectional=True)
            for i in range(layers)
        )

    def _residual_stack(self, packed: PackedSequence) -> tuple[PackedSequence, torch.Tensor]:
        """The residual layers over a packed (sum of lengths, E) input: the last layer's
        packed output (sum of lengths, 2H) and final states (2, B, H)."""
        assert self.layers is not None
        x, h_n = self.layers[0](packed)
        for rnn in self.layers[1:]:
            # packed data rows are in one order for every layer: add them as they are
            out, h_n = rnn(x._replace(data=self.dropout(x.data)))
            x = out._replace(data=out.data + x.data)
        return x, h_n

    def forward(self, src: torch.Tensor, src_len: torch.Tensor) -> EncoderOutput:
        """Encode a padded batch.

        Args:
            src: (B, S) source ids, PAD-padded. src_len: (B,) true lengths (>= 1).

        Returns:
            :class:`EncoderOutput` with memory (B, S, 2H) (zeros at padding) and final
            (B, 2H), the last layer's final GRU states (without the residual input).
        """
        B, S = src.shape
        x = self.dropout(self.embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        if self.rnn is not None:
            out, h_n = self.rnn(packed)  # h_n: (2L, B, H)
        else:
            out, h_n = self._residual_stack(packed)  # h_n: (2, B, H)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=S)  # (B, S, 2H)
        final = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # (B, 2H): last layer fwd, bwd
        return EncoderOutput(memory=memory, final=final, mask=src != PAD)
