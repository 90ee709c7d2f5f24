"""One model's answer to ``POST /api/translate``: the lines checked against its
vocabularies (:func:`prepare`), searched in one batch with the lines of other requests
of the same decoding and prefix (:func:`run_jobs`, fed by :mod:`nmt.serve.batcher`),
every hypothesis given its per-token log-probabilities and attention (kept by the search,
or read back by a forced pass, :func:`nmt.serve.forced.forced_pass_many`, for what the
search does not keep), and scored against the references.

Searches hold the process-wide decoding lock on a fixed thread count. A line's answer
does not depend on the lines batched with it beyond float rounding: the server searches
in fp32 by default (``--precision``), where batched and solo outputs agree within 1e-5
(tests/test_serve_batching.py).
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
from nmt.inference.hypothesis import normalised_score
from nmt.inference.threads import fixed_torch_threads
from nmt.inference.translate import Decoding, search_precision
from nmt.inference.translator import EncodedSource
from nmt.ops.precision import search_dtype
from nmt.serve.forced import Forced, forced_pass_many, search_after_prefix
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
        raise bad_option(
            f"beam {req.beam} is more than the {pieces} target pieces of model {entry.id!r}", "beam"
        )
    # the checkpoint's default is served, not refused: capped, as every command caps it
    d, _ = dataclasses.replace(
        entry.decoding, beam_size=min(entry.decoding.beam_size, MAX_BEAM)
    ).capped(pieces)
    beam = req.beam or d.beam_size
    if req.n_best > beam:
        whose = "" if req.beam else f", the default of model {entry.id!r}"
        raise bad_option(f"n_best {req.n_best} is more than the beam ({beam}{whose})", "n_best")
    return dataclasses.replace(
        d,
        beam_size=beam,
        n_best=req.n_best,
        alpha=d.alpha if req.alpha is None else req.alpha,
        length_penalty=d.length_penalty if req.length_penalty is None else req.length_penalty,
    )


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
            raise ApiError(
                422,
                "invalid_request",
                f"line {i} of lines has no source piece "
                f"for model {entry.id!r} (nothing but characters its "
                "normalisation drops)",
                field="lines",
                line=i,
                model=entry.id,
            )
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
        per_source = (
            0 if cfg.attention == "none" else 1 + (cfg.heads if cfg.attention == "multihead" else 0)
        )
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


def rounded(t: torch.Tensor, places: int = 5) -> list[Any]:
    """A tensor as nested lists of floats rounded to ``places`` decimals (short JSON)."""
    scale = 10.0**places
    return ((t.double() * scale).round() / scale).tolist()


def _sentence_scores(
    text: str, reference: str | None
) -> tuple[float | None, float | None, float | None]:
    """(sentence BLEU, sentence chrF, hypothesis/reference length in BLEU tokens), or
    Nones without a reference."""
    if reference is None or not reference.strip():
        return None, None, None
    b = BLEU(effective_order=True).sentence_score(text, [reference])
    c = CHRF().sentence_score(text, [reference])
    return (
        round(b.score, 4),
        round(c.score, 4),
        (round(b.sys_len / b.ref_len, 4) if b.ref_len else None),
    )


@functools.cache
def bleu_signature() -> str:
    """The signature of the sentence BLEU every answer reports."""
    bleu = BLEU(effective_order=True)
    bleu.sentence_score("a", ["a"])  # sacreBLEU signs a metric once it has seen references
    return str(bleu.get_signature())


def _hypothesis(
    p: Prepared, tokens: list[int], ended: bool, score: float, f: Forced, reference: str | None
) -> dict[str, Any]:
    """The JSON of one hypothesis (see :class:`nmt.serve.schemas.Hypothesis`)."""
    tv = p.entry.loaded.tgt_vocab
    text = tv.decode(tokens)
    bleu, chrf, _ = _sentence_scores(text, reference)
    multihead = p.entry.loaded.cfg.model.attention == "multihead"
    return {
        # one cut at the length limit (ended false) was completed with </s> by the search
        # and scored with it (nmt.inference.hypothesis.Hypothesis), as nmt translate shows it
        "text": text,
        "tgt_pieces": tv.id_to_pieces(tokens) + ["</s>"],
        "score": _finite(score),
        "log_prob": _finite(sum(f.token_logprobs)),
        "token_logprobs": [_finite(x) for x in f.token_logprobs],
        "attention": None if f.attention is None else rounded(f.attention),
        "heads": rounded(f.heads) if multihead and f.heads is not None else None,
        "alignment": None if f.attention is None else f.attention.argmax(dim=1).tolist(),
        "forced": min(len(p.prefix), len(tokens)),
        "complete": ended,
        "top": [
            [{"piece": tv.id_to_piece(i), "logprob": _finite(v, 4)} for i, v in step]
            for step in f.top
        ]
        if f.top
        else None,
        "bleu": bleu,
        "chrf": chrf,
    }


def _line(p: Prepared, i: int, hyps: list[dict[str, Any]], reference: str | None) -> dict[str, Any]:
    """The JSON of one (model, line) (see :class:`nmt.serve.schemas.LineResult`)."""
    enc, source = p.sources[i], p.lines[i]
    best = hyps[0] if hyps else None
    text = best["text"] if best else ""
    bleu, chrf, ratio = _sentence_scores(text, reference)
    words = len(source.split())
    return {
        "source": source,
        "src_pieces": enc.pieces + ["</s>"],
        "tgt_pieces": best["tgt_pieces"] if best else [],
        "text": text,
        "truncated": enc.truncated,
        "unknown": enc.unknown,
        "fixed_vector": p.entry.fixed_vector,
        "hypotheses": hyps,
        "reference": reference,
        "bleu": bleu,
        "chrf": chrf,
        "len_ratio": ratio,
        "src_len_ratio": round(len(text.split()) / words, 4) if words and best else None,
    }


def run_model(
    p: Prepared, references: list[str | None], top_k: int, threads: int
) -> dict[str, Any]:
    """Search one request's lines with one model and read every hypothesis back: a batch
    of one job (:func:`run_jobs`).

    Returns:
        the JSON of :class:`nmt.serve.schemas.ModelResult`.
    """
    return run_jobs([(p, references, top_k)], threads)[0]


def run_jobs(
    jobs: list[tuple[Prepared, list[str | None], int]], threads: int, shared: bool = False
) -> list[dict[str, Any]]:
    """Search the lines of several requests to one model in one batch, sorted by source
    length. Each hypothesis' per-token log-probabilities and attention are the search's;
    a job with ``top_k``, a prefix, on a multihead model (per-head weights) or in bf16
    has its hypotheses read back by one forced pass for all such jobs.

    Every line is searched as the batched search searches a line (its own length limit,
    its own beams), so its answer does not depend on its neighbours beyond float
    rounding (in fp32 within 1e-5; see docs/serve.md).

    Args:
        jobs: per request (:func:`prepare`'d for the same model, decoding and prefix,
            the batcher's key), its references (one per line, or None) and top_k.
        threads: torch CPU threads. shared: other shared searches at the same thread
            count may run at the same time (:func:`nmt.inference.threads.fixed_torch_threads`).

    Returns:
        per job the JSON of :class:`nmt.serve.schemas.ModelResult`; ``time_ms`` is the
        whole batch's search and forced pass (where one runs).
    """
    p0 = jobs[0][0]
    e, dec = p0.entry, p0.decoding
    model, dev = e.loaded.model, e.translator.device
    rows = sorted(
        ((j, i) for j, (p, _, _) in enumerate(jobs) for i, s in enumerate(p.sources) if s.ids),
        key=lambda r: len(jobs[r[0]][0].sources[r[1]].ids),
    )
    srcs = [jobs[j][0].sources[i].ids + [EOS] for j, i in rows]
    # what the search kept is what the forced pass would read (the same steps, in fp32):
    # it is read again only for what the search does not keep
    multihead = e.loaded.cfg.model.attention == "multihead"
    # under autocast the search's own log-probabilities are bf16/fp16: read in fp32 instead
    amp = search_dtype(dec.precision, dev)
    read_again = [k > 0 or bool(p.prefix) or multihead or amp is not None for p, _, k in jobs]
    top_k = max((k for (_, _, k), again in zip(jobs, read_again, strict=True) if again), default=0)
    hyps: dict[tuple[int, int], list[Any]] = {}
    forced: dict[tuple[int, int], list[Forced]] = {}
    with fixed_torch_threads(threads, shared):
        start = time.perf_counter()
        with search_precision(dec, dev), torch.inference_mode():
            if rows:
                batch = collate([Example(s, [], k) for k, s in enumerate(srcs)])
                nbest = search_after_prefix(model, batch.src.to(dev), batch.src_len, dec, p0.prefix)
                flat = [(r, h) for r, line in zip(rows, nbest, strict=True) for h in line]
                again = [
                    read_again[r[0]] or h.token_logprobs is None for r, h in flat
                ]  # token_logprobs None: the search did not keep them
                pos = {r: k for k, r in enumerate(rows)}
                got = iter(
                    forced_pass_many(
                        model,
                        [srcs[pos[r]] for (r, _), a in zip(flat, again, strict=True) if a],
                        [h.tokens + [EOS] for (_, h), a in zip(flat, again, strict=True) if a],
                        top_k,
                    )  # EOS even when cut
                )
                for r, line in zip(rows, nbest, strict=True):
                    hyps[r] = line
                for (r, h), a in zip(flat, again, strict=True):
                    forced.setdefault(r, []).append(next(got) if a else _as_forced(h))
        elapsed = (time.perf_counter() - start) * 1000
    answers = []
    for j, (p, refs, k) in enumerate(jobs):
        out = [
            _read_back(p, hyps[(j, i)], forced[(j, i)], k, refs[i]) if (j, i) in hyps else []
            for i in range(len(p.lines))
        ]
        answers.append(
            {
                "model": e.id,
                "attention": e.loaded.cfg.model.attention,
                "fixed_vector": e.fixed_vector,
                "decoding": dec.describe(),
                "time_ms": round(elapsed, 3),
                "lines": [_line(p, i, out[i], refs[i]) for i in range(len(p.lines))],
            }
        )
    return answers


def _as_forced(h: Any) -> Forced:
    """What the forced pass gives a hypothesis, as the search kept it: its pieces'
    log-probabilities (EOS included) and its attention (T, S); no heads, no alternatives.
    The same model steps on the same states: equal to the forced pass's up to float
    rounding of another batch (within 1e-5 in fp32)."""
    att = h.attention
    return Forced(list(h.token_logprobs), None if att is None else att.float(), None, [])


def _read_back(
    p: Prepared, hyps: list[Any], forced: list[Forced], top_k: int, reference: str | None
) -> list[dict[str, Any]]:
    """The n-best list of one line from its forced pass: complete hypotheses first, best
    score first, then those the search cut at the length limit (``complete`` false;
    :func:`nmt.inference.hypothesis.rank`). With a prefix, each hypothesis is rescored as a
    whole (its log P, prefix included, over the length penalty of its length); ``top``
    keeps the request's ``top_k`` of the batch's alternatives."""
    dec, n_prefix = p.decoding, len(p.prefix)
    rows = []
    for h, f in zip(hyps, forced, strict=True):
        score, end = h.score, bool(h.complete)
        if n_prefix:
            lp = sum(f.token_logprobs)
            score = (
                lp
                if dec.beam_size == 1
                else float(normalised_score(lp, len(h.tokens) + 1, dec.length_penalty, dec.alpha))
            )
        f = dataclasses.replace(f, top=[step[:top_k] for step in f.top] if top_k else [])
        rows.append(_hypothesis(p, h.tokens, end, float(score), f, reference))
    return sorted(rows, key=lambda r: (not r["complete"], -r["score"]))
