"""The checkpoint file: self-describing, versioned, written atomically.

A checkpoint holds the id of the training run it comes from, the resolved config, both
SentencePiece models (bytes), the model's ``state_dict`` and, for resuming, optimizer
state, step, epoch position, best score and random states. It is written to a temporary
file in the same directory, flushed to disk, then renamed over the old one, so a crash at
any moment leaves the previous complete file.

Reading is safe for files from strangers: a checkpoint is data, never code. It is loaded
with ``torch.load(weights_only=True)``, whose unpickler accepts only tensors and plain
Python data (dict, list, tuple, str, bytes, int, float, bool, None) -- exactly what nmt
stores -- and refuses any other object before it is built, so nothing in the file is
executed. The loaded dict is then checked against the layout below; a missing or
wrong-typed entry is a one-line :class:`CheckpointError` naming the key.
"""

from __future__ import annotations

import errno
import hashlib
import io
import pickle
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config.load import from_dict
from nmt.config.schema import Config, ConfigError
from nmt.data.vocab import Vocab
from nmt.model import folder
from nmt.model.footprint import ResourceError, check_fits
from nmt.model.seq2seq import Seq2Seq, build_model
from nmt.ops.files import atomic_open
from nmt.ops.validlog import CheckpointError as CheckpointError

FORMAT = "nmt-checkpoint"
VERSION = 1


def save_atomic(payload: dict[str, Any], path: str | Path) -> None:
    """Write ``payload`` to ``path`` atomically (:func:`nmt.ops.files.atomic_open`: temp
    file, fsync, rename), creating its directory.

    Raises:
        CheckpointError: the disk is full or not writable; the previous file is intact.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path) as f:
            torch.save(payload, f)
    except OSError as e:
        why = "disk full" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        raise CheckpointError(
            f"{path}: cannot write checkpoint ({why}); the previous checkpoint is kept"
        ) from e


def new_run_id() -> str:
    """A fresh run id: made when a training run starts, kept across ``--resume``."""
    return uuid.uuid4().hex


def make_payload(
    cfg: Config,
    model: Seq2Seq,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    train_state: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Everything needed to translate with, and (with ``train_state``) resume, a run.

    ``run_id`` names the training run the weights come from (see :func:`run_id_of`); a
    payload made without one is a run of its own and gets a fresh id."""
    module = getattr(model, "module", model)  # unwrap DistributedDataParallel
    return {
        "format": FORMAT,
        "version": VERSION,
        "run_id": run_id or new_run_id(),
        "config": cfg.to_dict(),
        "src_spm": src_vocab.model_bytes,
        "tgt_spm": tgt_vocab.model_bytes,
        "model": module.state_dict(),
        "train_state": train_state,
    }


def run_id_of(payload: dict[str, Any]) -> str | None:
    """The id of the training run a checked payload comes from; None for checkpoints
    written before nmt stored run ids (they stay loadable)."""
    return payload.get("run_id")


def check_file(path: Path) -> None:
    """That ``path`` is a file, before anything reads it.

    Raises:
        CheckpointError: ``path`` is a directory (a study's archive of a run, or any other:
            a checkpoint inside it is suggested) or does not exist.
    """
    if path.is_dir():
        if (path / "checkpoint.json").is_file() and not (path / "best.pt").is_file():
            # nmt/commands/study_archive.py's layout: a digest in place of the checkpoint
            raise CheckpointError(
                f"{path}: is a study's archive of a run (its records and "
                "translations, never its checkpoint); train the run again "
                "with `nmt study CONFIG` to get a best.pt"
            )
        if path == Path("."):
            # the shell's "" reaches us as Path("") == Path("."), the current directory
            raise CheckpointError(
                "checkpoint path is empty or '.' (the current directory); give a "
                f"checkpoint file such as {_example_checkpoint(path)} or a shipped model's name"
            )
        raise CheckpointError(
            f"{path}: is a directory (no manifest.json: not a model "
            "folder); give a checkpoint file such as "
            f"{_example_checkpoint(path)}"
        )
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found{folder.unknown_name_hint(str(path))}")


def _example_checkpoint(directory: Path) -> str:
    """A checkpoint to suggest for ``directory``: its own best.pt, else those of the run
    directories inside it (``runs/`` holds one per run), else the conventional name."""
    own = directory / "best.pt"
    if own.is_file():
        return str(own)
    try:
        inner = sorted(p for p in directory.glob("*/best.pt") if p.is_file())
    except OSError:  # an unreadable directory: fall back to the name
        inner = []
    if not inner:
        return str(own)
    shown = " or ".join(str(p) for p in inner[:2])
    return shown + (f" ({len(inner)} runs there have one)" if len(inner) > 2 else "")


def read_payload(path: str | Path) -> dict[str, Any]:
    """Load and check a checkpoint file, or a model folder (:mod:`nmt.model.folder`: a
    directory with a manifest.json, ``hf://ORG/NAME[@REV]``, or a shipped model's name).

    Raises:
        CheckpointError: missing file, not a checkpoint, or an unsupported version; for a
            folder, a listed file missing or altered (named).
    """
    path = Path(path)
    from_folder = _folder_payload(path)
    if from_folder is not None:
        return from_folder[0]
    check_file(path)
    return _checked_payload(path, path)


def _folder_payload(path: Path) -> tuple[dict[str, Any], str] | None:
    """The checked payload (no training state) and weights digest of the model folder
    ``path`` names (:mod:`nmt.model.folder`), or None when ``path`` is not one (then it is
    read as a checkpoint file)."""
    try:
        where = folder.resolve_model_path(path)
        if not folder.is_folder(where):
            if folder.is_hub_spec(path):
                raise CheckpointError(
                    f"{path}: the Hub snapshot {where} has no "
                    f"{folder.MANIFEST}: not an nmt model folder"
                )
            return None
        got = folder.read_folder(where)
    except folder.FolderError as e:
        raise CheckpointError(str(e)) from None
    payload = {
        "format": FORMAT,
        "version": VERSION,
        **({"run_id": got.run_id} if got.run_id else {}),
        "config": got.config,
        "src_spm": got.src_spm,
        "tgt_spm": got.tgt_spm,
        "model": got.weights,
        "train_state": None,
    }
    problem = _layout_problem(payload)
    if problem:
        raise CheckpointError(f"{where}: damaged nmt model folder: {problem}")
    return payload, got.weights_sha256


def read_payload_and_digest(path: str | Path) -> tuple[dict[str, Any], str]:
    """:func:`read_payload`, and the hex SHA-256 of the very bytes it was loaded from: the
    file is read once, so a file replaced meanwhile cannot get another file's digest. For
    a model folder, the SHA-256 of its ``model.safetensors`` (the weights).

    Raises:
        CheckpointError: as :func:`read_payload`, or the file cannot be read.
    """
    path = Path(path)
    from_folder = _folder_payload(path)
    if from_folder is not None:
        return from_folder
    check_file(path)
    try:
        data = path.read_bytes()
    except OSError as e:  # also a file removed since the check
        raise CheckpointError(f"{path}: cannot read checkpoint ({e.strerror or e})") from None
    return _checked_payload(io.BytesIO(data), path), hashlib.sha256(data).hexdigest()


def _checked_payload(source: Path | io.BytesIO, path: Path) -> dict[str, Any]:
    """The checked payload loaded from ``source`` (the file ``path`` or its bytes)."""
    try:
        # weights_only: tensors and plain data only; never unpickle arbitrary objects
        with warnings.catch_warnings():  # torch warns about foreign pickles; we refuse them below
            warnings.simplefilter("ignore")
            payload = torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        refused = _refused_global(str(e))
        if not refused:  # garbage, not a refused object
            raise CheckpointError(
                f"{path}: not a readable nmt checkpoint (not a torch file, or damaged)"
            ) from None
        raise CheckpointError(
            f"{path}: refused: the file holds Python objects other than tensors and plain data"
            f"{f' ({refused})' if refused else ''}; nmt checkpoints never contain code, so "
            "this file was not made by nmt or was tampered with (nothing in it was run)"
        ) from None
    except Exception as e:
        raise CheckpointError(
            f"{path}: not a readable nmt checkpoint (truncated, damaged or not "
            f"a torch file: torch.load failed with {type(e).__name__})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an nmt checkpoint (no '{FORMAT}' marker)")
    if payload.get("version") != VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {payload.get('version')!r} is "
            f"not supported by this nmt (expects {VERSION})"
        )
    problem = _layout_problem(payload)
    if problem:
        raise CheckpointError(f"{path}: damaged nmt checkpoint: {problem}")
    return payload


def _refused_global(message: str) -> str:
    """The class or function the safe unpickler refused, e.g. ``posix.system``."""
    for marker in ("Unsupported global: GLOBAL ", "GLOBAL "):
        i = message.find(marker)
        if i >= 0:
            return message[i + len(marker) :].split()[0].rstrip(".,;:")
    return ""


def _layout_problem(payload: dict[str, Any]) -> str | None:
    """What is missing or of the wrong type in a payload (``None`` when it is well formed).

    Layout (see :func:`make_payload`): ``run_id`` str (absent in older files);
    ``config`` dict; ``src_spm``, ``tgt_spm`` bytes;
    ``model`` dict of str -> tensor; ``train_state`` None or a dict with ``optimizer``
    (dict), ``schedule`` (dict or None), ``rng`` (dict with a ``torch`` tensor and a
    ``python`` tuple) and ``counters`` (dict of str keys).
    """

    def kind(x: Any) -> str:
        return type(x).__name__

    expected = {"config": dict, "src_spm": bytes, "tgt_spm": bytes, "model": dict}
    for key, tp in expected.items():
        if key not in payload:
            return f"key '{key}' is missing"
        if not isinstance(payload[key], tp):
            return f"'{key}' is a {kind(payload[key])}, expected {tp.__name__}"
    if "run_id" in payload and not isinstance(payload["run_id"], str):
        return f"'run_id' is a {kind(payload['run_id'])}, expected str"
    for name, value in payload["model"].items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            return f"model entry {name!r} is a {kind(value)}, expected a tensor"
    ts = payload.get("train_state")
    if ts is None:
        return None
    if not isinstance(ts, dict):
        return f"'train_state' is a {kind(ts)}, expected dict or None"
    for key, tp in {"optimizer": dict, "rng": dict, "counters": dict}.items():
        if not isinstance(ts.get(key), tp):
            what = "missing" if key not in ts else "a " + kind(ts[key])
            return f"'train_state.{key}' is {what}, expected {tp.__name__}"
    if ts.get("schedule") is not None and not isinstance(ts["schedule"], dict):
        return f"'train_state.schedule' is a {kind(ts['schedule'])}, expected dict or None"
    if not isinstance(ts["rng"].get("torch"), torch.Tensor) or not isinstance(
        ts["rng"].get("python"), tuple
    ):
        return "'train_state.rng' needs a 'torch' tensor and a 'python' tuple"
    if not all(isinstance(k, str) for k in ts["counters"]):
        return "'train_state.counters' has a key that is not a string"
    return None


@dataclass
class Loaded:
    """A checkpoint ready for translation; ``sha256``: the hex SHA-256 of the bytes it was
    loaded from, when asked for (:func:`load_checkpoint`), else None."""

    cfg: Config
    model: Seq2Seq
    src_vocab: Vocab
    tgt_vocab: Vocab
    payload: dict[str, Any]
    sha256: str | None = None


def load_checkpoint(
    path: str | Path, device: torch.device | str = "cpu", *, with_digest: bool = False
) -> Loaded:
    """Rebuild config, vocabularies and model (in eval mode) from a checkpoint; with
    ``with_digest``, also the SHA-256 of the bytes loaded (the file is read once, into
    memory, so a file replaced meanwhile cannot get another's digest).

    Raises:
        CheckpointError: see :func:`read_payload`, the stored config/weights are invalid,
            or the model cannot fit ``device``'s memory (:func:`check_fits`).
    """
    payload, digest = read_payload_and_digest(path) if with_digest else (read_payload(path), None)
    cfg = stored_config(payload, path)
    src_vocab, tgt_vocab = vocabs_of(payload, path)
    try:  # before the model's copy of the weights is made
        check_fits(
            cfg.model,
            len(src_vocab),
            len(tgt_vocab),
            torch.device(device),
            training=False,
            where=str(path),
        )
    except ResourceError as e:
        raise CheckpointError(str(e)) from None
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab))
    why = weights_mismatch(model, payload["model"])
    if why:
        raise CheckpointError(f"{path}: weights do not match the stored config: {why}")
    model.load_state_dict(payload["model"])
    model.to(device).eval()
    return Loaded(cfg, model, src_vocab, tgt_vocab, payload, digest)


def weights_mismatch(model: torch.nn.Module, weights: dict[str, Any]) -> str | None:
    """Why ``weights`` cannot be loaded into ``model`` (the first missing, unexpected or
    differently shaped tensor, with both shapes), or None when they fit."""
    expected = model.state_dict()
    for key, value in expected.items():
        if key not in weights:
            return f"tensor {key!r} is missing"
        if tuple(weights[key].shape) != tuple(value.shape):
            return (
                f"tensor {key!r} has shape {tuple(weights[key].shape)}, the model needs "
                f"{tuple(value.shape)}"
            )
    extra = [k for k in weights if k not in expected]
    return f"unexpected tensor {extra[0]!r}" if extra else None


def stored_config(payload: dict[str, Any], path: str | Path) -> Config:
    """The run configuration stored in a checked payload.

    Raises:
        CheckpointError: the stored config is not a valid nmt config (names the key).
    """
    try:
        return from_dict(payload["config"])
    except ConfigError as e:
        raise CheckpointError(f"{path}: stored config is invalid: {e}") from None


def vocabs_of(payload: dict[str, Any], path: str | Path) -> tuple[Vocab, Vocab]:
    """The source and target SentencePiece models stored in a checked payload.

    Raises:
        CheckpointError: a stored model cannot be loaded by SentencePiece.
    """
    try:
        return Vocab(payload["src_spm"]), Vocab(payload["tgt_spm"])
    except Exception as e:  # sentencepiece raises RuntimeError/OSError on bad bytes
        raise CheckpointError(
            f"{path}: damaged nmt checkpoint: stored SentencePiece model "
            f"cannot be loaded ({type(e).__name__})"
        ) from None
