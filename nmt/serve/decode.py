"""One model's answer to ``POST /api/translate``: the lines checked against its
vocabularies (:func:`prepare`), searched in one batch, every hypothesis read back by a
forced pass (:func:`nmt.serve.forced.forced_pass`), and scored against the references.

A request's lines are searched together and apart from every other request, under the
process-wide decoding lock on a fixed thread count, so that concurrent requests cannot
change each other's results.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from sacrebleu.metrics import BLEU, CHRF

from nmt.data.batches import Example, collate
from nmt.data.vocab import EOS
from nmt.inference.search import normalised_score
from nmt.inference.translate import Decoding
from nmt.inference.translator import EncodedSource, fixed_torch_threads
from nmt.ops.precision import autocast, autocast_dtype
from nmt.serve.forced import Forced, forced_pass, search_after_prefix
from nmt.serve.limits import (
    MAX_ANSWER_NUMBERS,
    MAX_BEAM,
    MAX_PIECES,
    MAX_SEARCH_WORK,
    ApiError,
    bad_option,
    limit_exceeded,
)
from nmt.serve.registry import ModelEntry
from nmt.serve.schemas import TranslateRequest


@dataclass
class Prepared:
    """A request checked against one model: its encoded sources, its prefix ids and the
    decoding to run."""

    entry: ModelEntry
    lines: list[str]
    sources: list[EncodedSource]
    prefix: list[int]
    decoding: Decoding


def decoding_for(entry: ModelEntry, req: TranslateRequest) -> Decoding:
    """The checkpoint's decoding with the request's beam, n_best, alpha and length penalty
    (a checkpoint beam over ``MAX_BEAM`` or over the target vocabulary is served at the
    smaller of the two; :meth:`nmt.inference.translate.Decoding.capped`).

    Raises:
        ApiError: 400 when n_best exceeds the beam, or a requested beam exceeds the
            model's target vocabulary.
    """
    pieces = len(entry.loaded.tgt_vocab)
    if req.beam and req.beam > pieces:
        raise bad_option(f"beam {req.beam} is more than the {pieces} target pieces of model "
                         f"{entry.id!r}", "beam")
    # the checkpoint's default is served, not refused: capped, as every command caps it
    d, _ = dataclasses.replace(entry.decoding,
                               beam_size=min(entry.decoding.beam_size, MAX_BEAM)).capped(pieces)
    beam = req.beam or d.beam_size
    if req.n_best > beam:
        whose = "" if req.beam else f", the default of model {entry.id!r}"
        raise bad_option(f"n_best {req.n_best} is more than the beam ({beam}{whose})",
                         "n_best")
    return dataclasses.replace(
        d, beam_size=beam, n_best=req.n_best,
        alpha=d.alpha if req.alpha is None else req.alpha,
        length_penalty=d.length_penalty if req.length_penalty is None else req.length_penalty)


def prepare(entry: ModelEntry, req: TranslateRequest) -> Prepared:
    """Encode the request's lines and prefix with the model's vocabularies.

    Raises:
        ApiError: 413 when a line has more than ``MAX_PIECES`` source pieces (unless
            ``truncate``) or the prefix more than ``MAX_PIECES`` target pieces; 422 for a
            line of which the model's normalisation leaves no piece (only control or
            zero-width characters: the schema already refuses empty lines); 400 for a bad
            option (:func:`decoding_for`).
    """
    decoding = decoding_for(entry, req)
    sources = []
    for i, line in enumerate(req.lines):
        enc = entry.translator.encode(line)
        if not enc.ids:
            raise ApiError(422, "invalid_request", f"line {i} of lines has no source piece "
                           f"for model {entry.id!r} (nothing but characters its "
                           "normalisation drops)", field="lines", line=i, model=entry.id)
        if enc.truncated and not req.truncate:
            clean = line.encode("utf-8", errors="replace").decode("utf-8").strip()
            n = len(entry.loaded.src_vocab.encode(clean))
            raise limit_exceeded("max_pieces", n, i, model=entry.id)
        sources.append(enc)
    prefix = entry.loaded.tgt_vocab.encode(req.prefix.strip()) if req.prefix else []
    if len(prefix) > MAX_PIECES:
        raise limit_exceeded("max_pieces", len(prefix), 0, field="prefix", model=entry.id)
    return Prepared(entry, list(req.lines), sources, prefix, decoding)


def check_budgets(prepared: list[Prepared], top_k: int) -> None:
    """Refuse a request whose search or answer would be too large, before searching.

    The search work is beam x source pieces (``</s>`` included), summed over lines and
    models. The answer is bounded at its worst: every one of ``n_best`` hypotheses as
    long as the length limit allows (``T_max = max_ratio x S + 10`` pieces after the
    prefix), each step with S attention weights (and S per head of a multihead model;
    none for the fixed-vector model), ``top_k`` alternatives, its log-probability and its
    alignment.

    Raises:
        ApiError: 413 ``max_search_work`` or ``max_answer_numbers``.
    """
    work = numbers = 0
    for p in prepared:
        cfg = p.entry.loaded.cfg.model
        per_source = 0 if cfg.attention == "none" else 1 + (
            cfg.heads if cfg.attention == "multihead" else 0)
        for enc in p.sources:
            s = len(enc.ids) + 1
            t_max = len(p.prefix) + int(p.decoding.max_ratio * s) + 10
            work += p.decoding.beam_size * s
            numbers += p.decoding.n_best * t_max * (s * per_source + top_k + 2)
    if work > MAX_SEARCH_WORK:
        raise limit_exceeded("max_search_work", work, field="request")
    if numbers > MAX_ANSWER_NUMBERS:
        raise limit_exceeded("max_answer_numbers", numbers, field="request")


def _finite(x: float, places: int = 6) -> float:
    """``x`` rounded, with -inf (a piece the model gives no probability) as -1e9: JSON
    has no infinity."""
    return round(x, places) if math.isfinite(x) else -1e9


def _rounded(t: torch.Tensor, places: int = 5) -> list[Any]:
    """A tensor as nested lists of floats rounded to ``places`` decimals (short JSON)."""
    scale = 10.0 ** places
    return ((t.double() * scale).round() / scale).tolist()


def _sentence_scores(text: str, reference: str | None) -> tuple[float | None, float | None,
                                                                 float | None]:
    """(sentence BLEU, sentence chrF, hypothesis/reference length in BLEU tokens), or
    Nones without a reference."""
    if reference is None or not reference.strip():
        return None, None, None
    b = BLEU(effective_order=True).sentence_score(text, [reference])
    c = CHRF().sentence_score(text, [reference])
    return round(b.score, 4), round(c.score, 4), (round(b.sys_len / b.ref_len, 4)
                                                    if b.ref_len else None)


@functools.cache
def bleu_signature() -> str:
    """The signature of the sentence BLEU every answer reports."""
    bleu = BLEU(effective_order=True)
    bleu.sentence_score("a", ["a"])  # sacreBLEU signs a metric once it has seen references
    return str(bleu.get_signature())


def _hypothesis(p: Prepared, tokens: list[int], ended: bool, score: float, f: Forced,
                reference: str | None) -> dict[str, Any]:
    """The JSON of one hypothesis (see :class:`nmt.serve.schemas.Hypothesis`)."""
    tv = p.entry.loaded.tgt_vocab
    text = tv.decode(tokens)
    bleu, chrf, _ = _sentence_scores(text, reference)
    multihead = p.entry.loaded.cfg.model.attention == "multihead"
    return {
        "text": text, "tgt_pieces": [tv.id_to_piece(x) for x in tokens] + (
            ["</s>"] if ended else []),
        "score": _finite(score), "log_prob": _finite(sum(f.token_logprobs)),
        "token_logprobs": [_finite(x) for x in f.token_logprobs],
        "attention": None if f.attention is None else _rounded(f.attention),
        "heads": _rounded(f.heads) if multihead and f.heads is not None else None,
        "alignment": None if f.attention is None else f.attention.argmax(dim=1).tolist(),
        "forced": min(len(p.prefix), len(tokens)), "complete": ended,
        "top": [[{"piece": tv.id_to_piece(i), "logprob": _finite(v, 4)} for i, v in step]
                for step in f.top] if f.top else None,
        "bleu": bleu, "chrf": chrf,
    }


def _line(p: Prepared, i: int, hyps: list[dict[str, Any]], reference: str | None
          ) -> dict[str, Any]:
    """The JSON of one (model, line) (see :class:`nmt.serve.schemas.LineResult`)."""
    enc, source = p.sources[i], p.lines[i]
    best = hyps[0] if hyps else None
    text = best["text"] if best else ""
    bleu, chrf, ratio = _sentence_scores(text, reference)
    words = len(source.split())
    return {"source": source, "src_pieces": enc.pieces + ["</s>"],
            "tgt_pieces": best["tgt_pieces"] if best else [], "text": text,
            "truncated": enc.truncated, "unknown": enc.unknown,
            "fixed_vector": p.entry.fixed_vector, "hypotheses": hyps,
            "reference": reference, "bleu": bleu, "chrf": chrf, "len_ratio": ratio,
            "src_len_ratio": round(len(text.split()) / words, 4) if words and best else None}


def run_model(p: Prepared, references: list[str | None], top_k: int, threads: int
              ) -> dict[str, Any]:
    """Search the request's lines with one model and read every hypothesis back.

    Args:
        p: from :func:`prepare`. references: one per line (or None).
        top_k: alternatives per step. threads: torch CPU threads.

    Returns:
        the JSON of :class:`nmt.serve.schemas.ModelResult`.
    """
    e, dec = p.entry, p.decoding
    model, dev = e.loaded.model, e.translator.device
    amp = autocast_dtype(dec.precision, dev, "search.precision")
    examples = [Example(s.ids + [EOS], [], i) for i, s in enumerate(p.sources) if s.ids]
    out: list[list[dict[str, Any]]] = [[] for _ in p.lines]
    with fixed_torch_threads(threads):
        start = time.perf_counter()
        with autocast(dev, amp), torch.inference_mode():
            if examples:
                batch = collate(examples)
                nbest = search_after_prefix(model, batch.src.to(dev), batch.src_len, dec,
                                            p.prefix)
                for ex, hyps in zip(examples, nbest, strict=True):
                    out[ex.index] = _read_back(p, ex, hyps, top_k, references[ex.index])
        elapsed = (time.perf_counter() - start) * 1000
    result_lines = [_line(p, i, out[i], references[i]) for i in range(len(p.lines))]
    return {"model": e.id, "attention": e.loaded.cfg.model.attention,
            "fixed_vector": e.fixed_vector, "decoding": dec.describe(),
            "time_ms": round(elapsed, 3), "lines": result_lines}


def _read_back(p: Prepared, ex: Example, hyps: list[Any], top_k: int,
               reference: str | None) -> list[dict[str, Any]]:
    """The n-best list of one line, read back by a forced pass: complete hypotheses
    first, best score first, then those the search cut at the length limit
    (``complete`` false; :func:`nmt.inference.search.rank`). With a prefix, each
    hypothesis is rescored as a whole (its log P, prefix included, over the length
    penalty of its length)."""
    dec, n_prefix = p.decoding, len(p.prefix)
    ended = [bool(h.complete) for h in hyps]
    targets = [h.tokens + ([EOS] if end else []) for h, end in zip(hyps, ended, strict=True)]
    forced = forced_pass(p.entry.loaded.model, ex.src, targets, top_k)
    rows = []
    for h, end, t, f in zip(hyps, ended, targets, forced, strict=True):
        score = h.score
        if n_prefix:
            lp = sum(f.token_logprobs)
            score = lp if dec.beam_size == 1 else float(
                normalised_score(lp, len(t), dec.length_penalty, dec.alpha))
        rows.append(_hypothesis(p, h.tokens, end, float(score), f, reference))
    return sorted(rows, key=lambda r: (not r["complete"], -r["score"]))
