"""What translating produces and how it searches: :class:`Translation` (one line's
hypothesis, pieces and attention weights), :class:`Decoding` (the search settings, built
from the config's ``search`` section), the warnings every command prints about cut,
invalid or unknown input (:class:`LineNotes` collects their lines), and the filter's output
lines (:func:`filter_lines`). :class:`nmt.inference.translator.Translator` does the work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from nmt.config.schema import LengthPenalty, SearchConfig, SearchPrecision, TrainConfig
from nmt.ops.int8 import ENGINES, int8_engine
from nmt.ops.precision import autocast, precision_name, search_dtype

# sources longer than this many pieces are cut (and every command warns which lines)
MAX_SOURCE_PIECES = 400
_SEARCH, _TRAIN = SearchConfig(), TrainConfig()


@dataclass
class Translation:
    """One translated line.

    Attributes:
        source: the input line. text: detokenized hypothesis.
        src_pieces: source pieces (with the final EOS shown as ``</s>``).
        tgt_pieces: hypothesis pieces (EOS row included when produced).
        attention: (len(tgt_pieces), len(src_pieces)) weights, or None (fixed-vector model
            or empty input).
        truncated: the source was longer than the limit and was cut.
        unknown: no source piece is known to the model (only ``<unk>`` and word
            boundaries, e.g. a line of emoji): the translation is a guess.
        complete: the hypothesis ended with ``</s>``; False when the search reached the
            length limit first (``train.max_output_ratio``) and the output is cut.
        nbest: with ``n_best`` > 1, (text, score, complete) per hypothesis: complete ones
            first, best score first (:func:`nmt.inference.hypothesis.rank`).
    """

    source: str
    text: str
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: torch.Tensor | None
    truncated: bool = False
    unknown: bool = False
    # the search's ranking score (nats, length-normalised in beam); recomputed in fp32 after a
    # bf16/fp16 search only with n_best > 1 (nmt.inference.translator._search)
    score: float | None = None
    nbest: list[tuple[str, float, bool]] | None = None
    complete: bool = True

    def hypotheses(self) -> list[tuple[str, float, bool]]:
        """(text, score, complete) of every hypothesis kept: :attr:`nbest`, or without it
        the one hypothesis (score 0.0 when the search gave none)."""
        return self.nbest or [(self.text, self.score or 0.0, self.complete)]


@dataclass(frozen=True)
class Decoding:
    """How to search: ``beam_size`` 1 is greedy search; see
    :func:`nmt.inference.search.beam_search`. The defaults are the config's
    (:class:`nmt.config.schema.SearchConfig`; ``max_ratio`` is ``train.max_output_ratio``),
    so a library caller searches as ``nmt translate`` does; :meth:`from_config` takes a
    checkpoint's own settings."""

    beam_size: int = _SEARCH.beam_size
    length_penalty: LengthPenalty = _SEARCH.length_penalty
    alpha: float = _SEARCH.alpha
    max_ratio: float = _TRAIN.max_output_ratio
    n_best: int = 1  # hypotheses kept per sentence (<= beam_size)
    # matrix products of the search steps: fp32, bf16, fp16 (CUDA), int8 (CPU) or auto
    # (bf16 where the device computes it natively); see nmt.model.seq2seq.Seq2Seq.step
    precision: SearchPrecision = _SEARCH.precision

    @classmethod
    def from_config(cls, cfg: Any, **given: Any) -> Decoding:
        """A config's search settings (``cfg.search``, ``cfg.train.max_output_ratio``),
        with the ``given`` values that are not None taking precedence (command-line
        options: beam_size, length_penalty, alpha, n_best, precision, max_ratio).

        Raises:
            TypeError: a ``given`` name that is not a field.
        """
        s = cfg.search
        values = {
            "beam_size": s.beam_size,
            "length_penalty": s.length_penalty,
            "alpha": s.alpha,
            "max_ratio": cfg.train.max_output_ratio,
            "precision": s.precision,
        }
        values.update({k: v for k, v in given.items() if v is not None})
        return cls(**values)

    def describe(self) -> str:
        """One line for reports, e.g. ``beam search, beam 5, GNMT length penalty alpha=0.6,
        fp32 matrix products`` (:meth:`on` resolves ``auto`` first); int8 through oneDNN
        (``NMT_INT8_ENGINE``) says ``int8 matrix products (onednn)``. Raises ValueError for
        an unknown ``NMT_INT8_ENGINE`` with int8."""
        prec = f", {self.precision} matrix products"
        engine = int8_engine() if self.precision == "int8" else ENGINES[0]
        if engine != ENGINES[0]:
            prec += f" ({engine})"
        if self.beam_size == 1:
            return f"greedy search{prec}"
        lp = (
            "no length penalty"
            if self.length_penalty == "none"
            else (
                f"GNMT length penalty alpha={self.alpha}"
                if self.length_penalty == "gnmt"
                else "length-normalised scores"
            )
        )
        return f"beam search, beam {self.beam_size}, {lp}{prec}"

    def capped(self, vocab_size: int) -> tuple[Decoding, str | None]:
        """This decoding with ``beam_size`` and ``n_best`` at most ``vocab_size``, the
        target vocabulary, and the one-line warning to print when that changed them (else
        None). A wider beam finds nothing more at the first step, where only
        ``vocab_size`` extensions exist, and costs a search step over beam x vocabulary
        rows (``--beam 100000`` on 64 pieces ran for minutes).

        Raises:
            ValueError: ``vocab_size`` < 1.
        """
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        if self.beam_size <= vocab_size and self.n_best <= vocab_size:
            return self, None
        also = f" and n_best {self.n_best} to {vocab_size}" if self.n_best > vocab_size else ""
        return (
            dataclasses.replace(
                self, beam_size=min(self.beam_size, vocab_size), n_best=min(self.n_best, vocab_size)
            ),
            f"warning: beam {self.beam_size} is more than the {vocab_size} pieces of the "
            f"target vocabulary; searching with beam {min(self.beam_size, vocab_size)}"
            f"{also}",
        )

    def on(self, device: torch.device, option: str = "search.precision") -> Decoding:
        """This decoding with ``auto`` precision resolved for ``device`` (fp32 or bf16), so
        that reports name what ran.

        Raises:
            nmt.ops.precision.PrecisionError: unknown precision, or fp16 on a CPU; the message
                names ``option``.
        """
        name = precision_name(search_dtype(self.precision, device, option))
        return dataclasses.replace(self, precision=name)


@contextmanager
def search_precision(decoding: Decoding, device: torch.device) -> Iterator[None]:
    """The block runs in the search precision of ``decoding`` on ``device``: autocast in
    the dtype :func:`nmt.ops.precision.search_dtype` gives (``auto`` is fp32 on a CPU), or
    plain fp32. The one place a search enters its mixed precision: the Translator's
    searches and ``nmt serve``'s batches both come through here. Autocast is per thread,
    so each thread that searches enters it itself.

    Raises:
        nmt.ops.precision.PrecisionError: unknown precision, or fp16 on a CPU (before the
            block runs).
    """
    with autocast(device, search_dtype(decoding.precision, device)):
        yield


def strongest_alignment(tr: Translation) -> list[tuple[str, str, float]]:
    """For each target piece, the source piece with the largest attention weight."""
    if tr.attention is None:
        return []
    out = []
    for t, piece in enumerate(tr.tgt_pieces[: tr.attention.size(0)]):
        w, s = tr.attention[t].max(dim=0)
        out.append((piece, tr.src_pieces[int(s)], float(w)))
    return out


def one_line(text: str) -> str:
    """``text`` with every run of whitespace, line breaks included, as one space."""
    # a translation must never add lines: keep the one-line-in, one-line-out contract
    return " ".join(text.split())


def filter_lines(index: int, tr: Translation, n_best: int) -> list[str]:
    """The lines (each ending in a newline) that ``nmt translate``'s filter writes for the
    input line ``index`` (from 0): the hypothesis, or with ``n_best`` > 1 every hypothesis
    of :meth:`Translation.hypotheses` as ``index ||| hypothesis ||| score``."""
    if n_best > 1:  # Moses n-best format: index ||| hypothesis ||| score
        return [f"{index} ||| {one_line(text)} ||| {sc:.4f}\n" for text, sc, _ in tr.hypotheses()]
    return [one_line(tr.text) + "\n"]


@dataclass
class LineNotes:
    """The input lines (numbers from 1) that a line filter warns about once it is done;
    :func:`nmt.data.line_chunks.read_chunks` fills :attr:`invalid`, :meth:`note` the rest.
    """

    invalid: list[int] = field(default_factory=list)  # with invalid UTF-8
    cut: list[int] = field(default_factory=list)  # source cut to MAX_SOURCE_PIECES
    unknown: list[int] = field(default_factory=list)  # the model knows no piece of them
    unfinished: list[int] = field(default_factory=list)  # a hypothesis cut at the limit

    def note(self, line: int, tr: Translation) -> None:
        """Record ``tr``, the translation of input line ``line`` (from 1), in the lists it
        belongs to."""
        if tr.truncated:
            self.cut.append(line)
        if tr.unknown:
            self.unknown.append(line)
        if tr.text and not all(done for _t, _s, done in tr.hypotheses()):
            self.unfinished.append(line)

    def warnings(self, where: str, nbest: bool) -> list[str]:
        """The warnings to print, in this order: invalid UTF-8, cut, unknown, unfinished
        (``nbest``: as :func:`unfinished_lines_warning`); ``where`` names the input."""
        found = (
            invalid_lines_warning(self.invalid, where),
            cut_lines_warning(self.cut, where),
            unknown_lines_warning(self.unknown, where),
            unfinished_lines_warning(self.unfinished, where, nbest),
        )
        return [w for w in found if w]


def truncation_warning(
    translations: list[Translation], where: str, max_src_pieces: int = MAX_SOURCE_PIECES
) -> str | None:
    """The warning every command prints when sources were cut to ``max_src_pieces``
    pieces: ``where`` (a file or test set) and the cut lines, counting from 1 (the first
    10, then "..."); None when nothing was cut. Nothing is ever cut silently."""
    return cut_lines_warning(
        [i + 1 for i, t in enumerate(translations) if t.truncated], where, max_src_pieces
    )


def unfinished_warning(translations: list[Translation], where: str) -> str | None:
    """The warning for lines whose translation reached the length limit before ``</s>``
    (:attr:`Translation.complete` false: the output is cut); None when there are none."""
    return unfinished_lines_warning(
        [i + 1 for i, t in enumerate(translations) if t.text and not t.complete], where
    )


def unfinished_lines_warning(lines: list[int], where: str, nbest: bool = False) -> str | None:
    """:func:`unfinished_warning` from the numbers (from 1) of the lines; ``nbest``: the
    lines whose n-best list holds such a hypothesis (listed after the complete ones)."""
    what = (
        "with hypotheses that reached the length limit without an end of sentence, "
        "listed after the complete ones"
        if nbest
        else "translated up to the length limit without an end of sentence: the output is cut"
    )
    return _lines_warning(lines, where, f"{what} (train.max_output_ratio)")


def cut_lines_warning(
    cut: list[int], where: str, max_src_pieces: int = MAX_SOURCE_PIECES
) -> str | None:
    """:func:`truncation_warning` from the numbers (from 1) of the cut lines."""
    return _lines_warning(cut, where, f"cut to the first {max_src_pieces} pieces")


def invalid_lines_warning(invalid: list[int], where: str) -> str | None:
    """The warning for input lines (numbers from 1) that were not valid UTF-8; None when
    there are none."""
    return _lines_warning(invalid, where, "not valid UTF-8: invalid bytes replaced by U+FFFD")


def unknown_lines_warning(unknown: list[int], where: str) -> str | None:
    """The warning for input lines (numbers from 1) of which the model knows no piece
    (:attr:`Translation.unknown`); None when there are none."""
    return _lines_warning(
        unknown,
        where,
        "made only of pieces the model does not know (<unk>): translated, but as guesses",
    )


def _lines_warning(lines: list[int], where: str, what: str) -> str | None:
    if not lines:
        return None
    shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
    word = "line" if len(lines) == 1 else "lines"
    return f"warning: {where}: {len(lines)} input {word} {what} ({word} {shown}, counting from 1)"
