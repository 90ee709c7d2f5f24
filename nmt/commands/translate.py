"""``nmt translate``: the paths checked, the checkpoints loaded once into a Translator,
then an interactive prompt on a terminal or a line filter otherwise (:func:`translate`).
Always one output line per input line, in order."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from nmt.data.line_chunks import read_chunks
from nmt.inference.ensemble import LoadedEnsemble
from nmt.inference.translate import (
    MAX_SOURCE_PIECES,
    LineNotes,
    Translation,
    filter_lines,
    one_line,
    strongest_alignment,
)
from nmt.inference.translator import Translator
from nmt.ops.files import GZIP_ERRORS, check_writable, gunzipped, open_bytes, same_file


def _attention_lines(tr: Translation) -> list[str]:
    if tr.attention is None:
        if not tr.text:
            return []
        return ["  (no attention: the fixed-vector model reads one context vector)"]
    return [f"  {tgt:>14} <- {src:<14} {w:.2f}" for tgt, src, w in strongest_alignment(tr)]


def plot_path(plot: Path, k: int, only_one: bool) -> Path:
    """Where the heatmap of the ``k``-th drawn sentence (from 1) goes: ``plot`` itself when
    it is the ``only_one``, else ``stem_1.png``, ``stem_2.png``, ..."""
    return plot if only_one else plot.with_name(f"{plot.stem}_{k}{plot.suffix or '.png'}")


def draw(tr: Translation, path: Path) -> bool:
    """Draw the attention heatmap of one translation; False when there is none to draw."""
    if tr.attention is None:
        return False
    from nmt.evaluation.plots import plot_attention  # matplotlib only when a plot is asked for

    plot_attention(tr.src_pieces, tr.tgt_pieces, tr.attention, path, tr.text[:70])
    return True


def _attention_types(loaded: Any) -> list[str]:
    if isinstance(loaded, LoadedEnsemble):
        return loaded.attention_types
    return [loaded.cfg.model.attention]


def _model_label(loaded: Any) -> str:
    """``additive attention``, or ``ensemble of 2 (additive, dot)``."""
    if isinstance(loaded, LoadedEnsemble):
        return loaded.describe()
    return f"{loaded.cfg.model.attention} attention"


# marks a hypothesis that reached the length limit before </s> at the prompt
_CUT = "  [cut at the length limit, no end of sentence]"


def run_interactive(
    translator: Translator,
    *,
    show_attention: bool,
    plot: Path | None = None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> int:
    """Prompt, translate each line with ``translator`` (:meth:`Translator.from_paths`: it
    keeps the checkpoints it was loaded from), print; empty lines are skipped;
    Ctrl-D/Ctrl-C quit. With ``decoding.n_best`` > 1 the N best hypotheses are listed,
    best first, each with its score (log-probability after the length penalty); one cut at
    the length limit before ``</s>`` is marked, and listed after the complete ones. With
    ``plot`` the heatmap of the latest sentence (of the best hypothesis) is written there.

    Returns:
        the exit status: 0 after Ctrl-D (end of input), 130 after Ctrl-C (interrupted,
        as shells expect), at the prompt or during a translation.
    """
    loaded, decoding = translator.loaded, translator.decoding
    d = loaded.cfg.data
    stdout.write(
        f"nmt {d.src_lang}->{d.tgt_lang} ({_model_label(loaded)}; "
        f"{decoding.describe()}). Type a sentence; Ctrl-D to quit.\n"
    )
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
            tr = translator.translate([line])[0]
        except KeyboardInterrupt:
            stdout.write("\n")
            return 130
        if tr.truncated:
            stdout.write(f"(warning: input cut to the first {MAX_SOURCE_PIECES} pieces)\n")
        if tr.unknown:
            stdout.write(
                "(warning: the model knows no piece of this input (<unk>); "
                "the translation is a guess)\n"
            )
        if decoding.n_best > 1 and tr.nbest:
            stdout.write(
                "".join(
                    f"{k}. {one_line(text)}{'' if done else _CUT}  ({sc:.4f})\n"
                    for k, (text, sc, done) in enumerate(tr.nbest, 1)
                )
            )
        else:
            stdout.write(one_line(tr.text) + ("" if tr.complete else _CUT) + "\n")
        if show_attention:
            stdout.write("\n".join(_attention_lines(tr)) + "\n")
        if plot is not None:
            stdout.write(
                f"(heatmap: {plot})\n"
                if draw(tr, plot)
                else "(no heatmap: this model has no attention weights)\n"
            )


def run_filter(
    translator: Translator,
    *,
    input_path: Path | None,
    output_path: Path | None,
    show_attention: bool,
    plot: Path | None = None,
    lines_per_chunk: int | None = None,
) -> None:
    """Translate every line of ``input_path`` (or stdin) to ``output_path`` (or stdout)
    with ``translator`` (:meth:`Translator.from_paths`: its decoding settings, batch size
    and workers).

    The input is read and translated in chunks of ``lines_per_chunk`` lines (default 16
    batches), sorted by length within a chunk as fairseq's ``--buffer-size`` does, and each
    chunk's output is written and flushed before the next is read: memory holds one chunk,
    a Ctrl-C keeps every chunk already written, and the output does not depend on the
    chunk size (each batch is searched alone).

    With ``show_attention`` the alignments go to stderr so stdout keeps one line per input;
    with ``plot`` one heatmap per non-empty line is drawn (see :func:`plot_path`). An
    ensemble (:class:`nmt.inference.ensemble.LoadedEnsemble`) shows, and draws, the mean
    attention of its members that have attention.

    Raises:
        ValueError: ``plot`` with a model that has no attention (the fixed-vector model);
            an input that is not a file, or an output whose folder does not exist (all
            checked before any translating, so no work is lost on them).
    """
    _check_paths(input_path, output_path)
    decoding = translator.decoding
    if plot is not None and all(a == "none" for a in _attention_types(translator.loaded)):
        raise ValueError(
            "--plot: the fixed-vector model (attention: none) has no attention weights to draw"
        )
    lines_per_chunk = lines_per_chunk or 16 * translator.batch_size
    where = str(input_path or "stdin")
    source = open_bytes(input_path) if input_path is not None else gunzipped(sys.stdin.buffer)
    out = open(output_path, "w", encoding="utf-8") if output_path else sys.stdout
    notes = LineNotes()  # the input lines to warn about once done
    first = 0  # index of the chunk's first line in the whole input
    drawn = 0
    try:
        chunks = _input_chunks(source, lines_per_chunk, notes.invalid, where)
        chunk = next(chunks, [])
        while chunk:
            results = translator.translate(chunk)
            following: list[str] = []
            if plot is not None:
                # looking ahead tells whether the input is one sentence (one file, as named);
                # without --plot each chunk is written before the next is read
                following = next(chunks, [])
                to_draw = [t for t in results if t.text or t.src_pieces]
                only_one = first == 0 and not following and len(to_draw) == 1
                for tr in to_draw:
                    drawn += 1
                    path = plot_path(plot, drawn, only_one)
                    draw(tr, path)
                    print(f"heatmap: {path}", file=sys.stderr)
            for i, tr in enumerate(results, first):
                notes.note(i + 1, tr)
                out.writelines(filter_lines(i, tr, decoding.n_best))
                if show_attention:  # of the best hypothesis, also with --nbest
                    print("\n".join([tr.source.strip()] + _attention_lines(tr)), file=sys.stderr)
            out.flush()
            first += len(chunk)
            chunk = following if plot is not None else next(chunks, [])
    finally:
        if output_path:
            out.close()
        if input_path is not None:
            source.close()
    for warning in notes.warnings(where, decoding.n_best > 1):
        print(warning, file=sys.stderr)


def _input_chunks(
    source: BinaryIO, lines_per_chunk: int, invalid: list[int], where: str
) -> Iterator[list[str]]:
    """The chunks of :func:`nmt.data.line_chunks.read_chunks` (``invalid`` collects the
    numbers of lines that are not UTF-8), with a damaged gzip input raised as one error
    naming it. Only the reading is covered: an EOFError of the search (a search process's
    pipe closing) was once reported as a damaged input.

    Raises:
        ValueError: ``--input WHERE: damaged gzip file (...)``, with how many lines before
            the damage were translated.
    """
    chunks = read_chunks(source, lines_per_chunk, invalid)
    done = 0  # lines handed out, all translated by the time the next chunk is asked for
    while True:
        try:
            chunk = next(chunks, [])
        except GZIP_ERRORS as e:
            raise ValueError(
                f"--input {where}: damaged gzip file ({e}); the lines before the "
                f"damage ({done}) were translated"
            ) from None
        if not chunk:
            return
        yield chunk
        done += len(chunk)


def _check_paths(input_path: Path | None, output_path: Path | None) -> None:
    """Refuse an ``--input`` that does not exist or is a directory (a pipe, /dev/null or
    /dev/stdin is read) and an ``--output`` that cannot be written.

    Raises:
        ValueError: naming the option, its path and why.
    """
    if input_path is not None and (input_path.is_dir() or not input_path.exists()):
        what = "is a directory" if input_path.is_dir() else "no such file"
        raise ValueError(f"--input {input_path}: {what}")
    if output_path is not None:
        check_writable(output_path, "--output")


def _check_written(
    checkpoints: list[Path], input_path: Path | None, output_path: Path | None, plot: Path | None
) -> None:
    """Refuse, before anything is loaded, an ``--output`` or ``--plot`` that would overwrite
    a file that is read (or, for ``--plot``, the ``--output``), and a ``--plot`` that cannot
    be written: the filter writes as it goes, and a heatmap replaces its file.

    Raises:
        ValueError: naming the option, its path and why.
    """
    read_ckpts = tuple(("checkpoint", c) for c in checkpoints)
    for name, written, read in (
        ("--output", output_path, (("--input", input_path), *read_ckpts)),
        ("--plot", plot, (("--input", input_path), *read_ckpts, ("--output", output_path))),
    ):
        for option, path in read:
            if written is not None and path is not None and same_file(written, path):
                raise ValueError(
                    f"{name} {written}: is the same file as the {option}; it would be overwritten"
                )
    if plot is None:
        return
    # checked before any translating: a heatmap that cannot be written loses the work
    check_writable(plot, "--plot")
    from nmt.evaluation.plots import image_format  # matplotlib only when a plot is asked for

    try:
        image_format(plot)
    except ValueError as e:
        raise ValueError(f"--plot {e}") from None


def translate(
    checkpoints: list[Path],
    *,
    input_path: Path | None = None,
    output_path: Path | None = None,
    show_attention: bool = False,
    plot: Path | None = None,
    device: str = "auto",
    **search: Any,
) -> int:
    """``nmt translate``: check the paths, load ``checkpoints`` (several: one ensemble) on
    ``device`` once, with ``search`` (:meth:`Translator.from_paths`: beam_size, alpha,
    length_penalty, n_best, precision, batch_size, workers; None keeps the checkpoint's),
    then prompt (:func:`run_interactive`) when stdin is a terminal and neither
    ``input_path`` nor ``output_path`` is given, else filter (:func:`run_filter`; None is
    stdin, stdout).

    Returns:
        the exit status: 0; 130 after Ctrl-C at the prompt; 141 when the reader of stdout
        stopped (``| head``), stdout then pointed at /dev/null so the exit stays quiet.

    Raises:
        ValueError: an ``--input`` that is missing or a directory, an ``--output`` that
            cannot be written (:func:`_check_paths`), an ``--output`` or ``--plot`` that
            would overwrite a file read, or a ``--plot`` that cannot be written
            (:func:`_check_written`), all before the model is loaded; as :func:`run_filter`.
        nmt.model.checkpoint.CheckpointError, nmt.ops.device.DeviceError,
        nmt.ops.precision.PrecisionError: as :meth:`Translator.from_paths`.
    """
    # before the seconds of loading torch's kernels and the model
    _check_paths(input_path, output_path)
    _check_written(checkpoints, input_path, output_path, plot)
    translator = Translator.from_paths(checkpoints, device, **search)
    try:
        return _run(translator, input_path, output_path, show_attention, plot)
    finally:
        translator.close()  # search processes (--processes) end here, not at exit


def _run(
    translator: Translator,
    input_path: Path | None,
    output_path: Path | None,
    show_attention: bool,
    plot: Path | None,
) -> int:
    """The prompt or the filter of :func:`translate`; returns its exit status."""
    if input_path is None and output_path is None and sys.stdin.isatty():
        return run_interactive(translator, show_attention=show_attention, plot=plot)
    try:
        run_filter(
            translator,
            input_path=input_path,
            output_path=output_path,
            show_attention=show_attention,
            plot=plot,
        )
    except BrokenPipeError:
        # the reader stopped (e.g. `| head`): stop quietly, as other filters do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0
