"""What one training run learns from: the training pairs (the split, joined pairs, the
length filter) and the SentencePiece vocabularies trained on them.

``nmt train``, ``nmt bench`` and the study report build their training data through these,
so each sees the same pairs and pieces for one config.
"""

from __future__ import annotations

from collections.abc import Callable

from nmt.config.schema import Config, DataConfig
from nmt.data.batches import FilterStats, add_joined_pairs, filter_training_pairs
from nmt.data.corpus import Pair, read_split
from nmt.data.vocab import Vocab, train_vocab


def build_vocabs(
    cfg: Config, pairs: list[Pair], log: Callable[[str], None] = print
) -> tuple[Vocab, Vocab]:
    """Train SentencePiece on the training pairs only (joint or one per side); see
    :func:`vocabs_from_sentences`.

    Raises:
        ValueError: SentencePiece refuses the settings (see :func:`nmt.data.vocab.train_vocab`).
    """
    return vocabs_from_sentences(cfg, [p.src for p in pairs], [p.tgt for p in pairs], log=log)


def vocabs_from_sentences(
    cfg: Config,
    sources: list[str],
    targets: list[str],
    *,
    log: Callable[[str], None] = print,
    input_sentence_size: int = 2_000_000,
) -> tuple[Vocab, Vocab]:
    """Train SentencePiece on aligned training sentences (joint or one per side); of more
    than ``input_sentence_size`` sentences per model it samples that many. A corpus too
    small for ``subwords.vocab_size`` gets a smaller model and a visible warning.

    Raises:
        ValueError: SentencePiece refuses the settings (see :func:`nmt.data.vocab.train_vocab`).
    """
    s = cfg.subwords
    if s.joint:
        joint = train_vocab(
            sources + targets,
            s.vocab_size,
            model_type=s.model_type,
            character_coverage=s.character_coverage,
            input_sentence_size=input_sentence_size,
        )
        sides = {"joint": joint}
    else:
        sides = {
            side: train_vocab(
                text,
                s.vocab_size,
                model_type=s.model_type,
                character_coverage=s.character_coverage,
                input_sentence_size=input_sentence_size,
            )
            for side, text in (("src", sources), ("tgt", targets))
        }
    for side, vocab in sides.items():
        if len(vocab) < s.vocab_size:
            log(
                f"warning: subwords.vocab_size: {s.vocab_size} is more than the {side} side of "
                f"this corpus supports; using {len(vocab)} pieces"
            )
    if s.joint:
        return sides["joint"], sides["joint"]
    return sides["src"], sides["tgt"]


def sample_vocab_trainer(
    cfg: Config, log: Callable[[str], None] = print
) -> Callable[[list[str], list[str]], tuple[Vocab, Vocab]]:
    """The arrow store's vocabulary step: :func:`vocabs_from_sentences` on the whole
    reservoir sample (``subwords.sample_size`` already bounds it), as a callable of
    (sources, targets)."""
    return lambda src, tgt: vocabs_from_sentences(
        cfg, src, tgt, log=log, input_sentence_size=max(2_000_000, 2 * len(src))
    )


def training_pairs(d: DataConfig) -> tuple[list[Pair], list[Pair], FilterStats]:
    """The pairs one training epoch runs over: ``data.train_split`` (its first
    ``data.train_limit`` pairs), plus joined pairs for ``data.train_join_ks`` (at most
    ``data.train_join_per_k`` per k), without empty
    pairs and pairs over ``data.max_train_words`` words.

    Returns:
        (pairs as read, pairs to train on, what the filter dropped).

    Raises:
        DataError: the split cannot be read (see :func:`nmt.data.corpus.read_split`).
    """
    raw = read_split(d, d.train_split, d.train_limit)
    joined = add_joined_pairs(raw, d.train_join_ks, d.train_join_per_k)
    kept, stats = filter_training_pairs(joined, d.max_train_words)
    return raw, kept, stats


def log_filter(d: DataConfig, stats: FilterStats, log: Callable[[str], None]) -> None:
    joined = f" (with joined pairs for k in {list(d.train_join_ks)})" if d.train_join_ks else ""
    log(
        f"train {d.src_lang}->{d.tgt_lang}{joined}: kept {stats.kept} pairs, skipped "
        f"{stats.empty} with an empty side and {stats.too_long} longer than "
        f"{d.max_train_words} words"
    )
    if stats.skipped:
        n = stats.skipped_count
        more = f", and {n - 10} more" if n > 10 else ""
        log(f"skipped training pairs: {'; '.join(stats.skipped[:10])}{more}")
