"""Content keys for what nmt keeps and reuses: SHA-256 of files, of streams, of text lines.

A cache is reused only while what it was made from is unchanged, and "unchanged" is decided
by content, never by a file's size or modification time: ``cp -p``, ``rsync -a`` and
``os.utime`` give an edited file its old time, and swapping two lines keeps its size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from nmt.data.corpus import DataError
from nmt.ops.files import GZIP_ERRORS, open_bytes

BLOCK = 1 << 20  # bytes read at a time


def file_sha256(path: str | Path) -> str:
    """The hex SHA-256 of a file's bytes as they are on disk.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            h.update(block)
    return h.hexdigest()


def content_sha256(path: Path) -> str:
    """The hex SHA-256 of a corpus file's text as nmt reads it: the bytes of a plain file,
    the decompressed bytes of a gzip one (:func:`nmt.ops.files.open_bytes`). It is the
    digest :func:`nmt.data.corpus.iter_lines` computes while it streams the file.

    Raises:
        DataError: the file is missing, unreadable, or a cut-short or corrupt gzip.
    """
    h = hashlib.sha256()
    try:
        with open_bytes(path) as f:
            while block := f.read(BLOCK):
                h.update(block)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except GZIP_ERRORS as e:
        raise DataError(f"{path}: gzip file is cut short or corrupt ({e})") from e
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from e
    return h.hexdigest()


def lines_sha256(lines: Iterable[str]) -> str:
    """The hex SHA-256 of text lines, each UTF-8 encoded and ended by a newline (lone
    surrogates kept, so every Python string has a key). Raises nothing."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8", errors="surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()
