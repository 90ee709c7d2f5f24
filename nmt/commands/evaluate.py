"""``nmt evaluate``: decode a test set with one or more checkpoints and score them side by side.

Corpus BLEU, chrF, BLEU by source length, the papers' BLEU (lowercased, Moses-tokenized)
and the sacreBLEU signatures; the scoring itself is nmt/evaluation/metrics.py. With
``--ensemble`` the checkpoints are also decoded as one ensemble (nmt/inference/ensemble.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nmt.config.buckets import parse_buckets
from nmt.data.corpus import DataError
from nmt.data.stored import test_set
from nmt.evaluation.metrics import Scores, format_table, score
from nmt.inference.ensemble import LoadedEnsemble, ensemble_of
from nmt.inference.translate import Decoding, truncation_warning, unfinished_warning
from nmt.inference.translator import Translator
from nmt.model.checkpoint import Loaded, load_checkpoint, read_payload, stored_config
from nmt.ops.device import pick_device


@dataclass
class Report:
    """What ``nmt evaluate`` prints (``table``) and writes with ``--json`` (``json``)."""

    table: str
    json: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)  # printed on stderr (e.g. cut input)


def _systems(checkpoints: list[Path], dev: torch.device, ensemble: bool
             ) -> Iterator[tuple[str, Loaded | LoadedEnsemble]]:
    """(the checkpoint argument as typed, loaded) for each checkpoint, then, with
    ``ensemble``, for their ensemble, built from the same loaded models: each file is read
    once. Without ``ensemble`` memory holds one model at a time; with it, all of them.

    Raises:
        CheckpointError: as :func:`nmt.model.checkpoint.load_checkpoint`, and for the
            ensemble as :func:`nmt.inference.ensemble.ensemble_of`.
    """
    kept: list[Loaded] = []
    for path in checkpoints:
        loaded = load_checkpoint(path, dev, with_digest=True)
        if ensemble:
            kept.append(loaded)
        yield str(path), loaded
    if ensemble:
        yield "+".join(map(str, checkpoints)), ensemble_of(checkpoints, kept)


def system_label(path: str, is_ensemble: bool, n_members: int, taken: list[str]) -> str:
    """The column header of one system: the checkpoint argument as the user typed it
    (``models/deen-additive``, ``deen-none``, ``hf://org/name``, ``runs/x/best.pt``), or
    ``ensemble of N``; ``(2)``, ``(3)``... is added when that header is already in ``taken``
    (the same argument given twice).

    Not the run's ``name`` from the stored config: a model folder's run name
    (``deen_conv_additive``) is not what the user typed, and two checkpoints of one run
    would share it."""
    label = f"ensemble of {n_members}" if is_ensemble else path
    k = 2
    unique = label
    while unique in taken:
        unique, k = f"{label} ({k})", k + 1
    return unique


def _table(names: list[str], results: list[Scores], records: list[dict[str, Any]],
           ensemble: list[Path] | None, groups: list[tuple[str, str, str, int]]
           ) -> Iterator[str]:
    """One side-by-side table per test set and language pair: checkpoints of different
    pairs are scored on different sources and references, so their BLEU, length buckets
    and signatures would otherwise sit in one table under the first system's header."""
    for group in dict.fromkeys(groups):
        idx = [i for i, g in enumerate(groups) if g == group]
        label, src_lang, tgt_lang, size = group
        pair = f", {src_lang}→{tgt_lang}" if len(set(groups)) > 1 else ""
        text = f"test set: {label} ({size} sentences{pair})\n"
        text += "".join(f"decoding of {names[i]}: {records[i]['search']}\n" for i in idx)
        if ensemble and any("ensemble" in records[i] for i in idx):
            text += (f"ensemble of {len(ensemble)}: {', '.join(map(str, ensemble))} "
                     "(mean of the models' probabilities at each step)\n")
        yield text + format_table([names[i] for i in idx], [results[i] for i in idx])


def _one_pair(checkpoints: list[Path]) -> None:
    """Before any decoding: one ``--src``/``--ref`` pair of files fits one language pair.

    Raises:
        DataError: two checkpoints translate different language pairs (both named).
        CheckpointError: a checkpoint cannot be read.
    """
    first: tuple[Path, str, str] | None = None
    for path in checkpoints:
        data = stored_config(read_payload(path), path).data
        here = (path, data.src_lang, data.tgt_lang)
        first = first or here
        if here[1:] != first[1:]:  # one reference file cannot be in two languages
            raise DataError(f"--src/--ref hold one language pair, but {first[0]} translates "
                            f"{first[1]}->{first[2]} and {path} {here[1]}->{here[2]}: "
                            "evaluate them separately, or use --split")


def evaluate_checkpoints(checkpoints: list[Path], *, split: str | None = None,
                         src: Path | None = None, ref: Path | None = None,
                         buckets: str = "1-10,11-20,21-30,31-", batch_size: int = 64,
                         n_examples: int = 0, data_path: str | None = None,
                         beam_size: int | None = None, alpha: float | None = None,
                         length_penalty: str | None = None, device: str = "auto",
                         workers: int | None = None, precision: str | None = None,
                         ensemble: bool = False, members: bool = True) -> Report:
    """Translate the test set with each checkpoint and score it. Search settings default
    to each checkpoint's ``search`` config; given values override them. ``workers``:
    batches decoded at once (:class:`nmt.inference.translator.Translator`). ``precision``: the
    search's matrix products (``search.precision``; ``--precision``). With ``ensemble``
    the checkpoints are also decoded together as one more system, an
    :class:`nmt.inference.ensemble.Ensemble` with the first checkpoint's search settings
    and test set, named ``ensemble of N``, built from the models already loaded (each file
    is loaded once; memory then holds every model, not one at a time; with ``src`` each
    file's config is read first, to refuse mixed language pairs before any decoding).
    ``members=False`` (with ``ensemble``) decodes the ensemble alone: what ``nmt select``
    scores after choosing each member.

    Raises:
        CheckpointError, DataError, ValueError (bad ``buckets``; ``ensemble`` with fewer
        than two checkpoints), DeviceError (``device`` is not available here),
        PrecisionError (a ``precision`` this device cannot use). CheckpointError also for
        an ensemble of checkpoints with different vocabularies (names both files).
        DataError also for ``src``/``ref`` with checkpoints of different language pairs.
    """
    ranges = parse_buckets(buckets)
    if ensemble and len(checkpoints) < 2:
        raise ValueError(f"--ensemble needs at least two checkpoints, got {len(checkpoints)}")
    dev = pick_device(device, "--device")
    names: list[str] = []
    results, records, example_lines = [], [], []
    groups: list[tuple[str, str, str, int]] = []  # each system's (test set, pair, size)
    warnings: list[str] = []
    if src is not None and len(checkpoints) > 1:  # one checkpoint is one pair: no extra read
        _one_pair(checkpoints)
    for path, loaded in _systems(checkpoints, dev, ensemble):
        # the digest names the weights scored: a later best.pt under the same name is another
        # model, and nmt serve shows this score only beside the file with this digest
        if is_ensemble := isinstance(loaded, LoadedEnsemble):
            parts, digest = loaded.members, None
        elif ensemble and not members:
            continue
        else:
            parts, digest = [loaded], loaded.sha256
        label, sources, references = test_set(parts[0], split=split, src=src, ref=ref,
                                              data_path=data_path)
        decoding = Decoding.from_config(
            loaded.cfg, beam_size=beam_size, alpha=alpha, length_penalty=length_penalty,
            precision=precision).on(dev, "--precision")
        with torch.inference_mode():
            translator = Translator(loaded.model, loaded.src_vocab, loaded.tgt_vocab, decoding,
                                    batch_size=batch_size, workers=workers,
                                    warn=warnings.append)
            decoding = translator.decoding  # a beam over the vocabulary is capped to it
            translations = translator.translate(sources)
        hyps = [t.text for t in translations]
        for warning in (truncation_warning(translations, f"{label} ({path})"),
                        unfinished_warning(translations, f"{label} ({path})")):
            if warning:
                warnings.append(warning)
        s: Scores = score(hyps, references, sources, ranges, tgt_lang=loaded.cfg.data.tgt_lang)
        base = f"ensemble of {len(parts)}" if is_ensemble else loaded.cfg.name
        name = system_label(path, is_ensemble, len(parts), names)
        names.append(name)
        results.append(s)
        data = loaded.cfg.data
        groups.append((label, data.src_lang, data.tgt_lang, len(references)))
        records.append({"checkpoint": path, "checkpoint_sha256": digest, "name": base,
                        "label": name,
                        "test_set": label, "src_lang": data.src_lang,
                        "tgt_lang": data.tgt_lang,
                        "attention": ", ".join(m.cfg.model.attention for m in parts),
                        "search": decoding.describe(), "search_precision": decoding.precision,
                        **({"ensemble": [str(p) for p in checkpoints]} if is_ensemble else {}),
                        **s.to_json()})
        for i in range(min(n_examples, len(sources))):
            k = i * max(len(sources) // max(n_examples, 1), 1)
            example_lines += [f"[{name}] SRC: {sources[k]}", f"[{name}] REF: {references[k]}",
                              f"[{name}] HYP: {hyps[k]}", ""]
    table = "\n\n".join(_table(names, results, records, checkpoints if ensemble else None,
                                 groups))
    if example_lines:
        table += "\n\nexample translations:\n" + "\n".join(example_lines)
    return Report(table, records, warnings)
