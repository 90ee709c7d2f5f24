"""Analytic FLOPs of one training step, counted from the layer sizes of a model config.

What is counted: every matrix product of the forward pass, as multiply-adds (MACs), split
by what it scales with:

* **per source token** (real tokens, EOS included; the encoder runs on packed sequences):
  the bidirectional GRU, ``2 directions x 3H (in + H)`` with ``in = E`` for the first
  layer and ``2H`` above it (``model.enc_residual``'s additions are elementwise), and the
  attention keys computed once per source token
  (additive ``U h_i``: ``M A``; general ``W h_i``: ``M D``; multihead ``W^K``, ``W^V``:
  ``2 M M``; dot and scaled dot: none);
* **per target token** (real target pieces + EOS): the decoder GRU cell,
  ``3D (E + F + D)`` with the fed vector ``F = M`` (``bahdanau``: the context) or ``O``
  (``luong``: input feeding), or ``cgru``'s two GRUs ``3D (E + D) + 3D (M + D)``,
  ``3D (D + D)`` for each layer above; the attention's
  per-query products (additive ``W s``: ``D A``; multihead ``W^Q`` and ``W^O``:
  ``D M + M M``; ``local_p``'s position predictor ``v_p^T tanh(W_p s)``: ``D A + A``);
  the pre-output layer (``bahdanau``, ``cgru``: ``(D + M + E) O``; ``luong``: ``(M + D) O``) and
  the generator ``O V`` (the logits for the softmax; as many with ``model.tie_embeddings``);
* **per attended position**, i.e. per (target token, real source position) pair: the
  score (additive ``v``: ``A``; dot, scaled dot, multihead: ``M``; general: ``D``) and the
  context vector's weighted sum (``M``). Additive attention's ``tanh(W s + U h_i)`` over
  (S, A) is the one elementwise term counted, as one MAC per element (an add and a
  tanh), because it grows with ``S A`` like the ``v`` products do. Local attention is
  counted over every source position, as nmt/model/attention.py computes it (scores for all
  positions, then a window mask). The fixed-vector model (``none``) has no such term.

A training step is counted as 3 forward passes (forward, and a backward that costs about
twice the forward) at 2 FLOPs per MAC: ``6 x MACs``.

Left out: biases, embedding lookups, every elementwise operation other than the additive
tanh above (GRU gate nonlinearities and products, softmaxes, masks, dropout, the loss),
per-sentence work (the decoder's initial state ``tanh(W_init [h_fwd; h_bwd])`` and the
fixed-vector model's context layer), the optimizer update and gradient clipping (per
step, not per token), and all work on padding positions: the decoder runs over padded
target positions and attention reads padded source positions, but that work is not
useful, so it shows as a lower achieved FLOP/s, not as more FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from nmt.config.schema import ModelConfig
from nmt.model.attention_factory import attention_macs

TRAIN_FLOPS_PER_MAC = 6  # 2 FLOPs per multiply-add, forward + backward = 3 forward passes


@dataclass(frozen=True)
class ForwardMacs:
    """Forward multiply-adds of one model, by term (name -> MACs), per unit of work.

    Attributes:
        per_source_token: MACs for each real source token.
        per_target_token: MACs for each real target token (pieces + EOS).
        per_attended_position: MACs for each (target token, real source position) pair.
    """

    per_source_token: dict[str, int]
    per_target_token: dict[str, int]
    per_attended_position: dict[str, int]


@dataclass(frozen=True)
class TokenCounts:
    """Real (unpadded) work in some batches.

    Attributes:
        source_tokens: source pieces + EOS, summed over sentences.
        target_tokens: target pieces + EOS, summed over sentences.
        attended_positions: sum over sentences of (target tokens x source tokens).
    """

    source_tokens: int
    target_tokens: int
    attended_positions: int

    def __add__(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(
            self.source_tokens + other.source_tokens,
            self.target_tokens + other.target_tokens,
            self.attended_positions + other.attended_positions,
        )


def forward_macs(cfg: ModelConfig, tgt_vocab_size: int) -> ForwardMacs:
    """Forward multiply-adds of the model ``cfg`` describes, counted as the module
    docstring says.

    Args:
        cfg: the model's sizes (E, H, D, A, O, layers, attention, step order).
        tgt_vocab_size: V, the generator's output size.

    Raises:
        ValueError: an attention or local score this count does not know.
    """
    E, H, D, O = cfg.emb_dim, cfg.enc_hidden, cfg.dec_hidden, cfg.output_dim  # noqa: E741 (O: output size, the docstring's notation)
    M = 2 * H
    encoder = sum(2 * 3 * H * ((E if layer == 0 else M) + H) for layer in range(cfg.enc_layers))
    if cfg.step_order == "cgru":  # GRU_1 on E y, GRU_2 on the context c
        first = 3 * D * (E + D) + 3 * D * (M + D)
    else:
        first = 3 * D * (E + (M if cfg.step_order == "bahdanau" else O) + D)
    gru = first + sum(3 * D * (D + D) for _ in range(1, cfg.dec_layers))
    pre_output = (M + D) * O if cfg.step_order == "luong" else (D + M + E) * O
    keys, query, per_position = attention_macs(cfg)
    return ForwardMacs(
        per_source_token={"encoder_gru": encoder, "attention_keys": keys},
        per_target_token={
            "decoder_gru": gru,
            "attention_query": query,
            "pre_output": pre_output,
            "generator": O * tgt_vocab_size,
        },
        per_attended_position={"attention_scores_and_context": per_position},
    )


def training_flops_by_term(macs: ForwardMacs, counts: TokenCounts) -> dict[str, float]:
    """Training FLOPs (``6 x`` forward MACs) of the work in ``counts``, by term."""
    out: dict[str, float] = {}
    for per, n in (
        (macs.per_source_token, counts.source_tokens),
        (macs.per_target_token, counts.target_tokens),
        (macs.per_attended_position, counts.attended_positions),
    ):
        for name, value in per.items():
            out[name] = float(TRAIN_FLOPS_PER_MAC * value * n)
    return out


def training_flops(macs: ForwardMacs, counts: TokenCounts) -> float:
    """Training FLOPs of the work in ``counts``: one step over those tokens."""
    return sum(training_flops_by_term(macs, counts).values())
