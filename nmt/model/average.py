"""Checkpoint averaging (``nmt average``, ``nmt select``): the weights of several
checkpoints of one training run, summed in float64.

Averaging is sound only along one run's trajectory (e.g. its last N validation
checkpoints, Vaswani et al. 2017, sec. 6.1): two independently trained models, even of
one architecture and vocabulary, have unrelated weights, and their mean translates worse
than either. So a checkpoint's run is checked, not only its shapes:

* Every checkpoint holds the id of the run it comes from (made when the run starts, kept
  across ``--resume``); checkpoints of two ids are refused, both files named.
* Checkpoints written before nmt stored run ids have none. Where one of two files has no
  id, they count as one run when their stored configurations are equal in every key but
  those ``--resume`` may change for budget and hardware (``RESUME_ADJUSTABLE`` except
  ``name`` and ``train.out_dir``): the seed, the run name and the output directory must
  match. Two trainings with the very same config, seed and name (a run deleted and
  trained again) cannot be told apart this way.
* Whatever the ids, differing configurations are refused naming every differing key
  with both values, as ``--resume`` does; the same file twice (by path or by content) and
  an output that is one of the inputs are refused too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from nmt.config.differences import config_differences, describe_differences
from nmt.config.schema import RESUME_ADJUSTABLE
from nmt.model.checkpoint import CheckpointError, read_payload, run_id_of, stored_config
from nmt.model.duplicate_checkpoints import refuse_duplicates
from nmt.model.rundir import is_run_checkpoint, run_files
from nmt.ops.files import same_file

# what may differ between checkpoints without run ids that still count as one run
_LEGACY_FREE = tuple(k for k in RESUME_ADJUSTABLE if k not in ("name", "train.out_dir"))


def _run_mismatch(path: Path, a: dict[str, Any], other: Path, b: dict[str, Any]) -> str | None:
    """Why checkpoints ``a`` (file ``path``) and ``b`` (file ``other``) are not of one run
    (see the module docstring), as a message naming both files; None when they are."""
    id_a, id_b = run_id_of(a), run_id_of(b)
    diffs = config_differences(a["config"], b["config"])
    if id_a and id_b and id_a != id_b:
        shown = (
            f"; configurations differ: {describe_differences(diffs, str(path), str(other))}"
            if diffs
            else "; same configuration, trained twice"
        )
        return (
            f"{path} and {other} are checkpoints of different training runs (run ids "
            f"{id_a[:8]} and {id_b[:8]}{shown})"
        )
    fixed = [d for d in diffs if d[0] not in (RESUME_ADJUSTABLE if id_a and id_b else _LEGACY_FREE)]
    if fixed:
        legacy = "" if id_a and id_b else "; without a run id, one run is told by its config"
        return (
            f"{path} and {other} have different configurations "
            f"({describe_differences(fixed, str(path), str(other))}{legacy})"
        )
    return None


def _weights_mismatch(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Why two payloads of one configuration still cannot be averaged: another
    SentencePiece model, or the first tensor whose name or shape differs (both shapes)."""
    if a["src_spm"] != b["src_spm"] or a["tgt_spm"] != b["tgt_spm"]:
        return "another vocabulary (SentencePiece model)"
    for key in a["model"]:
        if key not in b["model"]:
            return f"tensor {key!r} is missing in one of them"
        if a["model"][key].shape != b["model"][key].shape:
            return (
                f"tensor {key!r} has shape {tuple(a['model'][key].shape)} here but "
                f"{tuple(b['model'][key].shape)} there"
            )
    extra = [k for k in b["model"] if k not in a["model"]]
    return f"tensor {extra[0]!r} is missing in one of them" if extra else None


def check_output(paths: list[Path], output: Path, option: str = "--output") -> None:
    """Check that writing the average to ``output`` loses nothing.

    Raises:
        CheckpointError: ``output`` is one of ``paths`` (the average would replace it), or
            it is named like a training checkpoint (``last.pt``, ``best.pt``,
            ``step_*.pt``) in a directory that holds a run, whose resume it would break.
    """
    for p in paths:
        if same_file(output, p):
            raise CheckpointError(
                f"{option} {output}: is the input {p}; the average would "
                "replace it: write it to another file"
            )
    if is_run_checkpoint(output.name) and run_files(output.parent):
        raise CheckpointError(
            f"{option} {output}: {output.parent} holds a training run and "
            f"{output.name} is one of its checkpoint names; write the "
            "average to another name (e.g. averaged.pt)"
        )


def average_checkpoints(paths: list[Path]) -> dict[str, Any]:
    """Average the model weights of several checkpoints of one run; config, vocabularies,
    run id and metadata come from the last one, training state is dropped.

    Raises:
        CheckpointError: no paths, an unreadable file, the same checkpoint twice (by path
            or content), checkpoints of different runs or configurations (both files and
            every differing config key named), or different SentencePiece models or tensor
            shapes (the first mismatching tensor and both shapes named).

    Floating-point weights are summed in float64 and cast back to their dtype, so the
    average is the same whatever the order of ``paths``; integer tensors (counters) are
    taken from the last checkpoint.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    digests = refuse_duplicates(paths, "averaged")  # before unpickling: it reads less
    payloads = [read_payload(p) for p in paths]
    _refuse_own_inputs(paths, payloads, digests)
    for p, payload in zip(paths, payloads, strict=True):
        stored_config(payload, p)  # an invalid stored config is refused, as translate does
    last = payloads[-1]
    for path, payload in zip(paths[:-1], payloads[:-1], strict=True):
        why = _run_mismatch(path, payload, paths[-1], last)
        if why:
            raise CheckpointError(f"{why}; only checkpoints of one run can be averaged")
        why = _weights_mismatch(payload, last)
        if why:
            raise CheckpointError(
                f"{path}: cannot be averaged with {paths[-1]} ({why}); "
                "only checkpoints of one run can be averaged"
            )
    averaged = {}
    for key, value in last["model"].items():
        if value.is_floating_point():
            # float64 sum: the result does not depend on the order of the files
            total = torch.zeros(value.shape, dtype=torch.float64)
            for payload in payloads:
                total += payload["model"][key].to(torch.float64)
            averaged[key] = (total / len(payloads)).to(value.dtype)
        else:
            averaged[key] = value
    # the inputs' digests (and those their own averages were made of) travel with the
    # average, so that averaging it again with one of them is refused
    sources = set(digests).union(*(_sources(p) for p in payloads))
    return {
        **last,
        "model": averaged,
        "train_state": None,
        "averaged_from": [str(p) for p in paths],
        "averaged_from_sha256": sorted(sources),
    }


def _sources(payload: dict[str, Any]) -> set[str]:
    """The SHA-256 of the checkpoints an averaged payload was made of (empty otherwise)."""
    found = payload.get("averaged_from_sha256")
    return {d for d in found if isinstance(d, str)} if isinstance(found, list) else set()


def _refuse_own_inputs(
    paths: list[Path], payloads: list[dict[str, Any]], digests: list[str]
) -> None:
    """Refuse an averaged checkpoint given together with one of its own inputs: that
    input would count twice (once inside the average). Known by the inputs' SHA-256
    stored in the average, or, for averages made before nmt stored them, their paths.

    Raises:
        CheckpointError: names the averaged file and its input.
    """
    for path, payload in zip(paths, payloads, strict=True):
        named = payload.get("averaged_from")
        old_paths = (
            [Path(n) for n in named if isinstance(n, str)] if isinstance(named, list) else []
        )
        for other, digest in zip(paths, digests, strict=True):
            if other is path:
                continue
            if digest in _sources(payload) or any(same_file(other, n) for n in old_paths):
                raise CheckpointError(
                    f"{path} is an average that already includes {other}; averaging them "
                    f"together would count {other} twice: give the average or its inputs"
                )
