"""A study's records kept in git: each finished run's logs and the report's translations,
so that the report can be made again when ``runs/`` and its checkpoints are gone (a new
machine, a later session) and only the models still missing are trained.

Layout, when the study sets ``archive_dir`` (``{name}`` is the study's name)::

    {archive_dir}/{run name}/config.yaml, summary.json, valid_log.jsonl, train.log
    {archive_dir}/{run name}/checkpoint.json    {"sha256": SHA-256 of best.pt}
    {archive_dir}/{run name}/hyps/{set}[.{decoding}].txt and .txt.key.json

The translations are kept under the same key as the cache beside a checkpoint
(nmt/study/decode.py), so an archived run's translations are used only for the
checkpoint, source lines and decoding they were made with. Checkpoints themselves are
never archived: they are large and stay out of git.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from nmt.config.differences import describe_differences, resume_conflicts
from nmt.config.load import from_dict
from nmt.config.schema import Config, ConfigError, StudyConfig
from nmt.ops.files import write_atomic

RECORDS = ("config.yaml", "summary.json", "valid_log.jsonl", "train.log")
CHECKPOINT = "checkpoint.json"


class ArchiveError(RuntimeError):
    """An archived run cannot be used; the message names its file."""


def run_archive(study: StudyConfig, name: str) -> Path | None:
    """``{archive_dir}/{name}``, or None when the study keeps no archive."""
    if not study.archive_dir:
        return None
    return Path(study.archive_dir.format(name=study.name)) / name


def archived_sha256(folder: Path, cfg: Config) -> str | None:
    """The SHA-256 of the checkpoint the run archived in ``folder`` was reported from, or
    None when ``folder`` holds no complete archive (no ``checkpoint.json`` or
    ``summary.json``).

    Raises:
        ArchiveError: the archive's files are unreadable, or its ``config.yaml`` differs
            from ``cfg`` in more than a budget (names the file and the differences).
    """
    if not (folder / CHECKPOINT).exists() or not (folder / "summary.json").exists():
        return None
    try:
        record = json.loads((folder / CHECKPOINT).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ArchiveError(
            f'{folder / CHECKPOINT}: unreadable (expected {{"sha256": "<64 hex digits>"}}): {e}'
        ) from None
    sha = record.get("sha256") if isinstance(record, dict) else None
    try:
        stored = from_dict(yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8")))
    except (OSError, TypeError, AttributeError, yaml.YAMLError, ConfigError) as e:
        raise ArchiveError(f"{folder / 'config.yaml'}: unreadable archived config: {e}") from None
    changes = resume_conflicts(stored, cfg)
    if changes.conflicts:
        raise ArchiveError(
            f"{folder / 'config.yaml'} was trained with a different config "
            f"({describe_differences(changes.conflicts, 'archive', 'study')}); "
            "delete the archived run or change run_prefix"
        )
    if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ArchiveError(f"{folder / CHECKPOINT}: sha256 is not a SHA-256 digest: {sha!r}")
    return sha


def archive_records(folder: Path, out_dir: Path, checkpoint_sha256: str) -> None:
    """Copy a finished run's records from ``out_dir`` into ``folder`` and record the
    digest of the checkpoint its report translations come from. Raises OSError."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in RECORDS:
        if (out_dir / name).exists():
            shutil.copyfile(out_dir / name, folder / name)
    write_atomic(folder / CHECKPOINT, json.dumps({"sha256": checkpoint_sha256}) + "\n")
