"""Plots for the attention study, after Bahdanau et al. (2015), as PNG files.

BLEU against source sentence length with one line per model (their Fig. 2), and an
attention heatmap for one sentence, source pieces across the top and target pieces down
the side, in grey scale (their Fig. 3). PNG files, small enough to commit beside a
Markdown report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import matplotlib

# Headless: the study runs on servers without a display, and the default backend may try
# to open one. The backend must be chosen before pyplot is imported.
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.lines import Line2D

from nmt.evaluation.length_table import BucketRow

DPI = 120
FIGSIZE_IN = (6.4, 4.0)


@dataclass
class LengthPoint:
    """BLEU of one system on one source-length bucket.

    Attributes:
        label: bucket label shown as the x tick, e.g. ``"11-20"`` or ``"31+"``.
        x: position on the x axis in source words (the bucket's mean length or midpoint).
        n: sentences in the bucket; 0 means empty and the point is skipped.
        bleu: BLEU (0-100), or None when the bucket is empty.
        low, high: its 95% interval (None: no band at this point).
        too_few: drawn with a hollow marker (the bucket is too small to trust).
    """

    label: str
    x: float
    n: int
    bleu: float | None
    low: float | None = None
    high: float | None = None
    too_few: bool = False


def curves_from_rows(rows: list[BucketRow]) -> dict[str, list[LengthPoint]]:
    """The curves of :func:`plot_bleu_by_length` from the rows of
    :func:`nmt.evaluation.length_table.study_table`; x is the mean source length of the
    bucket, or its midpoint when empty."""
    curves: dict[str, list[LengthPoint]] = {}
    for r in rows:
        mid = r.min_len if r.max_len is None else (r.min_len + r.max_len) / 2
        x = r.mean_src_words if r.mean_src_words is not None else mid
        iv = r.bleu
        curves.setdefault(r.system, []).append(
            LengthPoint(
                r.label,
                x,
                r.n,
                None if iv is None else iv.score,
                None if iv is None else iv.low,
                None if iv is None else iv.high,
                r.too_few,
            )
        )
    return curves


def image_format(path: str | Path) -> str:
    """The image format that ``path``'s suffix asks for (``png`` without one): png, pdf,
    svg, jpg, ... (whatever matplotlib writes).

    Raises:
        ValueError: a suffix that matplotlib cannot write, naming the path.
    """
    fmt = Path(path).suffix[1:].lower() or "png"
    # matplotlib's own writers; pgf needs a LaTeX install and raw/rgba are pixel dumps
    supported = set(FigureCanvasBase.get_supported_filetypes()) - {"pgf", "raw", "rgba"}
    if fmt not in supported:
        raise ValueError(
            f"{path}: cannot write a .{fmt} image; use one of "
            f"{', '.join('.' + f for f in sorted(supported))}"
        )
    return fmt


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format=image_format(path))  # x.pdf is a PDF
    return path


def plot_bleu_by_length(
    curves: dict[str, list[LengthPoint]],
    path: str | Path,
    title: str,
    dashed: list[str] | tuple[str, ...] = (),
) -> Path:
    """One line per system of BLEU against source length, with a shaded 95% band.

    Systems named in ``dashed`` (e.g. the models of a shorter training cap, like the
    paper's RNNsearch-30) are drawn with dashed lines. Empty buckets (``n == 0`` or ``bleu``
    None) are skipped; ``too_few`` buckets get a hollow marker. Writes a PNG (about 770x480
    pixels) at ``path``, creating its parent directories, and returns the path.
    """
    fig, ax = plt.subplots(figsize=FIGSIZE_IN)
    ticks: dict[float, str] = {}
    try:
        for i, (name, points) in enumerate(curves.items()):
            pts = sorted((p for p in points if p.n > 0 and p.bleu is not None), key=lambda p: p.x)
            if not pts:
                continue
            color = f"C{i % 10}"
            x = np.array([p.x for p in pts], dtype=float)
            bleu = cast(list[float], [p.bleu for p in pts])  # pts: bleu is not None
            ax.plot(
                x,
                bleu,
                color=color,
                label=name,
                linewidth=1.5,
                linestyle="--" if name in dashed else "-",
            )
            # NaN leaves a gap in the band where a point has no interval.
            low = [np.nan if p.low is None else p.low for p in pts]
            high = [np.nan if p.high is None else p.high for p in pts]
            ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0)
            for p in pts:
                ax.plot(
                    [p.x],
                    [cast(float, p.bleu)],
                    marker="o",
                    markersize=5,
                    color=color,
                    markerfacecolor="white" if p.too_few else color,
                )
                ticks.setdefault(round(p.x, 6), p.label)
        if ticks:
            ax.set_xticks(list(ticks), list(ticks.values()), fontsize=8)
        handles, _ = ax.get_legend_handles_labels()
        if any(p.too_few and p.n > 0 for pts in curves.values() for p in pts):
            handles.append(
                Line2D(
                    [],
                    [],
                    marker="o",
                    color="grey",
                    markerfacecolor="white",
                    linestyle="none",
                    label="too few sentences",
                )
            )
        if handles:
            ax.legend(handles=handles, fontsize=8, loc="best")
        ax.set_xlabel("Sentence length (source words)")
        ax.set_ylabel("BLEU")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)


def _as_array(weights) -> np.ndarray:
    # Accept a torch tensor without importing torch here.
    if hasattr(weights, "detach"):
        weights = weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=float)


def plot_attention(
    src_pieces: list[str], tgt_pieces: list[str], weights, path: str | Path, title: str
) -> Path:
    """Heatmap of attention ``weights`` (T, S): row t is the distribution over the source
    pieces when producing target piece t. White is weight 1, black 0 (fixed scale, so
    heatmaps of different models compare). Source pieces label the top axis, target pieces
    the left axis. Writes the image at ``path`` in the format of its suffix (PNG without
    one; see :func:`image_format`), creating its parent directories.

    Raises:
        ValueError: ``weights`` is not 2-D with shape (len(tgt_pieces), len(src_pieces)).
    """
    w = _as_array(weights)  # (T, S)
    if w.ndim != 2 or w.shape != (len(tgt_pieces), len(src_pieces)):
        raise ValueError(
            f"attention weights have shape {tuple(w.shape)} but there are "
            f"{len(tgt_pieces)} target and {len(src_pieces)} source pieces; "
            "expected (T, S) = (len(tgt_pieces), len(src_pieces))"
        )
    T, S = w.shape
    # About a quarter inch per piece, clamped so long sentences stay readable and small.
    size = (min(max(1.5 + 0.22 * S, 4.0), 14.0), min(max(1.5 + 0.22 * T, 3.0), 14.0))
    fontsize = 8 if max(S, T) <= 40 else 6
    fig, ax = plt.subplots(figsize=size)
    try:
        ax.imshow(w, cmap="gray", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        ax.xaxis.tick_top()
        ax.set_xticks(range(S), src_pieces, rotation=90, fontsize=fontsize)
        ax.set_yticks(range(T), tgt_pieces, fontsize=fontsize)
        ax.set_title(title, fontsize=10, pad=12)
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_length_histogram(
    counts: dict[str, list[int]], labels: list[str], path: str | Path, title: str
) -> Path:
    """Grouped bars: for each named training set, how many pairs fall in each source-length
    bucket (``counts[name][i]`` pairs in bucket ``labels[i]``). Log-scaled y axis, so the
    few long pairs stay visible beside the many short ones. Writes a PNG at ``path``.

    Raises:
        ValueError: a count list is not as long as ``labels``.
    """
    for name, c in counts.items():
        if len(c) != len(labels):
            raise ValueError(f"{name}: {len(c)} counts for {len(labels)} buckets")
    fig, ax = plt.subplots(figsize=FIGSIZE_IN)
    try:
        width = 0.8 / max(len(counts), 1)
        x = np.arange(len(labels))
        for i, (name, c) in enumerate(counts.items()):
            ax.bar(
                x + (i - (len(counts) - 1) / 2) * width,
                [max(v, 0) for v in c],
                width,
                label=name,
                color=f"C{i % 10}",
            )
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_yscale("symlog", linthresh=10)
        ax.set_xlabel("Source length (words)")
        ax.set_ylabel("Training pairs")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_head_maps(
    panels: Sequence[tuple[str, list[str], list[str], object]], path: str | Path, title: str
) -> Path:
    """Attention heatmaps side by side, one panel per head (or per model), on the same
    fixed grey scale as :func:`plot_attention`.

    Args:
        panels: ``(panel title, src_pieces, tgt_pieces, weights (T, S))`` per panel.
        path: PNG to write (parent directories are created).

    Raises:
        ValueError: no panel, or a panel's weights do not match its pieces.
    """
    if not panels:
        raise ValueError("plot_head_maps needs at least one panel")
    arrays = []
    for name, src, tgt, weights in panels:
        w = _as_array(weights)
        if w.shape != (len(tgt), len(src)):
            raise ValueError(
                f"panel {name!r}: weights have shape {tuple(w.shape)} but there "
                f"are {len(tgt)} target and {len(src)} source pieces"
            )
        arrays.append(w)
    S = max(w.shape[1] for w in arrays)
    T = max(w.shape[0] for w in arrays)
    width = min(max(1.5 + 0.2 * S, 3.5), 9.0)
    height = min(max(1.5 + 0.2 * T, 3.0), 10.0)
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), height), squeeze=False)
    try:
        fontsize = 7 if max(S, T) <= 40 else 5
        for ax, (name, src, tgt, _), w in zip(axes[0], panels, arrays, strict=True):
            ax.imshow(w, cmap="gray", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
            ax.xaxis.tick_top()
            ax.set_xticks(range(len(src)), src, rotation=90, fontsize=fontsize)
            ax.set_yticks(range(len(tgt)), tgt, fontsize=fontsize)
            ax.set_title(name, fontsize=9, pad=10)
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)
