"""The corpus a checkpoint was trained on, read again from here: its stored data config
(with ``--data-path`` replacing ``data.path``), and a test set from a named split of it or
from ``--src``/``--ref`` files.

Every verb that scores a checkpoint (evaluate, select, heads, bench) and ``nmt serve``'s
test sets read the stored corpus through these, so each gives the same clear error when the
corpus is not where the checkpoint says.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nmt.config.schema import DataConfig
from nmt.data.corpus import DataError, read_lines, read_split


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
