"""Files written so that a crash never leaves half of one, a check that an output can be
written before the work that fills it, one test of two paths naming the same file, and
input files opened as bytes, gzip or not, pipes included (:func:`open_bytes`).

:func:`atomic_open` writes to a temporary file in the target's directory, flushes it to
disk (fsync) and renames it over the target (``os.replace``, atomic on POSIX): at any
moment the target is either the previous complete file or the new complete one.
Checkpoints, the training store's files, cached study translations and the validation log
are all written this way.
"""

from __future__ import annotations

import gzip
import os
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, cast


def _umask() -> int:
    """The process's umask (reading it means setting it; it is put back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_open(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` when the ``with`` block ends without error
    (temporary file, flush, fsync, ``os.replace``); on any error the temporary file is
    removed and ``path`` is left as it was.

    Raises:
        OSError: the directory is missing or not writable, or the disk is full.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); the result gets the mode any new file gets
        # here (0644 under the usual umask 022), so others can read shared runs
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (:func:`atomic_open`).

    Raises:
        OSError: as :func:`atomic_open`; ``path`` is then unchanged.
    """
    with atomic_open(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def append_line(path: str | Path, line: str) -> None:
    """Append ``line`` and a newline to the text file ``path`` (UTF-8) and flush it to disk
    (fsync), so that a record is either in the file or not yet; a kill during the write
    can at most leave the last line torn, which ``--resume`` sets aside with the records
    whose checkpoint was lost (nmt/model/rundir.py).

    Raises:
        OSError: the file cannot be written.
    """
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same inode when both exist (links, ``./``
    spellings), else the same absolute path. Raises nothing for missing files."""
    if a.exists() and b.exists():
        return a.samefile(b)
    return a.resolve() == b.resolve()


def check_writable(path: Path, option: str, *, folder: bool = False) -> None:
    """Check, before the minutes of work that fill it, that the output ``path`` of command
    option ``option`` can be written: for a file, that it is not a directory and that its
    folder exists; for a ``folder`` (created when missing), that it is not a file and that
    its nearest existing ancestor is a directory. Then a probe file is created and removed
    there, which catches what permission bits do not (a read-only or virtual file system
    such as /proc, which refuses new files even to root).

    Raises:
        ValueError: ``"{option} {path}: ..."`` naming what is wrong.
    """
    if folder:
        if path.exists() and not path.is_dir():
            raise ValueError(f"{option} {path}: exists and is not a directory")
        where = path
        while not where.exists() and where != where.parent:
            where = where.parent
        if not where.is_dir():
            raise ValueError(f"{option} {path}: {where} is not a directory")
    else:
        if path.is_dir():
            raise ValueError(f"{option} {path}: is a directory")
        where = path.parent
        if not where.is_dir():
            raise ValueError(f"{option} {path}: folder {where} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".nmt-probe.", dir=where)
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot write in {where} ({e.strerror or e})") from None
    os.close(fd)
    os.unlink(probe)


# what reading a cut-short or corrupt gzip file raises
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


class _GzipReader(gzip.GzipFile):
    """A GzipFile reading ``raw`` that closes ``raw`` too when closed (a GzipFile leaves a
    file object it was handed open)."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_bytes(path: Path) -> BinaryIO:
    """``path`` opened for reading bytes, decompressed when it is gzip: named ``.gz`` or
    starting with gzip's magic bytes (``1f 8b``). A damaged gzip raises one of
    :data:`GZIP_ERRORS` while it is read. The file is opened once and its first bytes are
    peeked, not read, so a pipe (``-i <(zcat ...)``, ``/dev/stdin``) loses nothing.

    Raises:
        OSError: the file cannot be opened.
    """
    f = open(path, "rb")  # returned open: the caller closes it
    try:
        packed = path.suffix == ".gz" or _starts_as_gzip(f)
    except OSError:
        f.close()
        raise
    return cast(BinaryIO, _GzipReader(f)) if packed else f


def gunzipped(stream: BinaryIO) -> BinaryIO:
    """``stream`` (e.g. standard input's bytes), decompressed when it starts with gzip's
    magic bytes, which are peeked, not read (``printf ... | gzip | nmt translate``).
    Closing the result leaves ``stream`` open. A stream that cannot peek is returned as
    it is. Raises what peeking raises (OSError)."""
    if _starts_as_gzip(stream):
        return cast(BinaryIO, gzip.GzipFile(fileobj=stream, mode="rb"))
    return stream


def _starts_as_gzip(stream: BinaryIO) -> bool:
    """Whether ``stream`` starts with gzip's magic bytes (``1f 8b``), peeked without
    reading them; False for a stream that cannot peek. Raises what peeking raises."""
    peek = getattr(stream, "peek", None)
    return peek is not None and peek(2)[:2] == b"\x1f\x8b"
