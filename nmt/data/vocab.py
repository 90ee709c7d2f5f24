"""Subword vocabularies: SentencePiece models trained on the training split only.

They are carried in checkpoints as serialized model bytes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable

import sentencepiece as spm

PAD, UNK, BOS, EOS = 0, 1, 2, 3


class Vocab:
    """A SentencePiece model with fixed special ids (PAD 0, UNK 1, BOS 2, EOS 3).

    Args:
        model_bytes: a serialized SentencePiece ``ModelProto``.
    """

    def __init__(self, model_bytes: bytes):
        self.model_bytes = bytes(model_bytes)
        self.sp = spm.SentencePieceProcessor(model_proto=self.model_bytes)
        self._pieces: dict[int, str] | None = None  # id -> piece, built by id_to_pieces

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Piece ids of ``text`` (no BOS/EOS)."""
        return self.sp.encode(text, out_type=int)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Piece ids of each text, as :meth:`encode` gives them (one call into
        SentencePiece for the whole list, which is faster for many sentences)."""
        return self.sp.encode(texts, out_type=int)

    def sample_batch(
        self, texts: list[str], *, alpha: float, nbest_size: int, seed: int
    ) -> list[list[int]]:
        """A sampled segmentation of each text, as piece ids (no BOS/EOS): subword
        regularisation (Kudo 2018: unigram, from the ``nbest_size`` best or, with
        -1, from the whole lattice, P(x)^alpha smoothed), or for a BPE model BPE-dropout
        with probability ``alpha`` (Provilkov et al. 2020). Equal ``seed`` (0..2^32-2) and
        texts give equal samples, whatever was sampled before.

        Raises:
            ValueError: SentencePiece refuses ``alpha`` or ``nbest_size`` (the config checks
                of nmt/config/noise.py come first).
        """
        # SentencePiece draws from a generator of its own, not torch's or Python's. Each
        # list call runs on fresh worker threads seeded from the global seed, so setting it
        # right before a single-threaded call makes the call a function of ``seed``; the
        # global seed stays set (SentencePiece cannot restore its default of random_device):
        # a SentencePiece model trained later in the process samples its input with it
        spm.set_random_generator_seed(seed)
        return self.sp.encode(
            texts,
            out_type=int,
            enable_sampling=True,
            alpha=alpha,
            nbest_size=nbest_size,
            num_threads=1,
        )

    def pieces(self, text: str) -> list[str]:
        """Pieces of ``text`` as strings (for showing alignments)."""
        return self.sp.encode(text, out_type=str)

    def decode(self, ids: Iterable[int]) -> str:
        """Detokenized text of ``ids``; PAD, BOS and EOS are dropped, while an unknown
        piece (UNK) is shown as SentencePiece renders it, `` ⁇ ``, so that a hypothesis
        never silently loses a word (and BLEU counts it as the miss it is)."""
        return self.sp.decode([i for i in ids if i == UNK or i > EOS])

    def id_to_piece(self, i: int) -> str:
        """The piece string of id ``i`` (for alignments and heatmaps).

        Raises:
            IndexError: ``i`` outside 0..len-1.
        """
        return self.id_to_pieces([i])[0]

    def id_to_pieces(self, ids: Iterable[int]) -> list[str]:
        """The piece strings of ``ids``, from a table of every piece built on first use:
        a SentencePiece call per piece took 3-4 us, about a tenth of the CPU time of a
        greedy int8 translation of 1,000 sentences.

        Raises:
            IndexError: an id outside 0..len-1 (named).
        """
        if self._pieces is None:
            self._pieces = {i: self.sp.id_to_piece(i) for i in range(len(self))}
        table = self._pieces
        try:
            return [table[int(i)] for i in ids]
        except KeyError as e:
            raise IndexError(f"piece id {e.args[0]} is outside 0..{len(table) - 1}") from None


def train_vocab(
    sentences: Iterable[str],
    vocab_size: int,
    *,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    seed_sentencepiece_size: int = 200_000,
    input_sentence_size: int = 2_000_000,
) -> Vocab:
    """Train a SentencePiece model in memory.

    ``vocab_size`` is an upper bound: on a tiny corpus the model is smaller rather than
    failing (``hard_vocab_limit=False``). Of more than ``input_sentence_size`` sentences
    SentencePiece trains on a random sample of that many; fewer are all used, in order.

    Raises:
        ValueError: no non-empty sentence to train on, or SentencePiece refuses the settings
            (one line naming ``subwords.vocab_size`` with the value and the minimum the
            corpus needs, or the setting SentencePiece names).
    """
    data = [s for s in sentences if s.strip()]
    if not data:
        raise ValueError("cannot train SentencePiece: no non-empty training sentence")
    buf = io.BytesIO()
    try:
        _train_spm(
            data,
            buf,
            vocab_size,
            model_type,
            character_coverage,
            seed_sentencepiece_size,
            input_sentence_size,
        )
    except (RuntimeError, ValueError, OSError) as e:  # SentencePiece's own errors
        msg = str(e).strip()
        low = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", msg)
        if low:
            raise ValueError(
                f"subwords.vocab_size: {vocab_size} is too small for this corpus: its "
                f"characters alone need {low.group(2)} pieces (at character_coverage "
                f"{character_coverage}); set subwords.vocab_size to at least {low.group(2)}, "
                "or lower subwords.character_coverage"
            ) from None
        first = msg.splitlines()[-1] if msg else type(e).__name__
        raise ValueError(
            f"subwords: SentencePiece refused vocab_size={vocab_size}, "
            f"model_type={model_type}, character_coverage={character_coverage}: "
            f"{first}"
        ) from None
    return Vocab(buf.getvalue())


def _train_spm(
    data: list[str],
    buf: io.BytesIO,
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    seed_sentencepiece_size: int,
    input_sentence_size: int,
) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(data),
        model_writer=buf,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        hard_vocab_limit=False,
        seed_sentencepiece_size=seed_sentencepiece_size,
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=True,
        num_threads=1,
        minloglevel=2,
    )
