"""Each checkpoint once: ``nmt average`` and ensembles refuse a file given twice, however
its path is spelt, and two files of identical bytes, which would count one model twice."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nmt.data.digest import file_sha256
from nmt.model.checkpoint import CheckpointError, check_file


def also_as(first: Path, given: Path) -> str:
    """`` (also as FIRST)`` when a path given twice was spelt two ways, else ``""``: naming
    the same spelling twice only repeats it."""
    return "" if str(first) == str(given) else f" (also as {first})"


def refuse_duplicates(
    paths: Sequence[Path], use: str, digests: Sequence[str] | None = None
) -> list[str]:
    """Each checkpoint once (``nmt average``, ensembles): the same file, however spelled,
    or two files of identical bytes would count one model twice.

    Args:
        paths: the checkpoint files. use: what is done with each, for the message
            (``"averaged"``). digests: their SHA-256 when already known (e.g.
            :attr:`nmt.model.checkpoint.Loaded.sha256`); else each file is hashed here,
            without unpickling it.

    Returns:
        the SHA-256 of each file, in the order of ``paths``.

    Raises:
        CheckpointError: a file given twice or two with identical contents (both named),
            or a file that is missing, a directory or unreadable.
    """
    by_path: dict[Path, Path] = {}
    by_hash: dict[str, Path] = {}
    for i, p in enumerate(paths):
        resolved = p.resolve()
        if resolved in by_path:
            first = by_path[resolved]
            raise CheckpointError(
                f"{p}: given twice{also_as(first, p)}; each checkpoint can be {use} once"
            )
        by_path[resolved] = p
        digest = digests[i] if digests is not None else _file_digest(p)
        if digest in by_hash:
            raise CheckpointError(
                f"{p}: the same checkpoint as {by_hash[digest]} (identical "
                f"contents); each checkpoint can be {use} once"
            )
        by_hash[digest] = p
    return list(by_hash)


def _file_digest(path: Path) -> str:
    """The SHA-256 of the file ``path``, read as bytes (never unpickled).

    Raises:
        CheckpointError: missing, a directory or unreadable.
    """
    check_file(path)
    try:
        return file_sha256(path)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read checkpoint ({e.strerror or e})") from None
