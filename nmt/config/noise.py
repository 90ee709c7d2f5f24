"""Checks of the training-noise keys: subword sampling (``subwords.sampling_alpha``,
``subwords.nbest_size``) and word dropout (``model.word_dropout``).

Kept apart from the other checks of nmt/config/checks.py, which calls :func:`validate_noise`;
the limits are SentencePiece's (``encode(..., enable_sampling=True)``, version 0.2): an
n-best list of 2..512 for unigram, none for BPE, whose alpha is a probability.
"""

from __future__ import annotations

from nmt.config.schema import Config, ConfigError


def validate_noise(cfg: Config) -> None:
    """Reject impossible subword-sampling and word-dropout settings.

    Raises:
        ConfigError: names the dotted key, e.g. ``subwords.nbest_size: must be -1 ...``.
    """
    s, m = cfg.subwords, cfg.model
    if s.sampling_alpha is not None and s.sampling_alpha < 0:
        raise ConfigError(
            f"subwords.sampling_alpha: must be >= 0 (0 or null: no sampling), "
            f"got {s.sampling_alpha}"
        )
    if s.nbest_size != -1 and not 2 <= s.nbest_size <= 512:
        raise ConfigError(
            f"subwords.nbest_size: must be -1 (sample from the whole lattice) or "
            f"2..512 (from the n best segmentations), got {s.nbest_size}"
        )
    if s.sampling_alpha:
        if s.model_type == "bpe" and s.sampling_alpha >= 1:
            raise ConfigError(
                f"subwords.sampling_alpha: with bpe it is BPE-dropout's "
                f"probability of dropping a merge and must be below 1, got "
                f"{s.sampling_alpha}"
            )
        if s.model_type == "bpe" and s.nbest_size != -1:
            raise ConfigError(
                f"subwords.nbest_size: bpe samples by BPE-dropout, which has no "
                f"n-best list; leave it at -1 (got {s.nbest_size})"
            )
        if cfg.data.store == "arrow":
            raise ConfigError(
                "subwords.sampling_alpha: subword sampling needs data.store "
                "memory (the arrow store keeps piece ids, not the text to "
                "segment again)"
            )
    if not 0.0 <= m.word_dropout < 1.0:
        raise ConfigError(f"model.word_dropout: must be in [0, 1), got {m.word_dropout}")
