"""Checkpoints scored on a test set: each decoded through its
:class:`~nmt.inference.translator.Translator` and scored (nmt/evaluation/metrics.py), and
with ``ensemble`` their ensemble too (nmt/inference/ensemble.py). ``nmt evaluate`` prints
what this returns; ``nmt select`` chooses on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config.buckets import parse_buckets
from nmt.data.corpus import DataError
from nmt.data.stored import test_set
from nmt.evaluation.metrics import Scores, score
from nmt.inference.ensemble import LoadedEnsemble, ensemble_of
from nmt.inference.translate import truncation_warning, unfinished_warning
from nmt.inference.translator import Translator
from nmt.model.checkpoint import Loaded, load_checkpoint, read_payload, stored_config
from nmt.ops.device import pick_device


@dataclass
class Scored:
    """One system (a checkpoint, or the ensemble) decoded on its test set.

    Attributes:
        name: the system's column header (:func:`system_label`). label: the test set's
            name (split or ``--src`` file).
        sources, references, hypotheses: one line per test sentence.
        record: the JSON record ``nmt evaluate --json`` writes (scores, signatures,
            search, checkpoint and its SHA-256).
    """

    name: str
    label: str
    sources: list[str]
    references: list[str]
    hypotheses: list[str]
    scores: Scores
    record: dict[str, Any]


def _systems(
    checkpoints: list[Path], dev: torch.device, ensemble: bool
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


def one_pair(checkpoints: list[Path]) -> None:
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
            raise DataError(
                f"--src/--ref hold one language pair, but {first[0]} translates "
                f"{first[1]}->{first[2]} and {path} {here[1]}->{here[2]}: "
                "evaluate them separately, or use --split"
            )


def _translated(loaded: Any, sources: list[str], **options: Any) -> tuple[Translator, list]:
    """The Translator of ``loaded`` with ``options`` (:meth:`Translator.from_loaded`) and
    its translations of ``sources``; closed before it returns, so that no search process
    (``processes``) is left to the interpreter's exit, where a Ctrl-C made a traceback."""
    with torch.inference_mode():
        translator = Translator.from_loaded(loaded, **options)
        try:
            return translator, translator.translate(sources)
        finally:
            translator.close()


def score_checkpoints(
    checkpoints: list[Path],
    *,
    split: str | None = None,
    src: Path | None = None,
    ref: Path | None = None,
    buckets: str = "1-10,11-20,21-30,31-",
    batch_size: int = 64,
    data_path: str | None = None,
    beam_size: int | None = None,
    alpha: float | None = None,
    length_penalty: str | None = None,
    device: str = "auto",
    workers: int | None = None,
    processes: bool = False,
    precision: str | None = None,
    ensemble: bool = False,
    members: bool = True,
    warn: Callable[[str], None] = lambda m: None,
) -> list[Scored]:
    """Translate the test set with each checkpoint and score it. Search settings default
    to each checkpoint's ``search`` config; given values override them
    (:meth:`Translator.from_loaded`). ``workers``: batches decoded at once (search
    processes with ``processes``: search_processes.py). ``precision``:
    the search's matrix products (``--precision``). With ``ensemble`` the checkpoints are
    also decoded together as one more system, with the first checkpoint's search settings
    and test set, named ``ensemble of N``, built from the models already loaded (memory
    then holds every model; with ``src`` each file's config is read first, to refuse mixed
    language pairs before any decoding). ``members=False`` (with ``ensemble``) decodes the
    ensemble alone: what ``nmt select`` scores after choosing each member. ``warn`` hears
    each warning (cut input, hypotheses cut at the length limit, a capped beam).

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
    if src is not None and len(checkpoints) > 1:  # one checkpoint is one pair: no extra read
        one_pair(checkpoints)
    out: list[Scored] = []
    for path, loaded in _systems(checkpoints, dev, ensemble):
        # the digest names the weights scored: a later best.pt under the same name is another
        # model, and nmt serve shows this score only beside the file with this digest
        if is_ensemble := isinstance(loaded, LoadedEnsemble):
            parts, digest = loaded.members, None
        elif ensemble and not members:
            continue
        else:
            parts, digest = [loaded], loaded.sha256
        label, sources, references = test_set(
            parts[0], split=split, src=src, ref=ref, data_path=data_path
        )
        translator, translations = _translated(
            loaded,
            sources,
            beam_size=beam_size,
            alpha=alpha,
            length_penalty=length_penalty,
            precision=precision,
            batch_size=batch_size,
            workers=workers,
            processes=processes,
            warn=warn,
        )
        decoding = translator.decoding  # a beam over the vocabulary is capped to it
        hyps = [t.text for t in translations]
        for check in (truncation_warning, unfinished_warning):
            if warning := check(translations, f"{label} ({path})"):
                warn(warning)
        s = score(hyps, references, sources, ranges, tgt_lang=loaded.cfg.data.tgt_lang)
        base = f"ensemble of {len(parts)}" if is_ensemble else loaded.cfg.name
        name = system_label(path, is_ensemble, len(parts), [o.name for o in out])
        data = loaded.cfg.data
        record = {
            "checkpoint": path,
            "checkpoint_sha256": digest,
            "name": base,
            "label": name,
            "test_set": label,
            "src_lang": data.src_lang,
            "tgt_lang": data.tgt_lang,
            "attention": ", ".join(m.cfg.model.attention for m in parts),
            "search": decoding.describe(),
            "search_precision": decoding.precision,
            **({"search_precision_auto": translator.auto_note} if translator.auto_note else {}),
            **({"ensemble": [str(p) for p in checkpoints]} if is_ensemble else {}),
            **s.to_json(),
        }
        out.append(Scored(name, label, sources, references, hyps, s, record))
    return out
