"""Markdown tables, the one format every report and analysis of nmt prints."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a Markdown table: the header, its ``---`` rule, then one line per row.

    Args:
        header: the column names. rows: each row's cells, already formatted (``str()`` is
            applied to anything else).

    Returns:
        the table's lines, without a trailing blank line.

    Raises:
        ValueError: a row with another number of cells than ``header``.
    """
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(
                f"markdown_table: a row of {len(row)} cells under {len(header)} columns"
            )
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return lines
