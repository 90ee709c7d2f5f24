"""Models of a study that are shipped as exported model folders (``model_folders``).

A folder written by ``nmt export`` (nmt/model/folder.py: ``model.safetensors``,
``config.yaml``, ``results.json``, ``valid_log.jsonl`` ...) is kept in git, so it outlives a
session's ``runs/``. A study model with no run directory whose folder's ``config.yaml``
carries its run name is reported from the folder: decoded like a finished run (the folder's
weights, so its heatmaps too), with its training record taken from the folder's
``results.json``. The folder's config must be the study's config for that model, up to the
keys a resumed run may change (``RESUME_ADJUSTABLE``) and the search keys ``nmt export``
writes into every folder it makes (``EXPORT_SET_KEYS``: the beam and alpha its numbers were
measured with, which say nothing about training; the study chooses its own alpha).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.config.differences import describe_differences, resume_conflicts
from nmt.config.schema import Config, StudyConfig
from nmt.model.checkpoint import CheckpointError, read_payload, stored_config
from nmt.model.folder import MANIFEST, is_folder

# the keys ``nmt export`` sets in a folder's config.yaml (nmt/commands/export.py)
EXPORT_SET_KEYS = ("search.beam_size", "search.alpha")
RESULTS = "results.json"


class ShippedError(RuntimeError):
    """A model folder cannot be used by the study; the message names the folder."""


@dataclass(frozen=True)
class Shipped:
    """A model folder of the study: where it is and the config stored in it."""

    folder: Path
    cfg: Config


def read_model_folders(study: StudyConfig) -> dict[str, Shipped]:
    """Each of ``study.model_folders`` (paths, relative to the working directory), read
    and checked (every file against its manifest), by the run name in its ``config.yaml``.

    Raises:
        ShippedError: a folder is missing, damaged or not a model folder, or two folders
            hold the same run (both named).
    """
    found: dict[str, Shipped] = {}
    for spec in study.model_folders:
        folder = Path(spec)  # a path, kept in git: no Hub spec, no shipped name
        if not is_folder(folder):
            why = "not found" if not folder.exists() else f"no {MANIFEST}: not a model folder"
            raise ShippedError(
                f"model_folders: {spec}: {why} (expected a folder written by nmt export)"
            )
        try:
            payload = read_payload(folder)
            cfg = stored_config(payload, folder)
        except CheckpointError as e:
            raise ShippedError(f"model_folders: {spec}: {e}") from None
        if cfg.name in found:
            raise ShippedError(
                f"model_folders: {found[cfg.name].folder} and {folder} both hold run "
                f"{cfg.name!r}; keep one"
            )
        found[cfg.name] = Shipped(folder, cfg)
    return found


def check_shipped(shipped: Shipped, cfg: Config) -> None:
    """Refuse a folder trained with another config than the study's ``cfg`` for its model.

    Raises:
        ShippedError: names the folder's config.yaml and every differing key with both
            values (``RESUME_ADJUSTABLE`` and ``EXPORT_SET_KEYS`` differences are allowed).
    """
    changes = resume_conflicts(shipped.cfg, cfg)
    conflicts = [d for d in changes.conflicts if d[0] not in EXPORT_SET_KEYS]
    if conflicts:
        raise ShippedError(
            f"model_folders: {shipped.folder / 'config.yaml'} was trained with a different "
            f"config than the study's {cfg.name} "
            f"({describe_differences(conflicts, 'folder', 'study')}); remove the folder "
            "from model_folders or change the study"
        )


def folder_summary(folder: Path) -> dict[str, Any]:
    """The training record of a model folder in the keys of a run's ``summary.json``
    (``parameters``, ``epochs``, ``steps``, ``elapsed_min``, ``best_val_bleu``), from its
    ``results.json`` (written by ``nmt export`` from the run's summary and validation
    log), plus ``weights_dtype`` (the precision its weights are stored in).

    Raises:
        ShippedError: results.json is missing, unreadable or lacks a key (names the file).
    """
    path = folder / RESULTS
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ShippedError(
            f"{path}: unreadable (nmt export writes it with the run's training record): {e}"
        ) from None
    training = got.get("training") if isinstance(got, dict) else None
    training = training if isinstance(training, dict) else {}
    summary = {
        "parameters": got.get("parameters") if isinstance(got, dict) else None,
        "epochs": training.get("epochs"),
        "steps": training.get("steps"),
        "elapsed_min": training.get("wall_clock_min"),
        "best_val_bleu": training.get("best_val_bleu"),
    }
    missing = [k for k, v in summary.items() if not isinstance(v, (int, float))]
    if missing:
        raise ShippedError(f"{path}: no {', '.join(missing)} in its training record")
    summary["weights_dtype"] = got.get("weights_dtype", "fp32")
    return summary
