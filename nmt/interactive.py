"""``nmt translate`` front ends: an interactive prompt on a terminal, a line filter otherwise.
Always one output line per input line, in order."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TextIO

from nmt.checkpoint import Loaded
from nmt.translate import (Decoding, Translation, strongest_alignment, translate_lines,
                           truncation_warning)


def _attention_lines(tr: Translation) -> list[str]:
    if tr.attention is None:
        return ["  (no attention: the fixed-vector model reads one context vector)"] if tr.text else []
    return [f"  {tgt:>14} <- {src:<14} {w:.2f}" for tgt, src, w in strongest_alignment(tr)]


def plot_paths(plot: Path, n: int) -> list[Path]:
    """``plot`` itself for one sentence, else ``stem_1.png``, ``stem_2.png``, ..."""
    if n == 1:
        return [plot]
    return [plot.with_name(f"{plot.stem}_{i}{plot.suffix or '.png'}") for i in range(1, n + 1)]


def draw(tr: Translation, path: Path) -> bool:
    """Draw the attention heatmap of one translation; False when there is none to draw."""
    if tr.attention is None:
        return False
    from nmt.plots import plot_attention  # matplotlib only when a plot is asked for

    plot_attention(tr.src_pieces, tr.tgt_pieces, tr.attention, path, tr.text[:70])
    return True


def _decode_lines(data: bytes, where: str) -> list[str]:
    """Split input bytes into lines; invalid UTF-8 becomes U+FFFD with a warning, so every
    input line still gets its output line."""
    lines = []
    for i, raw in enumerate(data.split(b"\n"), 1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            print(f"warning: {where}:{i}: invalid UTF-8 replaced by U+FFFD", file=sys.stderr)
            lines.append(raw.decode("utf-8", errors="replace"))
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start another one
    return [line.rstrip("\r") for line in lines]


def _one_line(text: str) -> str:
    # a translation must never add lines: keep the one-line-in, one-line-out contract
    return " ".join(text.split())


def run_interactive(loaded: Loaded, show_attention: bool, decoding: Decoding,
                    plot: Path | None = None, stdin: TextIO = sys.stdin,
                    stdout: TextIO = sys.stdout) -> int:
    """Prompt, translate each line, print; empty lines are skipped; Ctrl-D/Ctrl-C quit.
    With ``plot`` the heatmap of the latest sentence is written there.

    Returns:
        the exit status: 0 after Ctrl-D (end of input), 130 after Ctrl-C (interrupted,
        as shells expect), at the prompt or during a translation.
    """
    d = loaded.cfg.data
    stdout.write(f"nmt {d.src_lang}->{d.tgt_lang} ({loaded.cfg.model.attention} attention). "
                 "Type a sentence; Ctrl-D to quit.\n")
    if stdin is sys.stdin:  # a terminal in another encoding must not end the session
        stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    while True:
        stdout.write("> ")
        stdout.flush()
        try:
            line = stdin.readline()
            if not line:
                stdout.write("\n")
                return 0
            if not line.strip():
                continue
            tr = translate_lines(loaded.model, loaded.src_vocab, loaded.tgt_vocab, [line],
                                 decoding=decoding)[0]
        except KeyboardInterrupt:
            stdout.write("\n")
            return 130
        if tr.truncated:
            stdout.write("(warning: input cut to the first 400 pieces)\n")
        stdout.write(_one_line(tr.text) + "\n")
        if show_attention:
            stdout.write("\n".join(_attention_lines(tr)) + "\n")
        if plot is not None:
            stdout.write(f"(heatmap: {plot})\n" if draw(tr, plot)
                         else "(no heatmap: this model has no attention weights)\n")


def run_filter(loaded: Loaded, input_path: Path | None, output_path: Path | None,
               show_attention: bool, decoding: Decoding, batch_size: int = 64,
               plot: Path | None = None, workers: int | None = None) -> None:
    """Translate every line of ``input_path`` (or stdin) to ``output_path`` (or stdout),
    ``workers`` batches at once (:func:`nmt.translate.translate_lines`).

    With ``show_attention`` the alignments go to stderr so stdout keeps one line per input;
    with ``plot`` one heatmap per non-empty line is drawn (see :func:`plot_paths`).

    Raises:
        ValueError: ``plot`` with a model that has no attention (the fixed-vector model);
            an input that is not a file, or an output whose folder does not exist (both
            checked before any translating, so no work is lost on them).
    """
    if input_path is not None and not input_path.is_file():
        what = "is a directory" if input_path.is_dir() else "no such file"
        raise ValueError(f"--input {input_path}: {what}")
    if output_path is not None and (output_path.is_dir() or not output_path.parent.is_dir()):
        what = ("is a directory" if output_path.is_dir()
                else f"folder {output_path.parent} does not exist")
        raise ValueError(f"--output {output_path}: {what}")
    if input_path is not None:
        with open(input_path, "rb") as f:
            data = f.read()
    else:
        data = sys.stdin.buffer.read()
    lines = _decode_lines(data, str(input_path or "stdin"))
    results = translate_lines(loaded.model, loaded.src_vocab, loaded.tgt_vocab, lines,
                              batch_size=batch_size, decoding=decoding, workers=workers)
    if plot is not None:
        drawn = [t for t in results if t.text or t.src_pieces]
        if loaded.cfg.model.attention == "none":
            raise ValueError("--plot: the fixed-vector model (attention: none) has no attention "
                             "weights to draw")
        for tr, path in zip(drawn, plot_paths(plot, len(drawn))):
            draw(tr, path)
            print(f"heatmap: {path}", file=sys.stderr)
    warning = truncation_warning(results, str(input_path or "stdin"))
    if warning:
        print(warning, file=sys.stderr)
    out = open(output_path, "w", encoding="utf-8") if output_path else sys.stdout
    try:
        for i, tr in enumerate(results):
            if decoding.n_best > 1:  # Moses n-best format: index ||| hypothesis ||| score
                for text, sc in tr.nbest or [(tr.text, tr.score or 0.0)]:
                    out.write(f"{i} ||| {_one_line(text)} ||| {sc:.4f}\n")
                continue
            out.write(_one_line(tr.text) + "\n")
            if show_attention:
                print("\n".join([tr.source.strip()] + _attention_lines(tr)), file=sys.stderr)
    finally:
        if output_path:
            out.close()
