"""Checks of a training config's values that its types cannot express: positive sizes,
ranges of rates, the data store and joined pairs, attention shapes, the run name, the
language pair and the device.

:func:`check_config` runs them in one fixed order, so that of several faults the same one
is always named first; nmt/config/load.py calls it on every config it builds.
"""

from __future__ import annotations

import re

from nmt.config.noise import validate_noise
from nmt.config.schema import LOCAL_KINDS, Config, ConfigError, DataConfig, ModelConfig


def check_config(cfg: Config) -> None:
    """Reject impossible values, naming the dotted key.

    Raises:
        ConfigError: the first impossible value, e.g. ``model.emb_dim: must be positive``.
    """
    _check_positive(cfg)
    _check_joins_and_store(cfg.data)
    _check_ranges(cfg)
    validate_noise(cfg)
    _check_architecture(cfg.model)
    _check_run(cfg)


def _check_positive(cfg: Config) -> None:
    """Reject a size, count or limit that is not positive (None, where allowed, is unset)
    and a negative ``search.alpha``.

    Raises:
        ConfigError: names the first such key and its value.
    """
    m, t, s, d = cfg.model, cfg.train, cfg.subwords, cfg.data
    positive = {
        "model.emb_dim": m.emb_dim,
        "model.enc_hidden": m.enc_hidden,
        "model.dec_hidden": m.dec_hidden,
        "model.enc_layers": m.enc_layers,
        "model.dec_layers": m.dec_layers,
        "model.attn_dim": m.attn_dim,
        "model.output_dim": m.output_dim,
        "subwords.vocab_size": s.vocab_size,
        "subwords.sample_size": s.sample_size,
        "train.batch_size": t.batch_size,
        "train.max_tokens": t.max_tokens,
        "train.batch_multiple": t.batch_multiple,
        "train.batch_trim": t.batch_trim,
        "train.max_epochs": t.max_epochs,
        "train.max_steps": t.max_steps,
        "train.patience": t.patience,
        "train.threads": t.threads,
        "train.valid_max_sentences": t.valid_max_sentences,
        "train.lr_patience": t.lr_patience,
        "train.warmup_steps": t.warmup_steps,
        "train.valid_every_steps": t.valid_every_steps,
        "data.max_train_words": d.max_train_words,
        "data.train_limit": d.train_limit,
        "data.valid_limit": d.valid_limit,
        "data.train_join_per_k": d.train_join_per_k,
        "search.beam_size": cfg.search.beam_size,
        "search.valid_beam_size": cfg.search.valid_beam_size,
    }
    for key, value in positive.items():
        if value is not None and value <= 0:
            raise ConfigError(f"{key}: must be positive, got {value}")
    if cfg.search.alpha < 0:
        raise ConfigError(f"search.alpha: must be >= 0, got {cfg.search.alpha}")


def _check_joins_and_store(d: DataConfig) -> None:
    """Reject a joined-pair ``k`` below 2 and a ``data.store: arrow`` that cannot hold the
    configured training data (joined pairs, a TSV or hub source).

    Raises:
        ConfigError: names the ``data.`` key at fault.
    """
    if any(k < 2 for k in d.train_join_ks):
        raise ConfigError(
            f"data.train_join_ks: every k must be at least 2, got {list(d.train_join_ks)}"
        )
    if d.store == "arrow" and d.train_join_ks:
        raise ConfigError(
            f"data.train_join_ks: joined training pairs need data.store memory "
            f"(got {list(d.train_join_ks)} with data.store arrow)"
        )
    if d.store == "arrow" and d.source in ("hf", "tsv"):
        raise ConfigError(
            f"data.store: arrow streams a directory of {{split}}.{{lang}}[.gz] "
            f"files; data.source {d.source} needs data.store memory"
        )
    if any(k < 2 for k in d.valid_join_ks):
        raise ConfigError(
            f"data.valid_join_ks: every k must be at least 2, got {list(d.valid_join_ks)}"
        )


def _check_ranges(cfg: Config) -> None:
    """Reject a rate, learning rate, budget or SentencePiece setting outside its range
    (dropout and label smoothing in [0, 1), ``train.lr_decay`` in (0, 1), ...).

    Raises:
        ConfigError: names the key (or keys) at fault.
    """
    m, t, s = cfg.model, cfg.train, cfg.subwords
    if not 0.0 <= m.dropout < 1.0:
        raise ConfigError(f"model.dropout: must be in [0, 1), got {m.dropout}")
    if not 0.0 <= t.label_smoothing < 1.0:
        raise ConfigError(f"train.label_smoothing: must be in [0, 1), got {t.label_smoothing}")
    above_zero: dict[str, float | None] = {
        "train.lr": t.lr,
        "train.clip_norm": t.clip_norm,
        "train.max_output_ratio": t.max_output_ratio,
        "train.max_minutes": t.max_minutes,
    }
    for key, amount in above_zero.items():
        if amount is not None and amount <= 0:
            raise ConfigError(f"{key}: must be positive, got {amount}")
    if not 0.0 < t.lr_decay < 1.0:
        raise ConfigError(f"train.lr_decay: must be in (0, 1), got {t.lr_decay}")
    if t.min_lr < 0 or t.keep_checkpoints < 0:
        raise ConfigError("train.min_lr and train.keep_checkpoints: must be >= 0")
    if s.vocab_size < 8:
        raise ConfigError(f"subwords.vocab_size: must be at least 8, got {s.vocab_size}")
    if not 0.0 < s.character_coverage <= 1.0:
        raise ConfigError("subwords.character_coverage: must be in (0, 1]")


def _check_architecture(m: ModelConfig) -> None:
    """Reject model sizes that the chosen attention, encoder or output layer cannot use
    (dot scores need ``dec_hidden == 2 * enc_hidden``, heads must divide the memory, ...).

    Raises:
        ConfigError: names the ``model.`` key at fault, with the sizes involved.
    """
    if m.attention in ("dot", "scaled_dot") and m.dec_hidden != 2 * m.enc_hidden:
        raise ConfigError(
            f"model.attention: {m.attention!r} scores s.h_i and needs model.dec_hidden "
            f"== 2 * model.enc_hidden, got {m.dec_hidden} and 2 * {m.enc_hidden}"
        )
    if (
        m.attention in LOCAL_KINDS
        and m.local_score in ("dot", "scaled_dot")
        and m.dec_hidden != 2 * m.enc_hidden
    ):
        raise ConfigError(
            f"model.local_score: {m.local_score!r} scores s.h_i and needs model.dec_hidden "
            f"== 2 * model.enc_hidden, got {m.dec_hidden} and 2 * {m.enc_hidden}"
        )
    # local_window and heads are checked only where they are used, so a config (or an
    # older checkpoint) with, say, an odd memory size stays valid for other attentions
    if m.attention in LOCAL_KINDS and m.local_window < 1:
        raise ConfigError(f"model.local_window: must be >= 1, got {m.local_window}")
    if m.attention == "multihead" and (m.heads < 1 or (2 * m.enc_hidden) % m.heads):
        raise ConfigError(
            f"model.heads: {m.heads} must be >= 1 and divide the memory size "
            f"2 * model.enc_hidden = {2 * m.enc_hidden}"
        )
    if m.enc_residual and m.enc_layers < 2:
        raise ConfigError(f"model.enc_residual: needs model.enc_layers >= 2, got {m.enc_layers}")
    if m.tie_embeddings and m.output_dim != m.emb_dim:
        raise ConfigError(
            f"model.tie_embeddings: needs model.output_dim ({m.output_dim}) == "
            f"model.emb_dim ({m.emb_dim})"
        )


def _check_run(cfg: Config) -> None:
    """Reject a run name that cannot name a directory, a language pair of one language and
    a device that is not ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        ConfigError: names ``name``, ``data.tgt_lang`` or ``train.device``.
    """
    d, t = cfg.data, cfg.train
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", cfg.name):
        raise ConfigError(
            f"name: {cfg.name!r} must be ASCII letters (A-Z, a-z), digits (0-9), "
            "'.', '_' or '-', beginning with a letter or digit (it names the run "
            "directory)"
        )
    if d.src_lang == d.tgt_lang:
        raise ConfigError(f"data.tgt_lang: same as data.src_lang ({d.src_lang!r})")
    if t.device != "auto" and not (t.device == "cpu" or t.device.startswith("cuda")):
        raise ConfigError(f"train.device: expected auto, cpu, cuda or cuda:N, got {t.device!r}")
