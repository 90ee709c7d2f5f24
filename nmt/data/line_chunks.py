"""Input lines read in chunks as a filter needs them: one chunk in memory whatever the
input's size, every line kept (invalid UTF-8 replaced and its line number recorded), so
that each input line still gets its output line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO


def _decode_line(raw: bytes, number: int, invalid: list[int]) -> str:
    """One input line without its line ending; invalid UTF-8 becomes U+FFFD and the line
    ``number`` joins ``invalid`` (warned about once, at the end), so every input line still
    gets its output line."""
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        invalid.append(number)
        line = raw.decode("utf-8", errors="replace")
    return line.rstrip("\r")


def read_chunks(stream: BinaryIO, lines_per_chunk: int, invalid: list[int]) -> Iterator[list[str]]:
    """The lines of ``stream`` in chunks of ``lines_per_chunk`` (the last may be shorter),
    read as they are needed, so memory holds one chunk whatever the input's size. The
    numbers (from 1) of lines with invalid UTF-8 are appended to ``invalid``."""
    chunk: list[str] = []
    for number, raw in enumerate(stream, 1):
        chunk.append(_decode_line(raw, number, invalid))
        if len(chunk) == lines_per_chunk:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
