"""GRU decoder with a selectable attention and either published step order.

One method, :meth:`Decoder.step`, advances every sentence of a batch by one target token;
teacher forcing (:meth:`Decoder.unroll`) and search both call it, so training and
inference compute the same thing.

Step orders (everything else is equal across attention types, for fair comparisons):

* ``bahdanau`` (Bahdanau et al. 2015, appendix A.2): attend with s_{t-1}, then
  ``s_t = GRU([E y_{t-1}; c_t], s_{t-1})``, pre-output ``tanh(W_o [s_t; c_t; E y_{t-1}])``.
* ``luong`` (Luong et al. 2015, sec. 3 and 3.3): ``s_t = GRU([E y_{t-1}; h~_{t-1}], s_{t-1})``
  (input feeding), attend with s_t, attentional vector ``h~_t = tanh(W_c [c_t; s_t])``.
* ``cgru`` (Sennrich et al. 2017, sec. 2.3): two GRUs per step with attention between
  them; :class:`nmt.model.cgru.CGRUDecoder`, a subclass of this one.

Attention is global (additive, dot, general, scaled_dot), local (``local_m``, ``local_p``;
Luong et al. 2015, sec. 3.2) or ``multihead`` (Vaswani et al. 2017, sec. 3.2.2, one query
per step); :func:`build_attention` is the switch.
With attention ``none`` (Cho et al. 2014, eq. 3-4) the context ``c = tanh(V [h_fwd_n; h_bwd_1])``
is computed once from the encoder's final states and given to every step unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from nmt.data.vocab import PAD
from nmt.model.attention_factory import build_attention
from nmt.model.decoder_state import DecoderState, Memory, StepOutput
from nmt.model.encoder import EncoderOutput
from nmt.ops.dropout import Dropout
from nmt.ops.precision import at_least_fp32, cast_for_autocast
from nmt.ops.step_matmul import StepWeights, step_addmm
from nmt.ops.weight_grads import defer_weight_grads


def gru_update(gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """A GRU's new state from its gate pre-activations (Cho et al. 2014, eq. 5-8, in torch's
    gate order r, z, n; the formula nn.GRUCell computes), written out so that a share of
    ``gi`` can come precomputed.

    Args:
        gi: (B, 3D) ``W_ih x + b_ih``. gh: (B, 3D) ``W_hh h + b_hh``. h: (B, D) the state.

    Returns:
        (B, D) ``(1 - z) * n + z * h``. Raises nothing.
    """
    D = h.size(1)
    # split, not [:, a:b]: the backward of a split is one cat, of a slice a zero fill
    gi_rz, gi_n = gi.split((2 * D, D), dim=1)
    gh_rz, gh_n = gh.split((2 * D, D), dim=1)
    r, z = torch.sigmoid(gi_rz + gh_rz).split(D, dim=1)
    n = torch.tanh(gi_n + r * gh_n)
    return torch.lerp(n, h, z)


class Decoder(nn.Module):
    """GRU decoder with attention, in the ``bahdanau`` or ``luong`` step order.

    Args:
        vocab_size: V_tgt. emb_dim: E. hidden: D. layers: L. memory_dim: M.
        attention: additive | dot | general | scaled_dot | local_m | local_p | multihead |
            none. step_order: bahdanau | luong. attn_dim: A. output_dim: O.
        dropout: probability. local_score, window: local attention's score and D.
        heads: multihead's h. attention_bias: the additive scorer's key bias.
        defer_weight_grads: in teacher forcing, take the gradients of the step weights
            feed, hh and pre as one product each after the loop (nmt/ops/weight_grads.py)
            instead of autograd's T products and T adds; the same sums up to rounding.

    Raises:
        ValueError: a step order not in :attr:`step_orders` (``cgru`` is
            :class:`nmt.model.cgru.CGRUDecoder`).
    """

    # the step orders this class's _step computes (a subclass computes its own)
    step_orders: tuple[str, ...] = ("bahdanau", "luong")
    # the step weights whose gradients unroll defers (StepWeights field names)
    deferred: tuple[str, ...] = ("feed", "hh", "pre")

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
        *,
        local_score: str = "general",
        window: int = 10,
        heads: int = 4,
        attention_bias: bool = True,
        defer_weight_grads: bool = True,
    ):
        super().__init__()
        if step_order not in self.step_orders:
            raise ValueError(
                f"model.step_order: {type(self).__name__} computes "
                f"{' or '.join(self.step_orders)}, not {step_order!r}"
            )
        self.defer_weight_grads = defer_weight_grads
        self.attention_type, self.step_order = attention, step_order
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.dropout = Dropout(dropout)
        self.scorer = build_attention(
            attention,
            hidden,
            memory_dim,
            attn_dim,
            local_score=local_score,
            window=window,
            heads=heads,
            attention_bias=attention_bias,
        )
        # the fixed-vector model's c; unused parameters otherwise are not created
        self.fixed = nn.Linear(memory_dim, memory_dim) if attention == "none" else None
        self.init = nn.Linear(memory_dim, layers * hidden)
        # the first GRU's input beside E y_{t-1}: the context (bahdanau), input feeding's
        # h~_{t-1} (luong), nothing (cgru's GRU1)
        feed_dim = {"bahdanau": memory_dim, "luong": output_dim, "cgru": 0}[step_order]
        self.cells = nn.ModuleList(
            nn.GRUCell(emb_dim + feed_dim if i == 0 else hidden, hidden) for i in range(layers)
        )
        if step_order == "luong":
            self.pre_output = nn.Linear(memory_dim + hidden, output_dim)
        else:  # bahdanau, cgru: W_o [s_t; c_t; E y_{t-1}]
            self.pre_output = nn.Linear(hidden + memory_dim + emb_dim, output_dim)
        self.layers, self.hidden, self.output_dim = layers, hidden, output_dim

    def start(
        self, enc: EncoderOutput, generator: torch.Tensor | None = None
    ) -> tuple[Memory, DecoderState]:
        """Prepare memory and the initial state ``s_0 = tanh(W_init [h_fwd_n; h_bwd_1])``.
        Under autocast the memory and the step weights, which every step reads, are cast
        once here. ``generator``: (V, O) the output layer's weight, for search steps
        (:attr:`StepWeights.generator`)."""
        B = enc.final.size(0)
        memory = cast_for_autocast(enc.memory)  # (B, S, M)
        keys = None if self.scorer is None else self.scorer.precompute(memory)
        fixed = None if self.fixed is None else torch.tanh(self.fixed(enc.final))  # (B, M)
        mem = Memory(memory, keys, enc.mask, fixed, self.step_weights(generator))
        h0 = torch.tanh(self.init(enc.final)).view(B, self.layers, self.hidden)
        h0 = h0.transpose(0, 1).contiguous()  # (L, B, D)
        feed = None
        if self.step_order == "luong":
            feed = enc.memory.new_zeros(B, self.output_dim)
        return mem, DecoderState(h0, feed)

    def _read(
        self, query: torch.Tensor, mem: Memory, t: int
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """context (B, M), attention weights (B, S) or None, per-head weights (B, h, S)."""
        # start() sets fixed_context when there is no scorer, keys when there is one
        if self.scorer is None:
            return cast(torch.Tensor, mem.fixed_context), None, None
        return self.scorer.read(query, cast(torch.Tensor, mem.keys), mem.memory, mem.mask, t)

    def _embed_inputs(
        self, prev: torch.Tensor, weights: StepWeights
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The parts of a step that depend only on the previous target ids, for any number
        of positions at once (teacher forcing computes them for all T in one matrix
        multiply instead of T small ones).

        Args:
            prev: (...) previous target ids.
            weights: the batch's :class:`StepWeights` (``emb``, ``pre_emb``).

        Returns:
            y: (..., E) embeddings after dropout; gates: (..., 3D) ``W_ih[:, :E] y + b_ih``,
            the embedding's share of the first GRU layer's input gates; out_y: (..., O)
            ``W_o[:, -E:] y``, the embedding's share of the pre-output (bahdanau), else None.
        """
        y = self.dropout(self.embed(prev))
        bias = cast(nn.GRUCell, self.cells[0]).bias_ih
        if weights.int8 is not None and y.dim() == 2:  # an int8 search step
            gates = weights.addmm("emb", bias, y)
            out_y = None if weights.pre_emb is None else weights.addmm("pre_emb", None, y)
            return y, gates, out_y
        if y.dim() == 2:  # one search or decoding step
            gates = step_addmm(bias, y, weights.emb)
        else:
            gates = F.linear(y, weights.emb, bias)
        out_y = None if weights.pre_emb is None else F.linear(y, weights.pre_emb)
        return y, gates, out_y

    def step_weights(self, generator: torch.Tensor | None = None) -> StepWeights:
        """The weights every step reads (:class:`StepWeights`), taken once per batch.

        Taken once, autograd slices each parameter once, not once per step; under autocast
        they are also cast once (:func:`nmt.ops.precision.cast_for_autocast`): autocast caches
        the casts of parameters, not of views of them. ``generator``: (V, O) the output
        layer's weight, for search.
        """
        cell = cast(nn.GRUCell, self.cells[0])
        E = self.embed.embedding_dim
        W = self.pre_output.weight
        bahdanau = self.step_order == "bahdanau"
        w_pre = W[:, : W.size(1) - E] if bahdanau else W
        c = cast_for_autocast
        return StepWeights(
            c(cell.weight_ih[:, :E]),
            c(cell.weight_ih[:, E:]),
            c(cell.weight_hh),
            c(w_pre),
            c(W[:, -E:]) if bahdanau else None,
            None if generator is None else c(generator),
        )

    def int8_bounds(self, memory_bound: float) -> dict[str, float]:
        """For an int8 search: the step weights (:class:`StepWeights` field names) that
        may run in int8, each with the largest magnitude its inputs can have (the grid of
        :class:`nmt.ops.int8.Int8Weight`); the others stay fp32.

        The GRU states (hh, cgru's cond_hh) and the tanh of the pre-output (the
        generator's input) and of input feeding (luong's feed) lie in [-1, 1]; an
        embedding row (emb, pre_emb) within the table's largest magnitude. The context
        (bahdanau's and cgru's feed, and pre) is a convex combination of memory rows, or
        the fixed tanh vector, within ``memory_bound`` (the encoder's: 1 for GRU outputs,
        more with residual layers); multihead's context is a learned projection with no
        such bound, so its products stay fp32. Raises nothing.
        """
        e = float(self.embed.weight.detach().abs().max())
        bounds = {"emb": e, "pre_emb": e, "hh": 1.0, "cond_hh": 1.0, "generator": 1.0}
        context = None if self.attention_type == "multihead" else max(memory_bound, 1.0)
        if context is not None:
            bounds["pre"] = context
        if self.step_order == "luong":
            bounds["feed"] = 1.0
        elif context is not None:
            bounds["feed"] = context
        return bounds

    def _rnn(
        self, y_gates: torch.Tensor, feed: torch.Tensor, hidden: torch.Tensor, weights: StepWeights
    ) -> torch.Tensor:
        """The GRU stack for one step.

        The first layer is :func:`gru_update`, so that the embedding's share of its input
        gates, ``y_gates`` (B, 3D), can come precomputed; ``feed`` (B, F) is the rest of its
        input (the context vector, or input feeding's h~_{t-1}). hidden: (L, B, D).
        weights: the batch's :class:`StepWeights`.
        Returns the new hidden states (L, B, D).
        """
        cell = cast(nn.GRUCell, self.cells[0])
        # under autocast the products come back bf16/fp16, but the recurrent state stays
        # fp32 (a no-op in fp32 training; fp64 stays fp64)
        gi = at_least_fp32(weights.addmm("feed", y_gates, feed))  # (B, 3D)
        h = at_least_fp32(hidden[0])
        gh = at_least_fp32(weights.addmm("hh", cell.bias_hh, h))  # (B, 3D)
        return self._upper(gru_update(gi, gh, h), hidden)

    def _upper(self, s: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """The layers above the first, plain GRU cells on the new state of the layer below:
        s (B, D) layer 0's new state, hidden (L, B, D) the previous states -> the new
        states (L, B, D)."""
        if self.layers == 1:
            return s.unsqueeze(0)  # a view: no copy per step, forward or backward
        new, h = [s], s
        for i in range(1, self.layers):
            h = self.cells[i](self.dropout(h), hidden[i])  # (B, D)
            new.append(h)
        return torch.stack(new)  # (L, B, D)

    def _readout(
        self,
        out_y: torch.Tensor | None,
        top: torch.Tensor,
        context: torch.Tensor,
        weights: StepWeights,
    ) -> torch.Tensor:
        """The pre-output ``t = tanh(W_o [s; c; E y_{j-1}] + b_o)`` of the ``bahdanau`` and
        ``cgru`` orders (Bahdanau et al. 2015, app. A.2.2, without the maxout): out_y (B, O)
        the E y share, computed beforehand by :meth:`_embed_inputs`; top (B, D) the top
        layer's new state; context (B, M) -> (B, O)."""
        pre = weights.addmm(
            "pre", cast(torch.Tensor, out_y) + self.pre_output.bias, torch.cat([top, context], -1)
        )
        return torch.tanh(pre)

    def step(self, prev: torch.Tensor, state: DecoderState, mem: Memory) -> StepOutput:
        """Advance one target position.

        Args:
            prev: (B,) previous target ids (BOS at the first step).
            state: hidden (L, B, D). mem: :class:`Memory` for the same B sentences.

        Returns:
            :class:`StepOutput` with pre_output (B, O) and attention weights (B, S).
        """
        return self._step(*self._embed_inputs(prev, mem.weights), state, mem)

    def _step(
        self,
        y: torch.Tensor,
        y_gates: torch.Tensor,
        out_y: torch.Tensor | None,
        state: DecoderState,
        mem: Memory,
    ) -> StepOutput:
        """:meth:`step` from the precomputed parts of :meth:`_embed_inputs` (B, *)."""
        t = state.t
        recurrent = mem.weights
        if self.step_order == "bahdanau":
            context, weights, heads = self._read(state.hidden[-1], mem, t)  # (B, M), (B, S)
            hidden = self._rnn(y_gates, context, state.hidden, recurrent)
            out = self._readout(out_y, hidden[-1], context, recurrent)
            return StepOutput(self.dropout(out), DecoderState(hidden, None, t + 1), weights, heads)
        # luong: start() sets the feed (input feeding's h~_{t-1})
        hidden = self._rnn(y_gates, cast(torch.Tensor, state.feed), state.hidden, recurrent)
        context, weights, heads = self._read(hidden[-1], mem, t)
        out = torch.tanh(
            recurrent.addmm("pre", self.pre_output.bias, torch.cat([context, hidden[-1]], dim=-1))
        )  # h~_t
        return StepOutput(self.dropout(out), DecoderState(hidden, out, t + 1), weights, heads)

    def _defer_weight_grads(self, state: DecoderState, mem: Memory) -> tuple[DecoderState, Memory]:
        """The state and memory a teacher-forced loop reads, with the step weights feed,
        hh and pre detached and their gradients deferred to one product each
        (nmt/ops/weight_grads.py). Every step's product inputs depend on the initial hidden state,
        the memory or the first feed, which therefore pass through the collecting node."""
        w = mem.weights
        names = self.deferred
        live = [getattr(w, n) for n in names]
        if not any(t.requires_grad for t in live):
            return state, mem
        inputs = [state.hidden, mem.memory] + ([] if state.feed is None else [state.feed])
        detached, pending, outs = defer_weight_grads(live, inputs)
        # Any: mypy matches ** against every field of replace, int8 among them
        swapped: dict[str, Any] = dict(zip(names, detached, strict=True))
        weights = replace(w, **swapped, pending=dict(zip(names, pending, strict=True)))
        feed = None if state.feed is None else outs[2]
        return (
            DecoderState(outs[0], feed, state.t),
            Memory(outs[1], mem.keys, mem.mask, mem.fixed_context, weights),
        )

    def unroll(
        self, tgt_in: torch.Tensor, state: DecoderState, mem: Memory, keep_attention: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Teacher forcing over a whole target.

        Args:
            tgt_in: (B, T) BOS y1..y_{T-1}.
            keep_attention: collect the weights; the training loss does not need them.

        Returns:
            pre-outputs (B, T, O), attention weights (B, T, S) (None for ``none``) and
            per-head weights (B, h, T, S) (``multihead`` only, else None).

        Under autograd the gradients of the step weights feed, hh and pre come as one
        product each after the loop's backward pass (``defer_weight_grads``,
        nmt/ops/weight_grads.py), the same sums as autograd's per-step ones up to float rounding.
        """
        B, T = tgt_in.shape
        y, gates, out_y = self._embed_inputs(tgt_in, mem.weights)  # (B,T,E), (B,T,3D), (B,T,O)
        if self.defer_weight_grads and torch.is_grad_enabled():
            state, mem = self._defer_weight_grads(state, mem)
        # unbind, not [:, t]: the backward of T slices would each fill a zero (B, T, *) tensor
        ys, gates_t = y.unbind(1), gates.unbind(1)
        outs_y = [None] * T if out_y is None else out_y.unbind(1)
        outs, weights, heads = [], [], []
        for t in range(T):
            step = self._step(ys[t], gates_t[t], outs_y[t], state, mem)
            state = step.state
            outs.append(step.pre_output)
            if keep_attention and step.attention is not None:
                weights.append(step.attention)
            if keep_attention and step.heads is not None:
                heads.append(step.heads)
        attn = torch.stack(weights, dim=1) if weights else None  # (B, T, S)
        per_head = torch.stack(heads, dim=2) if heads else None  # (B, h, T, S)
        return torch.stack(outs, dim=1), attn, per_head  # (B, T, O)
