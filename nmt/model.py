"""The encoder-decoder model: encoder, decoder and generator composed, and the one factory.

:func:`build_model` is the only place where configuration becomes modules.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nmt.config import ModelConfig
from nmt.decoder import Decoder, DecoderState, Memory, step_addmm
from nmt.encoder import Encoder
from nmt.loss import summed_cross_entropy
from nmt.vocab import PAD


class Seq2Seq(nn.Module):
    """RNN encoder-decoder with attention (Bahdanau et al. 2015; Luong et al. 2015).

    Use :meth:`loss` for training (teacher forcing), :meth:`encode` and :meth:`step` for
    search, :meth:`attention_weights` to inspect alignments.
    """

    def __init__(self, encoder: Encoder, decoder: Decoder, generator: nn.Linear):
        super().__init__()
        self.encoder, self.decoder, self.generator = encoder, decoder, generator

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[Memory, DecoderState]:
        """(B, S) source ids and (B,) lengths -> decoder memory and initial state."""
        return self.decoder.start(self.encoder(src, src_len))

    def step(self, prev: torch.Tensor, state: DecoderState, mem: Memory
             ) -> tuple[torch.Tensor, DecoderState, torch.Tensor | None]:
        """One search step: (B,) previous ids -> log-probabilities (B, V), new state,
        attention weights (B, S) or None for the fixed-vector model."""
        out = self.decoder.step(prev, state, mem)
        return F.log_softmax(self.step_logits(out.pre_output), dim=-1), out.state, out.attention

    def step_logits(self, pre_output: torch.Tensor) -> torch.Tensor:
        """The generator's logits (B, V) for one search step's pre-outputs (B, O), the same
        numbers as ``self.generator(pre_output)``, in the GEMM orientation that is faster
        for few rows (:func:`nmt.decoder.step_addmm`): the output layer is the largest
        matrix of a search step."""
        g = self.generator
        return step_addmm(g.bias, pre_output, g.weight.t())

    def logits(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher-forced logits (B, T, V) and attention weights (B, T, S) or None."""
        mem, state = self.encode(src, src_len)
        pre, attn, _ = self.decoder.unroll(tgt_in, state, mem)
        return self.generator(pre), attn

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor,
                tgt_out: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
        """Summed cross-entropy in nats over real target tokens (PAD ignored).

        Args:
            src: (B, S). src_len: (B,). tgt_in, tgt_out: (B, T).

        Returns:
            scalar: total loss; divide by the number of target tokens for nats/token.
        """
        mem, state = self.encode(src, src_len)
        pre, _, _ = self.decoder.unroll(tgt_in, state, mem, keep_attention=False)
        # the output layer, the largest matrix product, only for the N real target tokens:
        # padding rows would cost its three GEMMs for a loss of zero (6.6% of the rows of
        # Multi30k's reference batches; +1% and +5% target tokens/s in two in-process
        # A/Bs, results/speed/2026-12-01-b/ab_real_rows.txt)
        target = tgt_out.reshape(-1)
        rows = (target != PAD).nonzero().squeeze(1)  # (N,)
        logits = self.generator(pre.reshape(-1, pre.size(-1)).index_select(0, rows))  # (N, V)
        # nothing reads the logits after the loss: its gradient may take their memory
        return summed_cross_entropy(logits, target.index_select(0, rows), label_smoothing,
                                    overwrite_logits=True)

    def attention_weights(self, src: torch.Tensor, src_len: torch.Tensor,
                          tgt_in: torch.Tensor) -> torch.Tensor | None:
        """Teacher-forced attention weights (B, T, S); None for the fixed-vector model.
        For ``multihead`` the mean over heads (see :meth:`head_weights`)."""
        return self.logits(src, src_len, tgt_in)[1]

    def head_weights(self, src: torch.Tensor, src_len: torch.Tensor,
                     tgt_in: torch.Tensor) -> torch.Tensor | None:
        """Teacher-forced per-head attention weights (B, h, T, S) of a ``multihead``
        model (each head's row sums to 1 over real source positions); None otherwise."""
        mem, state = self.encode(src, src_len)
        return self.decoder.unroll(tgt_in, state, mem)[2]


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """The only place a :class:`ModelConfig` becomes modules."""
    encoder = Encoder(src_vocab_size, cfg.emb_dim, cfg.enc_hidden, cfg.enc_layers, cfg.dropout)
    decoder = Decoder(tgt_vocab_size, cfg.emb_dim, cfg.dec_hidden, cfg.dec_layers,
                      2 * cfg.enc_hidden, cfg.attention, cfg.step_order, cfg.attn_dim,
                      cfg.output_dim, cfg.dropout, local_score=cfg.local_score,
                      window=cfg.local_window, heads=cfg.heads,
                      attention_bias=cfg.attention_bias)
    generator = nn.Linear(cfg.output_dim, tgt_vocab_size, bias=cfg.output_bias)
    if cfg.tie_embeddings:
        generator.weight = decoder.embed.weight
    return Seq2Seq(encoder, decoder, generator)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
