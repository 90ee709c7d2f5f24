"""The model folder: a checkpoint's weights, config and SentencePiece models as plain files,
in the Hugging Face Hub's layout, each file's SHA-256 in a manifest.

Layout (``nmt export`` writes it, :func:`nmt.model.checkpoint.load_checkpoint` reads it)::

    manifest.json        format, version, run id, weight dtype, and per file its SHA-256 and size
    model.safetensors    the model's state_dict (fp32, bf16 or fp16): tensors only, never code
    config.yaml          the resolved run config
    source.spm.model     the source SentencePiece model
    target.spm.model     the target SentencePiece model
    README.md, results.json, valid_log.jsonl, *.gz   the model card and its evidence

Reading is as safe as reading a checkpoint: every file the manifest lists must be there
with its SHA-256, or the folder is refused with a one-line :class:`FolderError` naming
the file (nmt/model/checkpoint.py raises it as a ``CheckpointError``); the weights are read
by ``safetensors`` (no unpickling) and the config by ``yaml.safe_load``. Files the
manifest does not list (the Hub adds ``.gitattributes``) are ignored. Weights stored in
bf16 or fp16 come back as fp32, so a loaded folder is the same in-memory object as a
loaded checkpoint.

``hf://ORG/NAME[@REVISION]`` is a folder on the Hub, fetched through ``huggingface_hub``
into its cache (``HF_HUB_OFFLINE=1``: the cache only). A bare name such as
``deen-additive`` is a folder shipped in the project's ``models/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

FOLDER_FORMAT = "nmt-model-folder"
FOLDER_VERSION = 1
MANIFEST, WEIGHTS, CONFIG = "manifest.json", "model.safetensors", "config.yaml"
SRC_SPM, TGT_SPM = "source.spm.model", "target.spm.model"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
HUB_PREFIX = "hf://"
# the project's shipped model folders (nmt translate deen-additive, nmt serve)
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "models"


class FolderError(ValueError):
    """A model folder cannot be read or written; the message names the file."""


@dataclass
class FolderContents:
    """What a checked model folder holds: ``config`` the run config (a plain dict),
    ``src_spm``/``tgt_spm`` the SentencePiece models' bytes, ``weights`` the state_dict
    in fp32, ``weights_sha256`` the hex SHA-256 of model.safetensors, ``run_id`` the
    training run's id (None when not recorded)."""

    config: dict[str, Any]
    src_spm: bytes
    tgt_spm: bytes
    weights: dict[str, torch.Tensor]
    weights_sha256: str
    run_id: str | None


def is_folder(path: Path) -> bool:
    """Whether ``path`` is a model folder (a directory with a manifest.json)."""
    return path.is_dir() and (path / MANIFEST).is_file()


def is_hub_spec(spec: str | Path) -> bool:
    """Whether ``spec`` names a Hub folder: ``hf://ORG/NAME[@REV]`` (a Path folds the
    double slash, so ``hf:/ORG/NAME`` counts too)."""
    return str(spec).startswith(("hf://", "hf:/"))


def shipped_models(directory: Path | None = None) -> list[str]:
    """The names of the model folders shipped in ``directory`` (default the project's
    ``models/``), sorted; empty when there is none."""
    directory = SHIPPED_DIR if directory is None else directory
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if is_folder(p))


def shipped_path(name: str, directory: Path | None = None) -> Path | None:
    """``models/NAME`` when ``name`` is a bare name (no path separator, no suffix such as
    ``.pt``) of a shipped model folder, else None."""
    if "/" in name or os.sep in name or "." in name or not name:
        return None
    path = (SHIPPED_DIR if directory is None else directory) / name
    return path if is_folder(path) else None


def unknown_name_hint(name: str) -> str:
    """What to add to "not found" for a bare ``name``: the shipped models' names, or ""
    when ``name`` looks like a path (a separator or a suffix)."""
    if "/" in name or os.sep in name or "." in name:
        return ""
    known = shipped_models()
    listed = ", ".join(known) if known else f"none (no model folder in {SHIPPED_DIR})"
    return f", nor a shipped model name (known: {listed})"


def resolve_hub(spec: str | Path) -> Path:
    """The local snapshot of ``hf://ORG/NAME[@REVISION]``, downloaded through
    ``huggingface_hub`` into its cache, or found there when ``HF_HUB_OFFLINE=1``.

    Raises:
        FolderError: a malformed spec, or the folder cannot be had (offline and not
            cached, no such repository or revision, no network); names the spec.
    """
    text = str(spec)
    rest = text[len("hf://") :] if text.startswith("hf://") else text[len("hf:/") :]
    repo, _, revision = rest.partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise FolderError(f"{text}: a Hub model is hf://ORG/NAME or hf://ORG/NAME@REVISION")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=repo, revision=revision or None))
    except Exception as e:  # the hub raises many kinds: offline, missing repo, HTTP
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        hint = " (HF_HUB_OFFLINE is set: only the local Hub cache is used)" if offline else ""
        raise FolderError(
            f"{text}: cannot get the model folder from the Hugging Face "
            f"Hub{hint}: {type(e).__name__}: {why}"
        ) from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_manifest(folder: Path) -> dict[str, Any]:
    """The checked manifest of ``folder``.

    Raises:
        FolderError: no manifest, not JSON, not an nmt folder, another version, or a
            file entry that is not a plain file name with a SHA-256.
    """
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise FolderError(f"{path}: cannot read the manifest ({e.strerror or e})") from None
    except ValueError as e:
        raise FolderError(f"{path}: not JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FOLDER_FORMAT:
        raise FolderError(f"{path}: not an nmt model folder manifest (no '{FOLDER_FORMAT}' marker)")
    if manifest.get("version") != FOLDER_VERSION:
        raise FolderError(
            f"{path}: model folder version {manifest.get('version')!r} is "
            f"not supported by this nmt (expects {FOLDER_VERSION})"
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise FolderError(f"{path}: 'files' is missing or not an object")
    for name, entry in files.items():
        # a name like ../x or /etc/x would make the check read outside the folder
        if (
            not isinstance(name, str)
            or Path(name).name != name
            or name in ("", ".", "..")
            or not isinstance(entry, dict)
            or not isinstance(entry.get("sha256"), str)
        ):
            raise FolderError(
                f"{path}: bad file entry {name!r} (expected a plain file name with a 'sha256')"
            )
    for needed in (WEIGHTS, CONFIG, SRC_SPM, TGT_SPM):
        if needed not in files:
            raise FolderError(f"{path}: lists no {needed}; the folder cannot be loaded")
    return manifest


def read_checked_files(folder: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and the bytes of the files it lists, each checked against its SHA-256.

    Raises:
        FolderError: see :func:`read_manifest`; a listed file missing, unreadable or
            altered (its SHA-256 differs), named.
    """
    manifest = read_manifest(folder)
    data: dict[str, bytes] = {}
    for name, entry in manifest["files"].items():
        path = folder / name
        try:
            data[name] = path.read_bytes()
        except FileNotFoundError:
            raise FolderError(
                f"{path}: missing from the model folder (listed in its {MANIFEST})"
            ) from None
        except OSError as e:
            raise FolderError(f"{path}: cannot read ({e.strerror or e})") from None
        if _sha256(data[name]) != entry["sha256"]:
            raise FolderError(
                f"{path}: altered: its SHA-256 is not the one in "
                f"{folder / MANIFEST}; the folder is refused"
            )
    return manifest, data


def read_folder(folder: Path) -> FolderContents:
    """The checked contents of a model folder (floating weights as fp32).

    Raises:
        FolderError: see :func:`read_checked_files`; weights or config unreadable.
    """
    manifest, data = read_checked_files(folder)
    try:
        from safetensors.torch import load as load_safetensors

        weights = load_safetensors(data[WEIGHTS])
    except Exception as e:  # safetensors raises its own SafetensorError on bad bytes
        raise FolderError(
            f"{folder / WEIGHTS}: not readable safetensors ({type(e).__name__})"
        ) from None
    try:
        config = yaml.safe_load(data[CONFIG].decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise FolderError(f"{folder / CONFIG}: not readable YAML ({type(e).__name__})") from None
    if not isinstance(config, dict):
        raise FolderError(f"{folder / CONFIG}: not a mapping of config sections")
    run_id = manifest.get("run_id")
    return FolderContents(
        config,
        data[SRC_SPM],
        data[TGT_SPM],
        # bf16/fp16 storage is for size only: the model computes as a checkpoint's does
        {k: v.float() if v.is_floating_point() else v for k, v in weights.items()},
        _sha256(data[WEIGHTS]),
        run_id if isinstance(run_id, str) else None,
    )


def weights_bytes(state: dict[str, torch.Tensor], dtype: str) -> bytes:
    """``state`` as safetensors bytes, floating tensors cast to ``dtype`` (fp32, bf16, fp16).

    Raises:
        ValueError: an unknown ``dtype``.
    """
    if dtype not in DTYPES:
        raise ValueError(f"--dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    from safetensors.torch import save as save_safetensors

    cast = {
        k: (v.to(DTYPES[dtype]) if v.is_floating_point() else v).contiguous()
        for k, v in state.items()
    }
    return save_safetensors(cast, metadata={"format": FOLDER_FORMAT, "dtype": dtype})


def core_files(payload: dict[str, Any], dtype: str) -> dict[str, bytes]:
    """The files a folder needs to load: weights in ``dtype``, config, both SentencePiece
    models, from a checked checkpoint payload (nmt/model/checkpoint.py's ``config``,
    ``model``, ``src_spm`` and ``tgt_spm``)."""
    config = yaml.safe_dump(payload["config"], sort_keys=False, allow_unicode=True)
    return {
        WEIGHTS: weights_bytes(payload["model"], dtype),
        CONFIG: config.encode("utf-8"),
        SRC_SPM: payload["src_spm"],
        TGT_SPM: payload["tgt_spm"],
    }


def core_files_names() -> tuple[str, ...]:
    """The names of the files :func:`core_files` makes."""
    return WEIGHTS, CONFIG, SRC_SPM, TGT_SPM


def write_folder(
    out: Path, files: dict[str, bytes], *, run_id: str | None, dtype: str
) -> dict[str, Any]:
    """Write ``files`` (name -> bytes) and their manifest as the model folder ``out``,
    atomically: into a new directory beside it, renamed into place, so ``out`` is either
    absent or complete. Returns the manifest.

    Raises:
        FolderError: ``out`` exists and is not empty (nothing is overwritten), or the
            folder cannot be written (the disk is full, no permission).
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FolderError(
            f"{out}: exists and is not an empty directory; give a new "
            "folder (nothing is overwritten)"
        )
    manifest = {
        "format": FOLDER_FORMAT,
        "version": FOLDER_VERSION,
        "run_id": run_id,
        "dtype": dtype,
        "files": {
            name: {"sha256": _sha256(b), "bytes": len(b)} for name, b in sorted(files.items())
        },
    }
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            for name, b in {
                **files,
                MANIFEST: (json.dumps(manifest, indent=2) + "\n").encode("utf-8"),
            }.items():
                (tmp / name).write_bytes(b)
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; a model folder is for sharing
            if out.is_dir():
                out.rmdir()
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except OSError as e:
        raise FolderError(f"{out}: cannot write the model folder ({e.strerror or e})") from None
    return manifest


def names_folder(path: Path) -> bool:
    """Whether ``path`` names a model folder: a Hub spec, a folder, or a shipped model's
    name; no network is used (a Hub spec is not fetched)."""
    return (
        is_hub_spec(path)
        or is_folder(path)
        or (not path.exists() and shipped_path(str(path)) is not None)
    )


def resolve_model_path(path: Path) -> Path:
    """Where the model named by ``path`` lies on disk: ``path`` itself, the local snapshot
    of a Hub spec, or ``models/NAME`` for a shipped model's bare name that is not a path.

    Raises:
        FolderError: see :func:`resolve_hub`.
    """
    if is_hub_spec(path):
        return resolve_hub(path)
    if not path.exists():
        shipped = shipped_path(str(path))
        if shipped is not None:
            return shipped
    return path
