"""``nmt evaluate``: decode a test set with one or more checkpoints and score them side by side.

Corpus BLEU, chrF, BLEU by source length and the sacreBLEU signatures; the scoring itself
is nmt/evaluation/metrics.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nmt.config.load import parse_buckets
from nmt.config.schema import DataConfig
from nmt.data.corpus import DataError, read_lines, read_split
from nmt.evaluation.metrics import Scores, format_table, score
from nmt.inference.translate import Decoding, truncation_warning
from nmt.inference.translator import Translator
from nmt.model.checkpoint import load_checkpoint
from nmt.ops.device import pick_device


@dataclass
class Report:
    """What ``nmt evaluate`` prints (``table``) and writes with ``--json`` (``json``)."""

    table: str
    json: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)  # printed on stderr (e.g. cut input)


def stored_corpus(data: DataConfig, data_path: str | None = None) -> DataConfig:
    """A checkpoint's data config, with ``data_path`` (``--data-path``) replacing ``data.path``.

    Raises:
        DataError: ``data.path`` is a relative directory that does not exist from the current
            directory; ``auto`` would otherwise fall back to the hub and fail less clearly.
    """
    if data_path is not None:
        data = dataclasses.replace(data, path=data_path)
        if data.source in ("auto", "dir") and not Path(data_path).expanduser().is_dir():
            raise DataError(f"--data-path {data_path!r} is not a directory")
    if data.source == "auto" and data.path and not Path(data.path).expanduser().is_dir():
        raise DataError(f"data.path {data.path!r} stored in the checkpoint is not a directory "
                        f"from here ({Path.cwd()}): run from the directory you trained in, or "
                        "pass --data-path DIR (or --src/--ref files)")
    return data


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks: what ``--json`` records of the
    checkpoint, so that a reader (``nmt serve``) can tell a score of this file from one of
    a file since replaced at the same path."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def test_set(loaded, *, split: str | None, src: Path | None, ref: Path | None,
              data_path: str | None) -> tuple[str, list[str], list[str]]:
    """(label, sources, references) from files or a named split of the checkpoint's corpus."""
    if src is not None or ref is not None:
        if src is None or ref is None:
            raise DataError("--src and --ref must be given together")
        if split is not None:
            raise DataError("give either --split or --src/--ref, not both")
        sources, references = read_lines(src), read_lines(ref)
        if len(sources) != len(references):
            raise DataError(f"{src} has {len(sources)} lines but {ref} has {len(references)}")
        if not any(line.strip() for line in sources):
            raise DataError(f"{src} has no non-empty line: nothing to translate")
        return src.name, sources, references
    data = stored_corpus(loaded.cfg.data, data_path)
    name = split or (data.test_splits[0] if data.test_splits else None)
    if name is None:
        raise DataError("no --split given and the checkpoint's data.test_splits is empty")
    pairs = read_split(data, name)
    if not pairs:
        raise DataError(f"split {name!r} of {data.path or data.hf_name} is empty")
    return name, [p.src for p in pairs], [p.tgt for p in pairs]


def evaluate_checkpoints(checkpoints: list[Path], *, split: str | None = None,
                         src: Path | None = None, ref: Path | None = None,
                         buckets: str = "1-10,11-20,21-30,31-", batch_size: int = 64,
                         n_examples: int = 0, data_path: str | None = None,
                         beam_size: int | None = None, alpha: float | None = None,
                         length_penalty: str | None = None, device: str = "auto",
                         workers: int | None = None, precision: str | None = None) -> Report:
    """Translate the test set with each checkpoint and score it. Search settings default
    to each checkpoint's ``search`` config; given values override them. ``workers``:
    batches decoded at once (:class:`nmt.inference.translator.Translator`). ``precision``: the
    search's matrix products (``search.precision``; ``--precision``).

    Raises:
        CheckpointError, DataError, ValueError (bad ``buckets``), DeviceError (``device``
        is not available here), PrecisionError (a ``precision`` this device cannot use).
    """
    ranges = parse_buckets(buckets)
    dev = pick_device(device, "--device")
    names, results, records, example_lines, warnings = [], [], [], [], []
    for path in checkpoints:
        loaded = load_checkpoint(path, dev)
        label, sources, references = test_set(loaded, split=split, src=src, ref=ref,
                                              data_path=data_path)
        decoding = Decoding.from_config(
            loaded.cfg, beam_size=beam_size, alpha=alpha, length_penalty=length_penalty,
            precision=precision).on(dev, "--precision")
        with torch.inference_mode():
            translator = Translator(loaded.model, loaded.src_vocab, loaded.tgt_vocab, decoding,
                                    batch_size=batch_size, workers=workers)
            translations = translator.translate(sources)
        hyps = [t.text for t in translations]
        warning = truncation_warning(translations, f"{label} ({path})")
        if warning:
            warnings.append(warning)
        s: Scores = score(hyps, references, sources, ranges)
        name = loaded.cfg.name if loaded.cfg.name not in names else str(path)
        names.append(name)
        results.append(s)
        records.append({"checkpoint": str(path), "checkpoint_sha256": file_sha256(path),
                        "name": loaded.cfg.name, "test_set": label,
                        "attention": loaded.cfg.model.attention, "search": decoding.describe(),
                        "search_precision": decoding.precision, **s.to_json()})
        for i in range(min(n_examples, len(sources))):
            k = i * max(len(sources) // max(n_examples, 1), 1)
            example_lines += [f"[{name}] SRC: {sources[k]}", f"[{name}] REF: {references[k]}",
                              f"[{name}] HYP: {hyps[k]}", ""]
    table = f"test set: {records[0]['test_set']} ({len(references)} sentences)\n"
    table += "".join(f"decoding of {n}: {r['search']}\n"
                     for n, r in zip(names, records, strict=True))
    table += format_table(names, results)
    if example_lines:
        table += "\n\nexample translations:\n" + "\n".join(example_lines)
    return Report(table, records, warnings)
