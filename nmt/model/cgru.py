"""The conditional GRU decoder (``model.step_order: cgru``) of Nematus.

Sennrich et al. 2017, "Nematus: a Toolkit for Neural Machine Translation" (the decoder's
equations; the cell is Firat and Cho's 2016 "Conditional Gated Recurrent Unit with
Attention Mechanism"). One step j, with C the encoder memory:

* ``s'_j = GRU_1(E y_{j-1}, s_{j-1})``: a GRU on the previous target embedding alone;
* ``c_j = ATT(C, s'_j)``: attention queried with that intermediate state;
* ``s_j = GRU_2(c_j, s'_j)``: a second GRU whose input is the context vector;
* ``t_j = tanh(W_o [s_j; c_j; E y_{j-1}] + b_o)``: Nematus's readout, the same pre-output
  layer as the ``bahdanau`` order's.

Against ``bahdanau`` (attend with s_{j-1}, then one GRU on ``[E y; c]``) the query has
already read y_{j-1}. GRU_1 has ``3D (E + D)`` weights and GRU_2 ``3D (M + D)``: one
(3D, D) matrix and two 3D biases more than the bahdanau cell's ``3D (E + M + D)``.

With ``dec_layers`` L > 1 the layers above the first are plain GRU cells on the new state
of the layer below, as in the other step orders, and the pre-output reads the top one.
With attention ``none`` the context is the fixed vector ``c = tanh(V [h_fwd_n; h_bwd_1])``
at every step (GRU_2 still reads it), and there are no attention weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from nmt.model.decoder import Decoder, gru_update
from nmt.model.decoder_state import DecoderState, Memory, StepOutput
from nmt.ops.precision import at_least_fp32, cast_for_autocast
from nmt.ops.step_matmul import StepWeights


@dataclass
class CGRUStepWeights(StepWeights):
    """:class:`StepWeights` of the conditional GRU: ``emb`` (3D, E) and ``hh`` (3D, D) are
    GRU_1's W_ih and W_hh, ``feed`` (3D, M) is GRU_2's W_ih (its input is the context),
    ``pre`` (O, D+M) and ``pre_emb`` (O, E) the pre-output's, as in ``bahdanau``.

    Attributes:
        cond_hh: (3D, D) GRU_2's W_hh (its hidden state is s'_j). Never None once built.
    """

    cond_hh: torch.Tensor | None = None


class CGRUDecoder(Decoder):
    """:class:`Decoder` with the conditional GRU step (module docstring); takes the same
    arguments, with ``step_order`` ``cgru``. Its first cell ``cells[0]`` is GRU_1 (input
    E), ``cond`` is GRU_2 (input M).

    Raises:
        ValueError: another step order, or what :class:`Decoder` raises.
    """

    step_orders = ("cgru",)
    # GRU_1's W_ih (emb) is taken for all positions at once before the loop, as in Decoder
    deferred = ("feed", "hh", "cond_hh", "pre")

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden: int,
        layers: int,
        memory_dim: int,
        attention: str,
        step_order: str,
        attn_dim: int,
        output_dim: int,
        dropout: float,
        **kwargs,
    ):
        super().__init__(
            vocab_size,
            emb_dim,
            hidden,
            layers,
            memory_dim,
            attention,
            step_order,
            attn_dim,
            output_dim,
            dropout,
            **kwargs,
        )
        self.cond = nn.GRUCell(memory_dim, hidden)

    def step_weights(self, generator: torch.Tensor | None = None) -> CGRUStepWeights:
        """:meth:`Decoder.step_weights` for the two GRUs (:class:`CGRUStepWeights`), each
        cast once per batch under autocast."""
        gru1 = cast(nn.GRUCell, self.cells[0])
        E = self.embed.embedding_dim
        W = self.pre_output.weight  # (O, D + M + E)
        c = cast_for_autocast
        return CGRUStepWeights(
            c(gru1.weight_ih),
            c(self.cond.weight_ih),
            c(gru1.weight_hh),
            c(W[:, : W.size(1) - E]),
            c(W[:, -E:]),
            None if generator is None else c(generator),
            cond_hh=c(self.cond.weight_hh),
        )

    def _step(
        self,
        y: torch.Tensor,
        y_gates: torch.Tensor,
        out_y: torch.Tensor | None,
        state: DecoderState,
        mem: Memory,
    ) -> StepOutput:
        """One conditional GRU step from :meth:`Decoder._embed_inputs`'s parts: y (B, E),
        y_gates (B, 3D) GRU_1's whole input share, out_y (B, O) the pre-output's.

        Returns:
            :class:`StepOutput` with pre_output (B, O), state hidden (L, B, D) (s_j at
            layer 0), attention weights (B, S) of the query s'_j (None for ``none``).
        """
        t, w = state.t, mem.weights
        gru1 = cast(nn.GRUCell, self.cells[0])
        s_prev = at_least_fp32(state.hidden[0])
        gh = at_least_fp32(w.addmm("hh", gru1.bias_hh, s_prev))
        s_mid = gru_update(at_least_fp32(y_gates), gh, s_prev)  # s'_j (B, D)
        context, weights, heads = self._read(s_mid, mem, t)  # (B, M), (B, S)
        gi = at_least_fp32(w.addmm("feed", self.cond.bias_ih, context))
        s = gru_update(gi, at_least_fp32(w.addmm("cond_hh", self.cond.bias_hh, s_mid)), s_mid)
        hidden = self._upper(s, state.hidden)  # (L, B, D)
        out = self._readout(out_y, hidden[-1], context, w)  # reads E y_{j-1}, as bahdanau's
        return StepOutput(self.dropout(out), DecoderState(hidden, None, t + 1), weights, heads)
