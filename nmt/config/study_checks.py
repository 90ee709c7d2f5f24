"""Checks of a study config's values (:class:`nmt.config.schema.StudyConfig`) that its
types cannot express, made when the study is loaded, before hours of training."""

from __future__ import annotations

from nmt.config.buckets import parse_buckets
from nmt.config.schema import ATTENTION_TYPES, ConfigError, StudyConfig


def check_study(cfg: StudyConfig) -> None:
    """Refuse impossible values of a study config.

    Raises:
        ConfigError: the first impossible value, naming its key (e.g. an unknown attention
            type in ``attentions``, a non-positive ``extra_caps`` entry, ``extra_seeds``
            without ``seed_models``, unparsable ``buckets``, a beam search without alphas).
    """
    for key in ("attentions", "cap_attentions"):
        values = getattr(cfg, key)
        for a in values:
            if a not in ATTENTION_TYPES:
                raise ConfigError(f"{key}: {a!r} is not one of {', '.join(ATTENTION_TYPES)}")
        if len(set(values)) != len(values):
            raise ConfigError(f"{key}: {list(values)} names an attention twice")
    for a in cfg.cap_attentions if cfg.extra_caps else ():
        if a not in cfg.attentions:
            raise ConfigError(f"cap_attentions: {a!r} is not in attentions")
    if any(c <= 0 for c in cfg.extra_caps):
        raise ConfigError("extra_caps: every cap must be a positive number of words")
    if any(h <= 0 for h in cfg.head_counts) or len(set(cfg.head_counts)) != len(cfg.head_counts):
        raise ConfigError(
            f"head_counts: expected distinct positive head counts, got {list(cfg.head_counts)}"
        )
    if len(set(cfg.extra_seeds)) != len(cfg.extra_seeds) or bool(cfg.seed_models) != bool(
        cfg.extra_seeds
    ):  # both set or neither
        raise ConfigError(
            f"extra_seeds: expected distinct seeds, given together with "
            f"seed_models; got {list(cfg.extra_seeds)}, {list(cfg.seed_models)}"
        )
    if len(cfg.long_heatmap_words) != 2 or cfg.long_heatmap_words[0] > cfg.long_heatmap_words[1]:
        raise ConfigError("long_heatmap_words: expected [low, high] with low <= high")
    if len(set(cfg.model_folders)) != len(cfg.model_folders):
        raise ConfigError(f"model_folders: {list(cfg.model_folders)} names a folder twice")
    if cfg.baseline not in cfg.attentions:
        raise ConfigError(f"baseline: {cfg.baseline!r} is not in attentions")
    for key in ("parallel", "min_bucket", "n_samples"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(f"{key}: must be positive")
    if any(k < 1 for k in cfg.join_ks):
        raise ConfigError("join_ks: every k must be at least 1")
    # checked here, before hours of training, with the parser the report uses
    for key in ("buckets", "drop_buckets"):
        try:
            parse_buckets(getattr(cfg, key), key)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if len(parse_buckets(cfg.drop_buckets, "drop_buckets")) != 2:
        raise ConfigError(
            f"drop_buckets: expected two ranges such as '1-10,51-60', got {cfg.drop_buckets!r}"
        )
    if cfg.beam_size < 1:
        raise ConfigError(f"beam_size: must be at least 1 (1 = greedy), got {cfg.beam_size}")
    if cfg.beam_size > 1 and (not cfg.alphas or any(a < 0 for a in cfg.alphas)):
        raise ConfigError(
            f"alphas: expected GNMT alphas >= 0 to choose from, got {list(cfg.alphas)}"
        )
