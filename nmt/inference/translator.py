"""The Translator: one model (or an ensemble, :mod:`nmt.inference.ensemble`) with its
vocabularies, decoding settings and thread policy;
source strings in, one :class:`~nmt.inference.translate.Translation` per line out, in order.

``nmt translate``, ``nmt evaluate``, ``nmt heads``, ``nmt bench``, the study reports and
validation during training all translate through it, so sources are encoded one way
(:meth:`Translator.encode`) and cut at one limit (``MAX_SOURCE_PIECES``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.data.batches import Example, collate
from nmt.data.bucketing import make_batches
from nmt.data.vocab import EOS, UNK, Vocab
from nmt.inference.search import beam_search, greedy
from nmt.inference.search_choice import choose_search_precision
from nmt.inference.search_processes import SearchProcesses, check_processes, reuse_or_fork
from nmt.inference.threads import fixed_torch_threads
from nmt.inference.translate import MAX_SOURCE_PIECES, Decoding, Translation, search_precision


@dataclass
class EncodedSource:
    """One source line as the model reads it.

    Attributes:
        ids: piece ids, cut to ``MAX_SOURCE_PIECES`` (EOS not included); empty for a line
            with nothing to translate. pieces: their pieces.
        truncated: the line was longer and was cut. unknown: no piece is known (only
            ``<unk>`` and word boundaries, e.g. a line of emoji).
    """

    ids: list[int]
    pieces: list[str]
    truncated: bool
    unknown: bool


def _search(
    model: Any, src: torch.Tensor, src_len: torch.Tensor, decoding: Decoding
) -> list[list[Any]]:
    """n-best lists (best first) for every sentence of the batch, searched in
    ``decoding.precision`` (:func:`nmt.inference.translate.search_precision`, entered by
    each search worker itself: autocast is per thread)."""
    # fp32 rescoring (bf16/fp16 only) fixes scores and n-best order, which only an n-best
    # list shows; a one-best's text is the search's either way, and rescoring cost a bf16
    # search half its speed (issue 48: 752 -> 413 sentences/s, greedy, AVX-512 EPYC)
    rescore = decoding.n_best > 1
    with search_precision(decoding, src.device):
        if decoding.beam_size == 1:
            return [[h] for h in greedy(model, src, src_len, decoding.max_ratio, rescore=False)]
        return beam_search(
            model,
            src,
            src_len,
            beam_size=decoding.beam_size,
            alpha=decoding.alpha,
            length_penalty=decoding.length_penalty,
            max_ratio=decoding.max_ratio,
            n_best=decoding.n_best,
            rescore=rescore,
        )


def decode_workers(
    device: torch.device, batches: int, workers: int | None = None, threads: int | None = None
) -> int:
    """How many batches to decode at once: ``workers`` (default: one per CPU thread,
    ``threads`` or torch's current count), at most one per batch; always 1 on an
    accelerator.

    Raises:
        ValueError: ``workers`` < 1.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if device.type != "cpu":
        return 1
    return max(1, min(workers or threads or torch.get_num_threads(), batches))


def threads_per_worker(workers: int, threads: int | None = None) -> int:
    """CPU threads each of ``workers`` concurrent searches gets: an equal share of
    ``threads`` (default torch's current count), at least 1."""
    return max(1, (threads or torch.get_num_threads()) // workers)


class Translator:
    """A model ready to translate lines, with one thread policy.

    Args:
        model: a :class:`nmt.model.seq2seq.Seq2Seq`, or an
            :class:`nmt.inference.ensemble.Ensemble` of several (put in eval mode here).
        src_vocab, tgt_vocab: its vocabularies.
        decoding: the default search settings (:meth:`Decoding.from_config` of a
            checkpoint's config, or :class:`Decoding`'s defaults); each call may override.
        threads: torch CPU threads to decode with (default: torch's count when the
            Translator is built). Fixed, so that concurrent callers get the same results.
        workers: CPU batches searched at once, the threads divided among them (default:
            one per thread); each batch is searched alone, so the output does not depend
            on it. A search step's matrices are small, and each core runs its own batch's
            step faster than two cores run one step together (CTranslate2's
            ``inter_threads``; measured in results/speed/2026-11-30-c/).
        processes: ``workers`` processes of one thread each instead of threads
            (:mod:`nmt.inference.search_processes`; CPU; Linux, macOS); the same output.
            A script using it needs ``if __name__ == "__main__":`` (multiprocessing).
        batch_size: sentences per batch. max_src_pieces: longer sources are cut
            (``truncated``); None never cuts.
        warn: prints a one-line warning (default: to stderr); used when a beam wider than
            the target vocabulary is searched at the vocabulary's size instead
            (:meth:`Decoding.capped`), once per such decoding. Every command's beam passes
            here, so none can run a search of beam x vocabulary rows by mistake.

    Translating holds a lock shared by all Translators of the process: torch's thread
    count is process-wide, so calls from several threads run one after another.
    """

    def __init__(
        self,
        model: Any,
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        decoding: Decoding | None = None,
        *,
        threads: int | None = None,
        workers: int | None = None,
        batch_size: int = 64,
        max_src_pieces: int | None = MAX_SOURCE_PIECES,
        warn: Callable[[str], None] | None = None,
        processes: bool = False,
    ):
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.warn = warn or _to_stderr
        self._warned: set[str] = set()
        self.decoding = self.capped(decoding or Decoding())
        self.threads = threads or torch.get_num_threads()
        self.workers, self.batch_size, self.max_src_pieces = workers, batch_size, max_src_pieces
        self.device = next(model.parameters()).device
        if processes:
            check_processes(self.device)
        self.processes = processes
        self._forks: SearchProcesses | None = None  # started at the first search in processes
        self.loaded: Any = None  # the checkpoint(s) it came from (from_loaded); None: bare
        self.auto_note: str | None = None  # how search.precision=auto was measured, or None

    @classmethod
    def from_loaded(
        cls,
        loaded: Any,
        *,
        decoding: Decoding | None = None,
        beam_size: int | None = None,
        alpha: float | None = None,
        length_penalty: str | None = None,
        n_best: int | None = None,
        precision: str | None = None,
        precision_option: str = "--precision",
        **kwargs: Any,
    ) -> Translator:
        """The one place a command turns a loaded model into a Translator: ``loaded`` (a
        :class:`nmt.model.checkpoint.Loaded` or :class:`nmt.inference.ensemble.LoadedEnsemble`)
        with the search settings of its config (:meth:`Decoding.from_config`), the given
        ``beam_size`` .. ``precision`` taking precedence, ``auto`` precision resolved for the
        model's device (:meth:`Decoding.on`; on a CPU by measurement, :meth:`measured_auto`);
        or exactly ``decoding`` when given. ``kwargs``
        go to the constructor (``batch_size``, ``workers``, ``threads``, ``warn``, ...).
        The Translator keeps ``loaded`` (its config names the language pair).

        Raises:
            nmt.ops.precision.PrecisionError: a precision this device cannot use (the message
                names ``precision_option``).
            ValueError: ``n_best`` above the beam size.
        """
        measure_auto = False
        if decoding is None:
            device = next(loaded.model.parameters()).device
            requested = Decoding.from_config(
                loaded.cfg,
                beam_size=beam_size,
                alpha=alpha,
                length_penalty=length_penalty,
                n_best=n_best,
                precision=precision,
            )
            measure_auto = requested.precision == "auto" and device.type == "cpu"
            decoding = requested.on(device, precision_option)
            # checked before the constructor cuts a beam wider than the vocabulary
            if decoding.n_best > decoding.beam_size:
                raise ValueError(
                    f"--nbest {decoding.n_best} needs --beam of at least "
                    f"{decoding.n_best} (beam is {decoding.beam_size})"
                )
        translator = cls(loaded.model, loaded.src_vocab, loaded.tgt_vocab, decoding, **kwargs)
        translator.loaded = loaded
        if measure_auto:
            translator.decoding = translator.measured_auto(translator.decoding)
        return translator

    def measured_auto(self, decoding: Decoding) -> Decoding:
        """``decoding`` in the precision that ``search.precision=auto`` measures fastest for
        this model and beam on this CPU, at a search worker's share of the threads
        (:func:`nmt.inference.search_choice.choose_search_precision`; cached). A new
        measurement's one line goes to ``warn``. Raises nothing of its own."""
        self.model.eval()
        workers = self.workers or self.threads  # translate's default: one batch per thread
        with fixed_torch_threads(threads_per_worker(workers, self.threads)):
            cal = choose_search_precision(
                self.model,
                len(self.src_vocab),
                batch_size=self.batch_size,
                beam=decoding.beam_size,
                log=self.warn,
            )
        self.auto_note = cal.describe()
        return dataclasses.replace(decoding, precision=cal.choice)

    @classmethod
    def from_paths(
        cls, paths: Sequence[str | Path], device: torch.device | str = "auto", **kwargs: Any
    ) -> Translator:
        """Load ``paths`` (checkpoint files or model folders) on ``device`` (``auto``,
        ``cpu``, ``cuda:N``, checked as ``--device``) and build their Translator with
        :meth:`from_loaded` (``kwargs``: its search options and the constructor's): one
        path decodes alone, several as their :class:`nmt.inference.ensemble.Ensemble` (the
        mean probability at each step) with the first checkpoint's search settings.

        Raises:
            nmt.model.checkpoint.CheckpointError: no paths, a file that is not a usable
                checkpoint, or checkpoints with different vocabularies (names both files).
            nmt.ops.device.DeviceError: ``device`` is not available here.
            nmt.ops.precision.PrecisionError: as :meth:`from_loaded`.
        """
        from nmt.inference.ensemble import load_models
        from nmt.ops.device import pick_device

        dev = device if isinstance(device, torch.device) else pick_device(device, "--device")
        return cls.from_loaded(load_models(paths, dev), **kwargs)

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: torch.device | str = "cpu", **kwargs: Any
    ) -> Translator:
        """:meth:`from_paths` of one checkpoint (on the CPU unless ``device`` is given)."""
        return cls.from_paths([path], device, **kwargs)

    @classmethod
    def from_checkpoints(
        cls, paths: Sequence[str | Path], device: torch.device | str = "cpu", **kwargs: Any
    ) -> Translator:
        """:meth:`from_paths` (on the CPU unless ``device`` is given)."""
        return cls.from_paths(paths, device, **kwargs)

    def capped(self, decoding: Decoding) -> Decoding:
        """``decoding`` with its beam at most the target vocabulary's size
        (:meth:`Decoding.capped`); the warning goes to ``warn``, once per message."""
        decoding, warning = decoding.capped(len(self.tgt_vocab))
        if warning and warning not in self._warned:
            self._warned.add(warning)
            self.warn(warning)
        return decoding

    def encode(self, line: str) -> EncodedSource:
        """The source pieces of one line, cut to ``max_src_pieces``; lone surrogates (from
        undecodable bytes) are replaced first, since they cannot reach SentencePiece."""
        clean = line.encode("utf-8", errors="replace").decode("utf-8").strip()
        ids = self.src_vocab.encode(clean)
        cut = self.max_src_pieces is not None and len(ids) > self.max_src_pieces
        ids = ids[: self.max_src_pieces] if cut else ids
        pieces = self.src_vocab.id_to_pieces(ids)
        unknown = bool(ids) and all(x == UNK or p == "▁" for x, p in zip(ids, pieces, strict=True))
        return EncodedSource(ids, pieces, cut, unknown)

    def translate(
        self,
        lines: list[str],
        decoding: Decoding | None = None,
        *,
        workers: int | None = None,
        batch_size: int | None = None,
    ) -> list[Translation]:
        """One :class:`Translation` per line, in order (an empty line gives an empty one).

        Raises:
            ValueError: ``workers`` < 1.
            nmt.ops.precision.PrecisionError: ``decoding.precision`` unknown, or fp16 on a
                CPU.
            concurrent.futures.process.BrokenProcessPool: with ``processes``, a search
                process died (e.g. killed for memory); the next call starts new ones.
        """
        decoding = self.capped(decoding or self.decoding)
        # an unknown precision, or fp16 on a CPU, refused here: before any search starts
        decoding.on(self.device)
        self.model.eval()
        results: list[Translation] = []
        examples = []
        for i, line in enumerate(lines):
            enc = self.encode(line)
            if not enc.ids:
                results.append(Translation(line, "", [], [], None))
                continue
            examples.append(Example(enc.ids + [EOS], [], i))
            results.append(
                Translation(line, "", enc.pieces + ["</s>"], [], None, enc.truncated, enc.unknown)
            )
        chunks = make_batches(examples, batch_size or self.batch_size)
        batches = [collate(chunk) for chunk in chunks]
        n_workers = decode_workers(self.device, len(batches), workers or self.workers, self.threads)

        def search(batch: Any) -> tuple[Any, list[list[Any]]]:
            return batch, _search(self.model, batch.src.to(self.device), batch.src_len, decoding)

        with fixed_torch_threads(threads_per_worker(n_workers, self.threads)):
            if n_workers == 1:
                done = [search(b) for b in batches]
            else:
                # longest sources first, so that the workers run out of batches at one time
                batches.sort(key=lambda b: -b.src.size(1))
                done = self._in_parallel(search, batches, decoding, n_workers)
        for batch, hyps in done:
            for idx, nbest in zip(batch.index.tolist(), hyps, strict=True):
                self._fill(results[idx], nbest, decoding)
        return results

    def _in_parallel(self, search: Callable, batches: list, decoding: Decoding, n: int) -> list:
        """(batch, n-best lists) of each batch, searched by ``n`` threads running ``search``
        or, with ``processes``, by ``n`` search processes."""
        if self.processes:
            pairs = [(b.src, b.src_len) for b in batches]
            self._forks = reuse_or_fork(self._forks, self.model, _search, n)
            found = self._forks.search(pairs, decoding)
            return list(zip(batches, found, strict=True))
        pool = ThreadPoolExecutor(n, thread_name_prefix="nmt-search")
        try:
            return list(pool.map(search, batches))
        finally:
            # on Ctrl-C or an error the batches not yet started are dropped
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """Stop the search processes and wait (a Ctrl-C meanwhile kills them, re-raised)."""
        if self._forks is not None:
            self._forks.close(wait=True)

    def search_process_peaks_mib(self) -> list[float]:
        """The peak RSS (MiB) of each search process so far, largest first; [] without."""
        return sorted(self._forks.peak_mib.values(), reverse=True) if self._forks else []

    def _fill(self, r: Translation, nbest: list[Any], decoding: Decoding) -> None:
        hyp = nbest[0]
        r.score, r.complete = hyp.score, hyp.complete
        if decoding.n_best > 1:
            r.nbest = [(self.tgt_vocab.decode(h.tokens), h.score, h.complete) for h in nbest]
        r.text = self.tgt_vocab.decode(hyp.tokens)
        r.tgt_pieces = self.tgt_vocab.id_to_pieces(hyp.tokens)
        r.tgt_pieces.append("</s>")  # every hypothesis ends with EOS, a cut one too
        r.attention = hyp.attention


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def translate_lines(
    model: Any,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    lines: list[str],
    *,
    batch_size: int = 64,
    decoding: Decoding | None = None,
    max_src_pieces: int | None = MAX_SOURCE_PIECES,
    workers: int | None = None,
) -> list[Translation]:
    """``Translator(model, ...).translate(lines)`` for a one-off call (a model under
    training, a test); see :class:`Translator`.

    Raises:
        ValueError, nmt.ops.precision.PrecisionError: as :meth:`Translator.translate`.
    """
    return Translator(
        model,
        src_vocab,
        tgt_vocab,
        decoding,
        workers=workers,
        batch_size=batch_size,
        max_src_pieces=max_src_pieces,
    ).translate(lines)
