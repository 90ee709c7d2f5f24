"""The one switch from ``model.attention`` to a module, and each module's FLOP count.

A new scorer is one class in nmt/model/attention.py (with ``read`` and a static ``macs``)
plus one line in :data:`SCORERS`; its name must also join ``ScoreKind`` (and
``AttentionKind``) in nmt/config/schema.py, which the config loader checks against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from nmt.config.schema import LOCAL_KINDS, SCORE_KINDS, AttentionKind, ModelConfig
from nmt.model.attention import (
    AdditiveScorer,
    Attention,
    DotScorer,
    GeneralScorer,
    GlobalScorer,
    LocalAttention,
)
from nmt.model.multihead import MultiHeadAttention

# global score kind -> (query_dim, memory_dim, attn_dim, attention_bias) -> scorer
SCORERS: dict[str, Callable[[int, int, int, bool], GlobalScorer]] = {
    "additive": lambda q, m, a, bias: AdditiveScorer(q, m, a, bias),
    "dot": lambda q, m, a, bias: DotScorer(scaled=False),
    "scaled_dot": lambda q, m, a, bias: DotScorer(scaled=True),
    "general": lambda q, m, a, bias: GeneralScorer(q, m),
}
# the class that counts each global score kind's multiply-adds
_SCORER_CLASSES: dict[str, type[AdditiveScorer | DotScorer | GeneralScorer]] = {
    "additive": AdditiveScorer,
    "dot": DotScorer,
    "scaled_dot": DotScorer,
    "general": GeneralScorer,
}
assert set(SCORERS) == set(SCORE_KINDS) == set(_SCORER_CLASSES), "ScoreKind and SCORERS differ"
assert set(SCORE_KINDS) <= set(get_args(AttentionKind))


def build_scorer(
    kind: str, query_dim: int, memory_dim: int, attn_dim: int, attention_bias: bool = True
) -> GlobalScorer | None:
    """The global scorer for ``kind``; ``none`` (fixed-vector model) has no scorer.
    ``attention_bias`` is the additive scorer's key bias (see :class:`AdditiveScorer`).

    Raises:
        ValueError: unknown kind, or dot/scaled_dot with ``query_dim != memory_dim``.
    """
    if kind == "none":
        return None
    return _global_scorer(kind, query_dim, memory_dim, attn_dim, attention_bias)


def _global_scorer(
    kind: str, query_dim: int, memory_dim: int, attn_dim: int, attention_bias: bool
) -> GlobalScorer:
    """:func:`build_scorer` for a kind other than ``none``."""
    if kind not in SCORERS:
        raise ValueError(f"unknown attention type {kind!r}")
    if kind in ("dot", "scaled_dot") and query_dim != memory_dim:
        raise ValueError(
            f"{kind} attention needs decoder size {query_dim} == memory size {memory_dim}"
        )
    return SCORERS[kind](query_dim, memory_dim, attn_dim, attention_bias)


def build_attention(
    kind: str,
    query_dim: int,
    memory_dim: int,
    attn_dim: int,
    *,
    local_score: str = "general",
    window: int = 10,
    heads: int = 4,
    attention_bias: bool = True,
) -> Attention | None:
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
    if kind in LOCAL_KINDS:
        if local_score not in SCORE_KINDS:
            raise ValueError(
                f"unknown local attention score {local_score!r}; expected one "
                f"of {', '.join(SCORE_KINDS)}"
            )
        scorer = _global_scorer(local_score, query_dim, memory_dim, attn_dim, attention_bias)
        return LocalAttention(kind, scorer, query_dim, window, attn_dim)
    if kind == "multihead":
        return MultiHeadAttention(memory_dim, heads, query_dim=query_dim)
    return build_scorer(kind, query_dim, memory_dim, attn_dim, attention_bias)


def attention_macs(cfg: ModelConfig) -> tuple[int, int, int]:
    """Forward multiply-adds (per source token, per target token, per attended position)
    of ``cfg``'s attention, the context vector's weighted sum (M per position) included;
    zeros for ``none``.

    Raises:
        ValueError: an attention or local score without a count.
    """
    M, D, A = 2 * cfg.enc_hidden, cfg.dec_hidden, cfg.attn_dim
    if cfg.attention == "none":
        return 0, 0, 0
    if cfg.attention == "multihead":
        return MultiHeadAttention.macs(M, D)
    local = cfg.attention in LOCAL_KINDS
    kind = cfg.local_score if local else cfg.attention
    if kind not in _SCORER_CLASSES:
        raise ValueError(f"unknown attention score {kind!r}")
    src, tgt, pos = _SCORER_CLASSES[kind].macs(M, D, A)
    if local:
        tgt += LocalAttention.predictor_macs(cfg.attention, D, A)
    return src, tgt, pos + M
