"""Translating lines: encode source strings, search, detokenize; order kept.

Strings in, strings out: one output per input line (an empty line gives an empty
translation).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
import dataclasses
from dataclasses import dataclass

import torch

from nmt.data.batches import Example, collate, make_batches
from nmt.ops.precision import autocast, autocast_dtype, precision_name
from nmt.inference.search import beam_search, greedy
from nmt.data.vocab import EOS, UNK, Vocab


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
    """

    source: str
    text: str
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: torch.Tensor | None
    truncated: bool = False
    unknown: bool = False
    score: float | None = None  # the search's ranking score (nats, length-normalised in beam)
    nbest: list[tuple[str, float]] | None = None  # (text, score), best first, with n_best > 1


@dataclass(frozen=True)
class Decoding:
    """How to search: ``beam_size`` 1 is greedy search; see :func:`nmt.inference.search.beam_search`."""

    beam_size: int = 1
    length_penalty: str = "gnmt"
    alpha: float = 0.6
    max_ratio: float = 2.0
    n_best: int = 1  # hypotheses kept per sentence (<= beam_size)
    # matrix products of the search steps: fp32, bf16, fp16 (CUDA) or auto (bf16 where the
    # device computes it natively); see nmt.model.seq2seq.Seq2Seq.step. fp32 here, for callers of
    # the library; the commands take search.precision, whose default is auto
    precision: str = "fp32"

    def describe(self) -> str:
        """One line for reports, e.g. ``beam search, beam 5, GNMT length penalty alpha=0.6,
        fp32 matrix products`` (:meth:`on` resolves ``auto`` first)."""
        prec = f", {self.precision} matrix products"
        if self.beam_size == 1:
            return f"greedy search{prec}"
        lp = "no length penalty" if self.length_penalty == "none" else (
            f"GNMT length penalty alpha={self.alpha}" if self.length_penalty == "gnmt"
            else "length-normalised scores")
        return f"beam search, beam {self.beam_size}, {lp}{prec}"

    def on(self, device: torch.device, option: str = "search.precision") -> "Decoding":
        """This decoding with ``auto`` precision resolved for ``device`` (fp32 or bf16), so
        that reports name what ran.

        Raises:
            nmt.ops.precision.PrecisionError: unknown precision, or fp16 on a CPU; the message
                names ``option``.
        """
        name = precision_name(autocast_dtype(self.precision, device, option))
        return dataclasses.replace(self, precision=name)


def _search(model, src: torch.Tensor, src_len: torch.Tensor, decoding: Decoding,
            amp_dtype: torch.dtype | None = None):
    """n-best lists (best first) for every sentence of the batch; ``amp_dtype``: the
    autocast dtype of the search steps (None: fp32). Autocast is per thread, so each
    search worker enters it itself."""
    with autocast(src.device, amp_dtype):
        if decoding.beam_size == 1:
            return [[h] for h in greedy(model, src, src_len, decoding.max_ratio)]
        return beam_search(model, src, src_len, beam_size=decoding.beam_size,
                           alpha=decoding.alpha, length_penalty=decoding.length_penalty,
                           max_ratio=decoding.max_ratio, n_best=decoding.n_best)


def decode_workers(device: torch.device, batches: int, workers: int | None = None) -> int:
    """How many batches to decode at once: ``workers`` (default: one per torch CPU thread),
    at most one per batch; always 1 on an accelerator.

    Raises:
        ValueError: ``workers`` < 1.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if device.type != "cpu":
        return 1
    return max(1, min(workers or torch.get_num_threads(), batches))


def threads_per_worker(workers: int) -> int:
    """torch CPU threads each of ``workers`` concurrent searches gets: an equal share of
    torch's current threads, at least 1."""
    return max(1, torch.get_num_threads() // workers)


@contextmanager
def _threads(n: int) -> Iterator[None]:
    """torch's intra-op CPU threads set to ``n`` inside the block, restored after it."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def translate_lines(model, src_vocab: Vocab, tgt_vocab: Vocab, lines: list[str],
                    batch_size: int = 64, decoding: Decoding = Decoding(),
                    max_src_pieces: int | None = 400, workers: int | None = None
                    ) -> list[Translation]:
    """Translate ``lines``; returns one :class:`Translation` per line, in order.

    Sources longer than ``max_src_pieces`` pieces are cut to that length (``truncated``).

    On the CPU, ``workers`` batches (:func:`decode_workers`; default one per torch thread)
    are searched at once in threads that share the model, the CPU threads divided among
    them (CTranslate2's ``inter_threads``). A search step's matrices are small, and each
    core runs its own batch's step faster than two cores run one step together: on a
    2-core AVX2 EPYC (2026-11-30, reference model, 1,000 test_2016_flickr sentences,
    batches of 64) two batches of one thread each translated 272 sentences/s greedy
    against 204 for one batch of two threads, and beam 5 74 against 63
    (results/speed/2026-11-30-c/). Every batch is searched alone as before, so the output
    does not change.

    Raises:
        ValueError: ``workers`` < 1.
        nmt.ops.precision.PrecisionError: ``decoding.precision`` unknown, or fp16 on a CPU.
    """
    device = next(model.parameters()).device
    amp_dtype = autocast_dtype(decoding.precision, device, "search.precision")
    model.eval()
    results: list[Translation | None] = [None] * len(lines)
    examples = []
    for i, line in enumerate(lines):
        # lone surrogates (from undecodable bytes) cannot reach SentencePiece
        clean = line.encode("utf-8", errors="replace").decode("utf-8").strip()
        ids = src_vocab.encode(clean)
        if not ids:
            results[i] = Translation(line, "", [], [], None)
            continue
        cut = max_src_pieces is not None and len(ids) > max_src_pieces
        ids = ids[:max_src_pieces] if cut else ids
        examples.append(Example(ids + [EOS], [], i))
        pieces = [src_vocab.id_to_piece(x) for x in ids]
        unknown = all(x == UNK or p == "▁" for x, p in zip(ids, pieces))
        results[i] = Translation(line, "", pieces + ["</s>"], [], None, cut, unknown)
    batches = [collate(chunk) for chunk in make_batches(examples, batch_size)]
    n_workers = decode_workers(device, len(batches), workers)

    def search(batch):
        return batch, _search(model, batch.src.to(device), batch.src_len, decoding, amp_dtype)

    if n_workers == 1:
        done = map(search, batches)
    else:
        # longest sources first, so that the workers run out of batches at about one time
        batches.sort(key=lambda b: -b.src.size(1))
        with _threads(threads_per_worker(n_workers)):
            pool = ThreadPoolExecutor(n_workers, thread_name_prefix="nmt-search")
            try:
                done = list(pool.map(search, batches))
            finally:
                # on Ctrl-C or an error the batches not yet started are dropped, not searched
                pool.shutdown(wait=True, cancel_futures=True)
    for batch, hyps in done:
        for idx, nbest in zip(batch.index.tolist(), hyps):
            hyp = nbest[0]
            r = results[idx]
            r.score = hyp.score
            if decoding.n_best > 1:
                r.nbest = [(tgt_vocab.decode(h.tokens), h.score) for h in nbest]
            r.text = tgt_vocab.decode(hyp.tokens)
            r.tgt_pieces = [tgt_vocab.id_to_piece(x) for x in hyp.tokens]
            if hyp.attention is not None and hyp.attention.size(0) > len(hyp.tokens):
                r.tgt_pieces.append("</s>")
            r.attention = hyp.attention
    return results  # type: ignore[return-value]


def decoding_from_config(cfg, beam_size: int | None = None, alpha: float | None = None,
                         length_penalty: str | None = None, n_best: int = 1,
                         precision: str | None = None) -> Decoding:
    """The checkpoint config's search settings, with command-line values taking precedence."""
    s = cfg.search
    return Decoding(beam_size=s.beam_size if beam_size is None else beam_size,
                    length_penalty=s.length_penalty if length_penalty is None else length_penalty,
                    alpha=s.alpha if alpha is None else alpha,
                    max_ratio=cfg.train.max_output_ratio, n_best=n_best,
                    precision=s.precision if precision is None else precision)


def strongest_alignment(tr: Translation) -> list[tuple[str, str, float]]:
    """For each target piece, the source piece with the largest attention weight."""
    if tr.attention is None:
        return []
    out = []
    for t, piece in enumerate(tr.tgt_pieces[: tr.attention.size(0)]):
        w, s = tr.attention[t].max(dim=0)
        out.append((piece, tr.src_pieces[int(s)], float(w)))
    return out


def truncation_warning(translations: list[Translation], where: str,
                       max_src_pieces: int = 400) -> str | None:
    """The warning every command prints when sources were cut to ``max_src_pieces``
    pieces: ``where`` (a file or test set) and the cut lines, counting from 1 (the first
    10, then "..."); None when nothing was cut. Nothing is ever cut silently."""
    return cut_lines_warning([i + 1 for i, t in enumerate(translations) if t.truncated],
                             where, max_src_pieces)


def cut_lines_warning(cut: list[int], where: str, max_src_pieces: int = 400) -> str | None:
    """:func:`truncation_warning` from the numbers (from 1) of the cut lines."""
    return _lines_warning(cut, where, f"cut to the first {max_src_pieces} pieces")


def invalid_lines_warning(invalid: list[int], where: str) -> str | None:
    """The warning for input lines (numbers from 1) that were not valid UTF-8; None when
    there are none."""
    return _lines_warning(invalid, where, "not valid UTF-8: invalid bytes replaced by U+FFFD")


def unknown_lines_warning(unknown: list[int], where: str) -> str | None:
    """The warning for input lines (numbers from 1) of which the model knows no piece
    (:attr:`Translation.unknown`); None when there are none."""
    return _lines_warning(unknown, where, "made only of pieces the model does not know "
                          "(<unk>): translated, but as guesses")


def _lines_warning(lines: list[int], where: str, what: str) -> str | None:
    if not lines:
        return None
    shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
    word = "line" if len(lines) == 1 else "lines"
    return f"warning: {where}: {len(lines)} input {word} {what} ({word} {shown}, counting from 1)"
