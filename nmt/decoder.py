"""GRU decoder with a selectable attention and either published step order.

One method, :meth:`Decoder.step`, advances every sentence of a batch by one target token;
teacher forcing (:meth:`Decoder.unroll`) and search both call it, so training and
inference compute the same thing.

Step orders (everything else is equal across attention types, for fair comparisons):

* ``bahdanau`` (Bahdanau et al. 2015, appendix A.2): attend with s_{t-1}, then
  ``s_t = GRU([E y_{t-1}; c_t], s_{t-1})``, pre-output ``tanh(W_o [s_t; c_t; E y_{t-1}])``.
* ``luong`` (Luong et al. 2015, sec. 3 and 3.3): ``s_t = GRU([E y_{t-1}; h~_{t-1}], s_{t-1})``
  (input feeding), attend with s_t, attentional vector ``h~_t = tanh(W_c [c_t; s_t])``.

Attention is global (additive, dot, general, scaled_dot), local (``local_m``, ``local_p``;
Luong et al. 2015, sec. 3.2) or ``multihead`` (Vaswani et al. 2017, sec. 3.2.2, one query
per step); :func:`build_attention` is the switch.
With attention ``none`` (Cho et al. 2014, eq. 3-4) the context ``c = tanh(V [h_fwd_n; h_bwd_1])``
is computed once from the encoder's final states and given to every step unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nmt.attention import LocalAttention, build_scorer
from nmt.encoder import EncoderOutput
from nmt.multihead import MultiHeadAttention
from nmt.precision import cast_for_autocast
from nmt.vocab import PAD

GLOBAL_SCORES = ("additive", "dot", "general", "scaled_dot")

# Search steps (no autograd) with at most this many rows compute their linear maps in the
# other GEMM orientation; see step_addmm.
FLIP_ROWS = 160


def step_addmm(base: torch.Tensor | None, x: torch.Tensor, w_t: torch.Tensor) -> torch.Tensor:
    """``base + x @ w_t`` for one decoder step: ``torch.addmm``, up to float rounding.

    Args:
        base: (N,) bias or (B, N), or None for ``x @ w_t`` (a layer without bias).
        x: (B, K) the step's rows. w_t: (K, N), a transposed weight (N, K) as nn.Linear
            stores it.

    Returns:
        (B, N), contiguous.

    Search steps (autograd off) with B <= ``FLIP_ROWS`` rows compute ``(W x^T + base^T)^T``
    instead, which MKL runs faster when the rows are few and the weights come cold from
    memory. Measured on a 2-core AVX2 EPYC (2026-11-30), reference model
    (configs/bench_reference.yaml), 1,000 test_2016_flickr sentences, passes alternating
    in one process: greedy search in batches of 64 translated 214 sentences/s with every
    step map flipped, 202 with the output layer only, 180 with none; beam 5 (320 rows at
    first) was unchanged with FLIP_ROWS 160 and 12% slower with 400. Training keeps
    ``torch.addmm``. Raises what torch.addmm raises for mismatched shapes.
    """
    if torch.is_grad_enabled() or x.size(0) > FLIP_ROWS:
        return torch.mm(x, w_t) if base is None else torch.addmm(base, x, w_t)
    if base is None:  # a layer without bias (e.g. model.output_bias: false)
        return torch.mm(w_t.t(), x.t()).t().contiguous()
    b = base[:, None] if base.dim() == 1 else base.t()
    return torch.addmm(b, w_t.t(), x.t()).t().contiguous()


def build_attention(kind: str, query_dim: int, memory_dim: int, attn_dim: int, *,
                    local_score: str = "general", window: int = 10, heads: int = 4,
                    attention_bias: bool = True) -> nn.Module | None:
    """The decoder's attention for ``kind`` (``model.attention``).

    Args:
        kind: additive | dot | general | scaled_dot (global), local_m | local_p (local,
            scored with ``local_score``), multihead (``heads`` heads), or none.
        query_dim: D. memory_dim: M. attn_dim: A (additive scorer, local_p predictor).
        attention_bias: the additive scorer's key bias (``model.attention_bias``).

    Returns:
        a module with ``precompute(memory)`` and ``read(query, keys, memory, mask, t) ->
        (context (B, M), weights (B, S), per-head weights (B, h, S) or None)``, or None
        for ``none``.

    Raises:
        ValueError: unknown kind or score, dot scores with ``query_dim != memory_dim``,
            a window < 1, or ``memory_dim`` not divisible by ``heads``.
    """
    if kind in ("local_m", "local_p"):
        if local_score not in GLOBAL_SCORES:
            raise ValueError(f"unknown local attention score {local_score!r}; expected one "
                             f"of {', '.join(GLOBAL_SCORES)}")
        scorer = build_scorer(local_score, query_dim, memory_dim, attn_dim, attention_bias)
        return LocalAttention(kind, scorer, query_dim, window, attn_dim)
    if kind == "multihead":
        return MultiHeadAttention(memory_dim, heads, query_dim=query_dim)
    return build_scorer(kind, query_dim, memory_dim, attn_dim, attention_bias)


@dataclass
class Memory:
    """Per-sentence encoder results the decoder reads at every step.

    Attributes:
        memory: (B, S, M). keys: (B, S, *) precomputed scorer keys, or None for ``none``.
        mask: (B, S). fixed_context: (B, M) for ``none``, else None.
    """

    memory: torch.Tensor
    keys: torch.Tensor | None
    mask: torch.Tensor
    fixed_context: torch.Tensor | None

    def index_select(self, idx: torch.Tensor) -> "Memory":
        """Rows ``idx`` (K,) of every tensor (for beam search reordering)."""
        pick = lambda t: None if t is None else t.index_select(0, idx)  # noqa: E731
        return Memory(pick(self.memory), pick(self.keys), pick(self.mask), pick(self.fixed_context))


@dataclass
class DecoderState:
    """Recurrent state. hidden: (L, B, D). feed: (B, O) last attentional vector (luong).
    t: the target position (0-based) of the next step, shared by every row (local_m's
    window centre)."""

    hidden: torch.Tensor
    feed: torch.Tensor | None
    t: int = 0

    def index_select(self, idx: torch.Tensor) -> "DecoderState":
        """Rows ``idx`` (K,) of the state: hidden (L, K, D), feed (K, O)."""
        return DecoderState(self.hidden.index_select(1, idx),
                            None if self.feed is None else self.feed.index_select(0, idx),
                            self.t)


@dataclass
class StepOutput:
    """pre_output: (B, O) input to the generator. attention: (B, S) weights, or None;
    for ``multihead`` the mean over heads, with each head's weights in heads (B, h, S)."""

    pre_output: torch.Tensor
    state: DecoderState
    attention: torch.Tensor | None
    heads: torch.Tensor | None = None


class Decoder(nn.Module):
    """Conditional GRU decoder.

    Args:
        vocab_size: V_tgt. emb_dim: E. hidden: D. layers: L. memory_dim: M.
        attention: additive | dot | general | scaled_dot | local_m | local_p | multihead |
            none. step_order: bahdanau | luong. attn_dim: A. output_dim: O.
        dropout: probability. local_score, window: local attention's score and D.
        heads: multihead's h. attention_bias: the additive scorer's key bias.
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, layers: int,
                 memory_dim: int, attention: str, step_order: str, attn_dim: int,
                 output_dim: int, dropout: float, *, local_score: str = "general",
                 window: int = 10, heads: int = 4, attention_bias: bool = True):
        super().__init__()
        self.attention_type, self.step_order = attention, step_order
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.dropout = nn.Dropout(dropout)
        self.scorer = build_attention(attention, hidden, memory_dim, attn_dim,
                                      local_score=local_score, window=window, heads=heads,
                                      attention_bias=attention_bias)
        # the fixed-vector model's c; unused parameters otherwise are not created
        self.fixed = nn.Linear(memory_dim, memory_dim) if attention == "none" else None
        self.init = nn.Linear(memory_dim, layers * hidden)
        feed_dim = memory_dim if step_order == "bahdanau" else output_dim
        self.cells = nn.ModuleList(
            nn.GRUCell(emb_dim + feed_dim if i == 0 else hidden, hidden) for i in range(layers)
        )
        if step_order == "bahdanau":
            self.pre_output = nn.Linear(hidden + memory_dim + emb_dim, output_dim)
        else:
            self.pre_output = nn.Linear(memory_dim + hidden, output_dim)
        self.layers, self.hidden, self.output_dim = layers, hidden, output_dim

    def start(self, enc: EncoderOutput) -> tuple[Memory, DecoderState]:
        """Prepare memory and the initial state ``s_0 = tanh(W_init [h_fwd_n; h_bwd_1])``.
        Under autocast the memory, which every step reads, is cast once here."""
        B = enc.final.size(0)
        memory = cast_for_autocast(enc.memory)  # (B, S, M)
        keys = None if self.scorer is None else self.scorer.precompute(memory)
        fixed = None if self.fixed is None else torch.tanh(self.fixed(enc.final))  # (B, M)
        mem = Memory(memory, keys, enc.mask, fixed)
        h0 = torch.tanh(self.init(enc.final)).view(B, self.layers, self.hidden)
        h0 = h0.transpose(0, 1).contiguous()  # (L, B, D)
        feed = None
        if self.step_order == "luong":
            feed = enc.memory.new_zeros(B, self.output_dim)
        return mem, DecoderState(h0, feed)

    def _read(self, query: torch.Tensor, mem: Memory, t: int
              ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """context (B, M), attention weights (B, S) or None, per-head weights (B, h, S)."""
        if self.scorer is None:
            return mem.fixed_context, None, None
        return self.scorer.read(query, mem.keys, mem.memory, mem.mask, t)

    def _embed_inputs(self, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor,
                                                          torch.Tensor | None]:
        """The parts of a step that depend only on the previous target ids, for any number
        of positions at once (teacher forcing computes them for all T in one matrix
        multiply instead of T small ones).

        Args:
            prev: (...) previous target ids.

        Returns:
            y: (..., E) embeddings after dropout; gates: (..., 3D) ``W_ih[:, :E] y + b_ih``,
            the embedding's share of the first GRU layer's input gates; out_y: (..., O)
            ``W_o[:, -E:] y``, the embedding's share of the pre-output (bahdanau), else None.
        """
        y = self.dropout(self.embed(prev))
        cell, E = self.cells[0], y.size(-1)
        if y.dim() == 2:  # one search or decoding step
            gates = step_addmm(cell.bias_ih, y, cell.weight_ih[:, :E].t())
        else:
            gates = torch.nn.functional.linear(y, cell.weight_ih[:, :E], cell.bias_ih)
        out_y = None
        if self.step_order == "bahdanau":
            out_y = torch.nn.functional.linear(y, self.pre_output.weight[:, -E:])
        return y, gates, out_y

    def _recurrent_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The per-step weights, transposed, for teacher forcing to take once for all steps:
        the feed's share of the first GRU layer's W_ih (F, 3D), its W_hh (D, 3D), and the
        pre-output's weight for ``[c_t; s_t]`` (luong, (M+D, O)) or ``[s_t; c_t]``
        (bahdanau, (D+M, O)).

        Taken once, autograd slices each parameter once, not once per step; under autocast
        they are also cast once (:func:`nmt.precision.cast_for_autocast`): autocast caches
        the casts of parameters, not of views of them.
        """
        cell = self.cells[0]
        E = self.embed.embedding_dim
        W = self.pre_output.weight
        w_pre = W[:, : W.size(1) - E].t() if self.step_order == "bahdanau" else W.t()
        return tuple(cast_for_autocast(w) for w in (cell.weight_ih[:, E:].t(),
                                                    cell.weight_hh.t(), w_pre))

    def _rnn(self, y_gates: torch.Tensor, feed: torch.Tensor, hidden: torch.Tensor,
             weights: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The GRU stack for one step.

        The first layer is nn.GRUCell's formula written out (Cho et al. 2014, eq. 5-8, gate
        order r, z, n as in torch), so that the embedding's share of its input gates,
        ``y_gates`` (B, 3D), can come precomputed; ``feed`` (B, F) is the rest of its
        input (the context vector, or input feeding's h~_{t-1}). hidden: (L, B, D).
        weights: :meth:`_recurrent_weights`.
        Returns the new hidden states (L, B, D).
        """
        cell, D = self.cells[0], self.hidden
        w_feed, w_hh = weights[:2]
        # .float(): under autocast the products come back bf16/fp16, but the recurrent
        # state stays fp32 (a no-op in fp32 training)
        gi = step_addmm(y_gates, feed, w_feed).float()  # (B, 3D)
        h = hidden[0].float()
        gh = step_addmm(cell.bias_hh, h, w_hh).float()  # (B, 3D)
        # split, not [:, a:b]: the backward of a split is one cat, of a slice a zero fill
        gi_rz, gi_n = gi.split((2 * D, D), dim=1)
        gh_rz, gh_n = gh.split((2 * D, D), dim=1)
        r, z = torch.sigmoid(gi_rz + gh_rz).split(D, dim=1)
        n = torch.tanh(gi_n + r * gh_n)
        h = torch.lerp(n, h, z)  # (1 - z) * n + z * h
        if self.layers == 1:
            return h.unsqueeze(0)  # a view: no copy per step, forward or backward
        new = [h]
        for i in range(1, self.layers):
            h = self.cells[i](self.dropout(h), hidden[i])  # (B, D)
            new.append(h)
        return torch.stack(new)  # (L, B, D)

    def step(self, prev: torch.Tensor, state: DecoderState, mem: Memory) -> StepOutput:
        """Advance one target position.

        Args:
            prev: (B,) previous target ids (BOS at the first step).
            state: hidden (L, B, D). mem: :class:`Memory` for the same B sentences.

        Returns:
            :class:`StepOutput` with pre_output (B, O) and attention weights (B, S).
        """
        return self._step(*self._embed_inputs(prev), state, mem)

    def _step(self, y: torch.Tensor, y_gates: torch.Tensor, out_y: torch.Tensor | None,
              state: DecoderState, mem: Memory,
              recurrent: tuple[torch.Tensor, ...] | None = None) -> StepOutput:
        """:meth:`step` from the precomputed parts of :meth:`_embed_inputs` (B, *) and,
        optionally, :meth:`_recurrent_weights`."""
        t = state.t
        recurrent = recurrent if recurrent is not None else self._recurrent_weights()
        w_pre = recurrent[2]
        if self.step_order == "bahdanau":
            context, weights, heads = self._read(state.hidden[-1], mem, t)  # (B, M), (B, S)
            hidden = self._rnn(y_gates, context, state.hidden, recurrent)
            # W_o [s_t; c_t; E y] with the E y share (out_y) computed beforehand
            pre = step_addmm(out_y + self.pre_output.bias, torch.cat([hidden[-1], context], -1),
                             w_pre)
            out = torch.tanh(pre)
            return StepOutput(self.dropout(out), DecoderState(hidden, None, t + 1), weights, heads)
        hidden = self._rnn(y_gates, state.feed, state.hidden, recurrent)
        context, weights, heads = self._read(hidden[-1], mem, t)
        out = torch.tanh(step_addmm(self.pre_output.bias, torch.cat([context, hidden[-1]], dim=-1),
                                    w_pre))  # h~_t
        return StepOutput(self.dropout(out), DecoderState(hidden, out, t + 1), weights, heads)

    def unroll(self, tgt_in: torch.Tensor, state: DecoderState, mem: Memory,
               keep_attention: bool = True
               ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Teacher forcing over a whole target.

        Args:
            tgt_in: (B, T) BOS y1..y_{T-1}.
            keep_attention: collect the weights; the training loss does not need them.

        Returns:
            pre-outputs (B, T, O), attention weights (B, T, S) (None for ``none``) and
            per-head weights (B, h, T, S) (``multihead`` only, else None).
        """
        B, T = tgt_in.shape
        y, gates, out_y = self._embed_inputs(tgt_in)  # (B, T, E), (B, T, 3D), (B, T, O)
        # unbind, not [:, t]: the backward of T slices would each fill a zero (B, T, *) tensor
        ys, gates_t = y.unbind(1), gates.unbind(1)
        outs_y = [None] * T if out_y is None else out_y.unbind(1)
        recurrent = self._recurrent_weights()
        outs, weights, heads = [], [], []
        for t in range(T):
            step = self._step(ys[t], gates_t[t], outs_y[t], state, mem, recurrent)
            state = step.state
            outs.append(step.pre_output)
            if keep_attention and step.attention is not None:
                weights.append(step.attention)
            if keep_attention and step.heads is not None:
                heads.append(step.heads)
        attn = torch.stack(weights, dim=1) if weights else None  # (B, T, S)
        per_head = torch.stack(heads, dim=2) if heads else None  # (B, h, T, S)
        return torch.stack(outs, dim=1), attn, per_head  # (B, T, O)
