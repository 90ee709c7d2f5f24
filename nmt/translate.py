"""Strings in, strings out: encode source lines, search, detokenize; order kept, one
output per input line (an empty line gives an empty translation)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.data import Example, collate, make_batches
from nmt.search import greedy
from nmt.vocab import EOS, Vocab


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
    """

    source: str
    text: str
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: torch.Tensor | None
    truncated: bool = False


def translate_lines(model, src_vocab: Vocab, tgt_vocab: Vocab, lines: list[str],
                    batch_size: int = 64, max_ratio: float = 2.0,
                    max_src_pieces: int | None = 400) -> list[Translation]:
    """Translate ``lines`` with greedy search; returns one :class:`Translation` per line.

    Sources longer than ``max_src_pieces`` pieces are cut to that length (``truncated``).
    """
    device = next(model.parameters()).device
    model.eval()
    results: list[Translation | None] = [None] * len(lines)
    examples = []
    for i, line in enumerate(lines):
        ids = src_vocab.encode(line.strip())
        if not ids:
            results[i] = Translation(line, "", [], [], None)
            continue
        cut = max_src_pieces is not None and len(ids) > max_src_pieces
        ids = ids[:max_src_pieces] if cut else ids
        examples.append(Example(ids + [EOS], [], i))
        results[i] = Translation(line, "", [src_vocab.id_to_piece(x) for x in ids] + ["</s>"],
                                 [], None, cut)
    for chunk in make_batches(examples, batch_size):
        batch = collate(chunk)
        hyps = greedy(model, batch.src.to(device), batch.src_len, max_ratio)
        for idx, hyp in zip(batch.index.tolist(), hyps):
            r = results[idx]
            r.text = tgt_vocab.decode(hyp.tokens)
            r.tgt_pieces = [tgt_vocab.id_to_piece(x) for x in hyp.tokens]
            if hyp.attention is not None and hyp.attention.size(0) > len(hyp.tokens):
                r.tgt_pieces.append("</s>")
            r.attention = hyp.attention
    return results  # type: ignore[return-value]


def strongest_alignment(tr: Translation) -> list[tuple[str, str, float]]:
    """For each target piece, the source piece with the largest attention weight."""
    if tr.attention is None:
        return []
    out = []
    for t, piece in enumerate(tr.tgt_pieces[: tr.attention.size(0)]):
        w, s = tr.attention[t].max(dim=0)
        out.append((piece, tr.src_pieces[int(s)], float(w)))
    return out
