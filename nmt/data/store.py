"""The training split on disk (``data.store: arrow``): streamed, encoded once, memory-mapped.

A corpus larger than memory (WMT14 en-fr: 36M pairs) cannot be a list of Python objects.
Here the training files are read line by line (:func:`nmt.data.corpus.iter_dir_split`, so the
cleaning and the errors naming file and line are those of the in-memory reader), filtered
like :func:`nmt.data.batches.filter_training_pairs`, encoded with SentencePiece a chunk at a time
and written once into an Arrow file that a ``datasets.Dataset`` memory-maps: columns
``src`` (piece ids ending in EOS), ``tgt`` (piece ids), ``src_len`` and ``tgt_len``.

The cache lives in ``{out_dir}/data/`` beside a manifest (``manifest.json``) that records
the SHA-256 of the source files' content, the filter settings and the vocabulary's hash
(nmt/data/store_key.py); a run whose files, settings and vocabulary match reuses it
(``--resume`` never prepares again), anything else rebuilds it. Sizes and modification
times are not trusted: an edit that keeps both (two lines swapped, then ``cp -p``,
``rsync -a`` or ``touch -r``) rebuilds it too. Checking costs one read of both files per
run. The vocabulary is trained on a seeded reservoir sample of ``subwords.sample_size``
pairs, drawn while streaming.

Batches are index arrays: the lengths are two numpy arrays, and
:func:`nmt.data.batches.token_batches` is the rule of
:func:`nmt.data.batches.make_batches` in numpy, so no Python object per pair exists.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from nmt.config.schema import Config, DataConfig
from nmt.data.batches import Batch, FilterStats, skip_reason
from nmt.data.bucketing import IndexBatches, token_batches
from nmt.data.corpus import DataError
from nmt.data.store_key import (
    MANIFEST,
    TABLE,
    VOCAB_FILES,
    cached_vocabs,
    checked_pairs,
    fingerprint,
    read_manifest,
    sample_pairs,
    source_files,
    stale_reason,
    vocab_hashes,
)
from nmt.data.vocab import BOS, EOS, PAD, Vocab
from nmt.ops.files import write_atomic

CHUNK_PAIRS = 50_000  # pairs encoded and written at a time: bounds the memory of preparing
SHOWN_SKIPPED = 10  # skipped pairs named in the manifest and the log


class ArrowTrainingSet:
    """The training split as a memory-mapped ``datasets.Dataset`` (a
    :class:`nmt.data.batches.TrainingSet`): batches are :class:`IndexBatches`, and
    :meth:`collate` reads only the rows of one batch.

    Args:
        path: an Arrow stream file written by :func:`prepare_store`.

    Raises:
        DataError: the file cannot be read or lacks the store's columns.
    """

    def __init__(self, path: Path):
        import datasets  # imported here: a memory-store run never pays for it

        try:
            self.dataset = datasets.Dataset.from_file(str(path), in_memory=False)
            self.src_len = self.dataset.data.column("src_len").to_numpy()  # (N,) int32
            self.tgt_len = self.dataset.data.column("tgt_len").to_numpy()
        except (OSError, KeyError, pa.ArrowException) as e:
            raise DataError(
                f"{path}: not a readable training store ({e}); delete the "
                "folder to have it prepared again"
            ) from e
        self._rows = self.dataset.with_format("arrow")

    def __len__(self) -> int:
        return len(self.src_len)

    def batches(
        self,
        batch_size: int,
        max_tokens: int | None,
        shuffle_seed: int | None,
        trim: int | None = None,
    ) -> IndexBatches:
        """:func:`token_batches` over the store's lengths."""
        return token_batches(
            self.src_len,
            self.tgt_len,
            batch_size,
            max_tokens=max_tokens,
            shuffle_seed=shuffle_seed,
            trim=trim,
        )

    def token_counts(self) -> tuple[int, int]:
        """(source, target) pieces, each sentence with its EOS."""
        return int(self.src_len.sum(dtype=np.int64)), int(
            self.tgt_len.sum(dtype=np.int64) + len(self.tgt_len)
        )

    def rows(self, index: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
        """(source ids with EOS, target ids) of the rows ``index``, as lists (for tests)."""
        table = self._rows[np.asarray(index, dtype=np.int64).tolist()]
        return table.column("src").to_pylist(), table.column("tgt").to_pylist()

    def collate(self, index: np.ndarray) -> Batch:
        """The padded :class:`~nmt.data.batches.Batch` of rows ``index`` ((B,) row ids), equal to
        :func:`nmt.data.batches.collate` of the same pairs; ``Batch.index`` holds the row ids."""
        idx = np.asarray(index, dtype=np.int64)
        table = self._rows[idx.tolist()]
        src_len = torch.from_numpy(self.src_len[idx].astype(np.int64))  # (B,)
        tgt_len = torch.from_numpy(self.tgt_len[idx].astype(np.int64))  # (B,)
        src_ids = _flat_ids(table.column("src"))  # (sum src_len,)
        tgt_ids = _flat_ids(table.column("tgt"))  # (sum tgt_len,)
        B, S, T = len(idx), int(src_len.max()), int(tgt_len.max()) + 1
        src = torch.full((B, S), PAD, dtype=torch.long)
        src[torch.arange(S) < src_len[:, None]] = src_ids  # row-major fill: row by row
        words = torch.arange(T - 1) < tgt_len[:, None]  # (B, T-1) real target pieces
        tgt_in = torch.full((B, T), PAD, dtype=torch.long)
        tgt_in[:, 0] = BOS
        tgt_in[:, 1:][words] = tgt_ids
        tgt_out = torch.full((B, T), PAD, dtype=torch.long)
        tgt_out[:, :-1][words] = tgt_ids
        tgt_out[torch.arange(B), tgt_len] = EOS
        return Batch(src, src_len, tgt_in, tgt_out, torch.from_numpy(idx))


def _flat_ids(column: pa.ChunkedArray) -> torch.Tensor:
    """The ids of a list column, row after row, as one int64 tensor."""
    flat = column.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return torch.from_numpy(flat.astype(np.int64))


def prepare_store(
    d: DataConfig,
    cache: Path,
    *,
    vocabs: tuple[Vocab, Vocab],
    want: dict[str, Any],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Stream the training split, filter it (:func:`nmt.data.batches.skip_reason`), encode it
    with ``vocabs`` ``CHUNK_PAIRS`` pairs at a time and write ``{cache}/train.arrow``,
    the vocabulary files and, last, the manifest (fingerprint ``want`` plus the vocabulary
    hashes, pair and token counts, filter statistics and the time taken). A crash
    leaves no manifest, so the next run prepares again.

    Returns:
        The manifest.

    Raises:
        DataError: a bad file (see :func:`nmt.data.corpus.iter_dir_split`), or a file
            whose content is no longer the one ``want`` records (changed while it was
            read); nothing is left that a later run would take for a prepared store.
    """
    cache.mkdir(parents=True, exist_ok=True)
    (cache / MANIFEST).unlink(missing_ok=True)  # from now on the cache is invalid
    for name, vocab in zip(VOCAB_FILES, vocabs, strict=True):
        write_atomic(cache / name, vocab.model_bytes)
    began = time.monotonic()
    wide = max(len(v) for v in vocabs) > 2**16
    ids = pa.list_(pa.int32() if wide else pa.uint16())  # uint16 halves the file
    schema = pa.schema(
        [("src", ids), ("tgt", ids), ("src_len", pa.int32()), ("tgt_len", pa.int32())]
    )
    counts = {"read": 0, "kept": 0, "empty": 0, "too_long": 0, "src_tokens": 0, "tgt_tokens": 0}
    skipped: list[str] = []
    tmp = cache / f".{TABLE}.tmp"
    try:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
            chunk: list[tuple[str, str]] = []
            for p in checked_pairs(d, want):
                counts["read"] += 1
                why = skip_reason(p.src, p.tgt, d.max_train_words)
                if why is not None:
                    counts[why] += 1
                    if len(skipped) < SHOWN_SKIPPED:
                        side = "empty side" if why == "empty" else f"over {d.max_train_words} words"
                        skipped.append(f"{p.origin} ({side})")
                    continue
                chunk.append((p.src, p.tgt))
                if len(chunk) == CHUNK_PAIRS:
                    writer.write_batch(_encode_chunk(chunk, vocabs, schema, counts))
                    chunk = []
                if counts["read"] % 1_000_000 == 0:
                    log(
                        f"preparing: {counts['read']:,} pairs read, "
                        f"{time.monotonic() - began:.0f} s"
                    )
            if chunk or counts["kept"] == 0:
                writer.write_batch(_encode_chunk(chunk, vocabs, schema, counts))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, cache / TABLE)
    manifest = {
        **want,
        "vocab_sha256": vocab_hashes(*vocabs),
        "rows": counts["kept"],
        "stats": {k: counts[k] for k in ("read", "kept", "empty", "too_long")},
        "skipped": skipped,
        "tokens": {"src": counts["src_tokens"], "tgt": counts["tgt_tokens"]},
        "prepare_s": round(time.monotonic() - began, 1),
    }
    write_atomic(cache / MANIFEST, json.dumps(manifest, indent=1).encode())
    return manifest


def _encode_chunk(
    chunk: list[tuple[str, str]],
    vocabs: tuple[Vocab, Vocab],
    schema: pa.Schema,
    counts: dict[str, int],
) -> pa.RecordBatch:
    """One record batch of encoded pairs (source ids end in EOS, as
    :func:`nmt.data.batches.encode_pairs`); adds to ``counts``."""
    src = [ids + [EOS] for ids in vocabs[0].encode_batch([s for s, _ in chunk])]
    tgt = vocabs[1].encode_batch([t for _, t in chunk])
    src_len = np.fromiter(map(len, src), np.int32, len(src))
    tgt_len = np.fromiter(map(len, tgt), np.int32, len(tgt))
    counts["kept"] += len(chunk)
    counts["src_tokens"] += int(src_len.sum(dtype=np.int64))
    counts["tgt_tokens"] += int(tgt_len.sum(dtype=np.int64)) + len(tgt)
    return pa.record_batch(
        [
            pa.array(src, schema.field("src").type),
            pa.array(tgt, schema.field("tgt").type),
            pa.array(src_len),
            pa.array(tgt_len),
        ],
        schema=schema,
    )


def filter_stats(manifest: dict[str, Any]) -> FilterStats:
    """The filter statistics a manifest records, for the log."""
    st = manifest["stats"]
    return FilterStats(
        st["kept"],
        st["empty"],
        st["too_long"],
        tuple(manifest["skipped"]),
        n_skipped=st["empty"] + st["too_long"],
    )


@dataclass(frozen=True)
class OpenedStore:
    """A training store ready to train on, and how it came to be."""

    train_set: ArrowTrainingSet
    src_vocab: Vocab
    tgt_vocab: Vocab
    manifest: dict[str, Any]
    reused: bool  # True: the cache matched and nothing was prepared


def open_or_prepare(
    cfg: Config,
    cache: Path,
    *,
    vocabs: tuple[Vocab, Vocab] | None,
    make_vocabs: Callable[[list[str], list[str]], tuple[Vocab, Vocab]],
    log: Callable[[str], None],
    prepare: bool = True,
    poll_s: float = 1.0,
) -> OpenedStore:
    """The training store in ``cache``: reused when it matches (:func:`stale_reason`),
    otherwise prepared (:func:`prepare_store`), with the vocabulary trained first by
    ``make_vocabs(sources, targets)`` on :func:`sample_pairs` when ``vocabs`` is None.

    Args:
        vocabs: the (source, target) vocabulary of a resumed run, or None.
        prepare: False on DDP ranks other than 0: wait (checking every ``poll_s``
            seconds) until rank 0 has prepared a store that matches.

    Raises:
        DataError: the corpus cannot be read (see :func:`prepare_store`).
        ValueError: SentencePiece refuses the settings.
    """
    want = fingerprint(cfg, source_files(cfg.data))
    why = stale_reason(cache, want, vocabs)
    while why is not None and not prepare:
        time.sleep(poll_s)
        why = stale_reason(cache, want, vocabs)
    if why is None:
        manifest = read_manifest(cache)
        assert manifest is not None
        vocabs = vocabs or cached_vocabs(cache)
        log(
            f"training store: reused {cache} ({manifest['rows']:,} pairs, encoded in "
            f"{manifest['prepare_s']:.0f} s); not preparing again"
        )
        return OpenedStore(ArrowTrainingSet(cache / TABLE), *vocabs, manifest, True)
    log(f"training store: preparing {cache} ({why})")
    began = time.monotonic()
    if vocabs is None:
        sources, targets = sample_pairs(
            cfg.data, cfg.subwords.sample_size, seed=cfg.train.seed, log=log, want=want
        )
        if not sources:
            raise DataError(
                f"no training pairs with both sides non-empty in split {cfg.data.train_split!r}"
            )
        vocabs = make_vocabs(sources, targets)
        del sources, targets
    manifest = prepare_store(cfg.data, cache, vocabs=vocabs, want=want, log=log)
    log(
        f"training store: prepared {manifest['rows']:,} pairs in "
        f"{time.monotonic() - began:.0f} s (encoding {manifest['prepare_s']:.0f} s)"
    )
    return OpenedStore(ArrowTrainingSet(cache / TABLE), *vocabs, manifest, False)
