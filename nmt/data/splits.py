"""Checks of a split before work is spent on it: one that BLEU cannot score is refused
before training (shared/cases NMT-45), naming the split and its files."""

from __future__ import annotations

from pathlib import Path

from nmt.config.schema import DataConfig
from nmt.data.corpus import DataError, Pair, resolve_source, split_files


def split_origin(cfg: DataConfig, split: str) -> str:
    """Where ``split`` is read from, for messages: its two files (a directory of
    ``{split}.{lang}`` files), its TSV file, or the hub dataset. Raises nothing."""
    source = resolve_source(cfg)
    if source == "dir" and cfg.path:
        directory = Path(cfg.path).expanduser()
        try:
            files = split_files(directory, split, cfg.src_lang, cfg.tgt_lang)
        except DataError:
            files = (directory / f"{split}.{cfg.src_lang}", directory / f"{split}.{cfg.tgt_lang}")
        return f"{files[0]} and {files[1]}"
    if source == "tsv" and cfg.path:
        return str(Path(cfg.path.format(split=split)).expanduser())
    return f"the {cfg.hf_name} dataset"


def require_scorable(pairs: list[Pair], cfg: DataConfig, split: str, option: str) -> None:
    """Refuse a split that BLEU cannot score: no pair with both a source and a reference
    (empty files, or one side empty on every line). Called before training, so such a
    split costs no epoch.

    Raises:
        DataError: one line naming ``option`` (e.g. ``data.valid_split``), the split and
            its files.
    """
    if any(p.src and p.tgt for p in pairs):
        return
    what = (
        "is empty" if not pairs else f"has no pair with both sides non-empty ({len(pairs)} lines)"
    )
    raise DataError(
        f"{option}: split {split!r} ({split_origin(cfg, split)}) {what}, so it "
        "cannot be scored; give a split with sentence pairs"
    )
