"""What the training store (nmt/data/store.py) is made from, and the key a cache must match.

The key (:func:`fingerprint`) is the content of the source files, never their size or
modification time: the SHA-256 of each file's text as read (:func:`nmt.data.digest.
content_sha256`), the reading and filter settings, and the settings the vocabulary was
trained with. Every pass that streams the files for the store (:func:`checked_pairs`)
hashes them on the way and refuses to finish when the content is not the one the key
was taken from, so a file edited during preparation cannot leave a store that claims the
old content.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nmt.config.schema import Config, DataConfig
from nmt.data.corpus import DataError, Pair, iter_dir_split, resolve_source, split_files
from nmt.data.digest import content_sha256
from nmt.data.vocab import Vocab

STORE_FORMAT = 1  # bump when the columns or the encoding change: older caches are rebuilt
MANIFEST, TABLE = "manifest.json", "train.arrow"
VOCAB_FILES = ("vocab.src.model", "vocab.tgt.model")


def source_files(d: DataConfig) -> tuple[Path, Path]:
    """The training split's source and target files.

    Raises:
        DataError: the data is not a directory of ``{split}.{lang}[.gz]`` files, or a
            file is missing.
    """
    if resolve_source(d) != "dir" or not d.path:
        raise DataError(
            f"data.store: arrow streams a directory of {{split}}.{{lang}}[.gz] "
            f"files, but data.path {d.path!r} is not a directory from here "
            f"({Path.cwd()}); set data.path, or data.store=memory for the hub"
        )
    return split_files(Path(d.path).expanduser(), d.train_split, d.src_lang, d.tgt_lang)


def iter_training_pairs(d: DataConfig, digests: tuple[Any, Any] | None = None) -> Iterator[Pair]:
    """The training split's pairs as read (the first ``data.train_limit`` of them), one at
    a time; the rest of the files is still read to check them, as the in-memory reader
    does. ``digests``: two ``hashlib`` objects fed the files' bytes as they are read.

    Raises:
        DataError: see :func:`nmt.data.corpus.iter_dir_split`.
    """
    directory = Path(d.path).expanduser()  # type: ignore[arg-type]  # checked by source_files
    pairs = iter_dir_split(directory, d.train_split, d.src_lang, d.tgt_lang, digests)
    for i, pair in enumerate(pairs):
        if d.train_limit is None or i < d.train_limit:
            yield pair


def checked_pairs(d: DataConfig, want: dict[str, Any] | None) -> Iterator[Pair]:
    """:func:`iter_training_pairs`, and once the files are read to the end, a check that
    their content is the one fingerprint ``want`` was taken from (nothing checked when
    ``want`` is None).

    Raises:
        DataError: as :func:`iter_training_pairs`, or a file changed while it was read
            (names it).
    """
    if want is None:
        yield from iter_training_pairs(d)
        return
    digests = (hashlib.sha256(), hashlib.sha256())
    yield from iter_training_pairs(d, digests)
    for source, h in zip(want["sources"], digests, strict=True):
        if h.hexdigest() != source["sha256"]:
            raise DataError(
                f"{source['path']}: changed while the training store was being "
                "prepared from it; nothing was kept, run again"
            )


def sample_pairs(
    d: DataConfig,
    size: int,
    *,
    seed: int,
    log: Callable[[str], None],
    want: dict[str, Any] | None = None,
) -> tuple[list[str], list[str]]:
    """A uniform sample of at most ``size`` training pairs with both sides non-empty (the
    pairs the in-memory vocabulary is trained on), drawn in one streaming pass by
    reservoir sampling (Vitter's algorithm R) with ``random.Random(seed)``: deterministic,
    memory bounded by ``size``; a split of at most ``size`` such pairs comes back whole,
    in order. With ``want`` (a :func:`fingerprint`) the files must still have its content.

    Returns:
        (sources, targets), aligned.

    Raises:
        DataError: see :func:`checked_pairs`.
    """
    rng = random.Random(seed)
    reservoir: list[tuple[str, str]] = []
    seen = 0
    began = time.monotonic()
    for p in checked_pairs(d, want):
        if not (p.src and p.tgt):
            continue
        if seen < size:
            reservoir.append((p.src, p.tgt))
        else:
            j = rng.randrange(seen + 1)
            if j < size:
                reservoir[j] = (p.src, p.tgt)
        seen += 1
        if seen % 1_000_000 == 0:
            log(f"vocabulary sample: {seen:,} pairs read, {time.monotonic() - began:.0f} s")
    log(
        f"vocabulary sample: {len(reservoir):,} of {seen:,} pairs "
        f"({time.monotonic() - began:.0f} s)"
    )
    return [s for s, _ in reservoir], [t for _, t in reservoir]


def vocab_hashes(src_vocab: Vocab, tgt_vocab: Vocab) -> list[str]:
    """SHA-256 of both serialized SentencePiece models (hex)."""
    return [hashlib.sha256(v.model_bytes).hexdigest() for v in (src_vocab, tgt_vocab)]


# subword sampling re-segments each epoch's sources from the trained model: it changes
# neither the vocabulary's training nor the store's one-best encoding, so it is no key
SEGMENTATION_ONLY = ("sampling_alpha", "nbest_size", "sample_target")


def fingerprint(cfg: Config, files: tuple[Path, Path]) -> dict[str, Any]:
    """What a cache must match to be reused: the store format, each source file's content
    (SHA-256 of its text as read; its resolved path is recorded for messages only), the
    reading and filter settings, and the settings the vocabulary was trained with (not
    the subword-sampling keys ``SEGMENTATION_ONLY``, which change neither). Reads
    both files once.

    Raises:
        DataError: a file cannot be read (see :func:`nmt.data.digest.content_sha256`).
    """
    d = cfg.data
    return {
        "format": STORE_FORMAT,
        "sources": [{"path": str(f.resolve()), "sha256": content_sha256(f)} for f in files],
        "data": {
            "src_lang": d.src_lang,
            "tgt_lang": d.tgt_lang,
            "train_split": d.train_split,
            "max_train_words": d.max_train_words,
            "train_limit": d.train_limit,
        },
        "vocab_settings": {
            **{
                f"subwords.{k}": v
                for k, v in cfg.to_dict()["subwords"].items()
                if k not in SEGMENTATION_ONLY
            },
            "train.seed": cfg.train.seed,
        },
    }


def read_manifest(cache: Path) -> dict[str, Any] | None:
    """The cache's manifest, or None when there is none (or it cannot be parsed)."""
    try:
        return json.loads((cache / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _source_change(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str | None:
    """Why the cached sources ``old`` are not the files ``new`` (a phrase), or None."""
    if len(old) != len(new):
        return "its manifest does not list both training files"
    for o, n in zip(old, new, strict=True):
        if "sha256" not in o:
            return "it was prepared before stores recorded the content of their files"
        if o["sha256"] != n["sha256"]:
            return f"the content of {Path(n['path']).name} changed"
    return None


def stale_reason(
    cache: Path, want: dict[str, Any], vocabs: tuple[Vocab, Vocab] | None
) -> str | None:
    """Why the cache in ``cache`` cannot serve a run with fingerprint ``want`` (a phrase
    for the log), or None when it can. With ``vocabs`` (a resumed run) the cached
    encoding must be theirs; without, the cached vocabulary must have been trained with
    the same settings, and its files must be the ones the table was encoded with."""
    manifest = read_manifest(cache)
    if manifest is None or not (cache / TABLE).exists():
        return "no prepared training data yet"
    if manifest.get("format") != want["format"]:
        return f"it was written in store format {manifest.get('format')}"
    changed_source = _source_change(manifest.get("sources", []), want["sources"])
    if changed_source:
        return changed_source
    changed = [k for k, v in want["data"].items() if manifest.get("data", {}).get(k) != v]
    if changed:
        return f"data.{changed[0]} changed"
    if vocabs is not None:
        if manifest.get("vocab_sha256") != vocab_hashes(*vocabs):
            return "it was encoded with another vocabulary"
        return None
    changed = [
        k
        for k, v in want["vocab_settings"].items()
        if manifest.get("vocab_settings", {}).get(k) != v
    ]
    if changed:
        return f"{changed[0]} changed"
    if not all((cache / f).exists() for f in VOCAB_FILES):
        return "its vocabulary files are missing"
    on_disk = [hashlib.sha256((cache / f).read_bytes()).hexdigest() for f in VOCAB_FILES]
    if manifest.get("vocab_sha256") != on_disk:
        return "its vocabulary files are not the ones it was encoded with"
    return None


def cached_vocabs(cache: Path) -> tuple[Vocab, Vocab]:
    """The (source, target) SentencePiece models stored with the cache.

    Raises:
        OSError: a vocabulary file cannot be read. RuntimeError: SentencePiece cannot load
            one (damaged; :func:`stale_reason` checks their hashes first).
    """
    src, tgt = ((cache / f).read_bytes() for f in VOCAB_FILES)
    return Vocab(src), Vocab(tgt)
