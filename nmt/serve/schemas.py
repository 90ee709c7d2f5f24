"""The JSON bodies of ``nmt serve`` as pydantic models: the request's limits are types
(shown at ``/docs``, enforced by validation and answered 413 by
:func:`nmt.serve.app.validation_error`), and the answers are documented the same way.

Units: scores and log-probabilities are natural logarithms (nats); BLEU and chrF are
sacreBLEU's sentence scores, 0-100; times are milliseconds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from nmt.serve.limits import MAX_BEAM, MAX_CHARS, MAX_LINES, MAX_PIECES

Line = Annotated[str, StringConstraints(max_length=MAX_CHARS)]


class TranslateRequest(BaseModel):
    """N models x M lines in one call: the side-by-side primitive."""

    model_config = ConfigDict(extra="forbid")

    lines: list[Line] = Field(
        min_length=1, max_length=MAX_LINES,
        description=f"Source lines: at most {MAX_LINES}, each at most {MAX_CHARS} characters "
        f"and {MAX_PIECES} source pieces (413 beyond; see `truncate`).")
    models: list[str] | None = Field(
        None, min_length=1, description="Model ids (GET /api/models); default: every model.")
    beam: int | None = Field(None, ge=1, le=MAX_BEAM, description=f"Beam size, 1 (greedy) to "
                             f"{MAX_BEAM} (413 beyond); default: each checkpoint's.")
    n_best: int = Field(1, ge=1, le=MAX_BEAM, description="Hypotheses per line, at most beam.")
    alpha: float | None = Field(None, ge=0, le=10, description="GNMT length penalty alpha; "
                                "default: each checkpoint's.")
    length_penalty: Literal["gnmt", "average", "none"] | None = Field(
        None, description="Length penalty of beam search; default: each checkpoint's.")
    prefix: Line | None = Field(
        None, description="Target prefix to force: every hypothesis starts with its pieces "
        f"(at most {MAX_CHARS} characters, {MAX_PIECES} pieces), and the search continues "
        "from there.")
    references: list[Line | None] | None = Field(
        None, max_length=MAX_LINES, description="One reference per line (or null): sentence "
        "BLEU and chrF of every hypothesis.")
    top_k: int = Field(0, ge=0, le=10, description="Per target step, the k most probable "
                       "pieces and their log-probabilities.")
    truncate: bool = Field(False, description=f"Cut lines over {MAX_PIECES} pieces (flagged "
                           "`truncated`) instead of answering 413.")


class Alternative(BaseModel):
    """One of a step's most probable pieces."""

    piece: str
    logprob: float


class Hypothesis(BaseModel):
    """One hypothesis of the n-best list; T = len(tgt_pieces), S = len(src_pieces)."""

    text: str
    tgt_pieces: list[str] = Field(description="Target pieces, `</s>` last when produced.")
    score: float = Field(description="The search's ranking score (nats; length-normalised "
                         "in beam search).")
    log_prob: float = Field(description="Sum of token_logprobs (nats).")
    token_logprobs: list[float] = Field(description="(T,) log p(y_t | y_<t, x), nats.")
    attention: list[list[float]] | None = Field(
        description="(T, S) attention weights (multihead: the mean over heads); null for the "
        "fixed-vector model.")
    heads: list[list[list[float]]] | None = Field(
        description="(h, T, S) per-head weights of a multihead model, else null.")
    alignment: list[int] | None = Field(
        description="(T,) per target piece the source position of the largest weight, as "
        "`nmt translate --attention` prints it; null without attention.")
    forced: int = Field(description="How many leading pieces were forced (the prefix).")
    complete: bool = Field(description="False when the length limit came before `</s>`.")
    top: list[list[Alternative]] | None = Field(description="(T, top_k) alternatives.")
    bleu: float | None
    chrf: float | None


class LineResult(BaseModel):
    """One (model, line): its pieces, flags, n-best list and sentence scores."""

    source: str
    src_pieces: list[str] = Field(description="Source pieces, `</s>` last.")
    tgt_pieces: list[str] = Field(description="The best hypothesis' pieces.")
    text: str
    truncated: bool
    unknown: bool = Field(description="No source piece is known to the model.")
    fixed_vector: bool = Field(description="The model reads one fixed context vector "
                               "(attention none): every step sees the same vector.")
    hypotheses: list[Hypothesis] = Field(description="Complete hypotheses first, best score "
                                         "first, then those cut at the length limit.")
    reference: str | None
    bleu: float | None
    chrf: float | None
    len_ratio: float | None = Field(description="Hypothesis/reference length (BLEU tokens).")
    src_len_ratio: float | None = Field(description="Hypothesis/source length in words.")


class ModelResult(BaseModel):
    """One model's answer: a LineResult per line, in order."""

    model: str
    attention: str
    fixed_vector: bool
    decoding: str
    time_ms: float
    lines: list[LineResult]


class TranslateResponse(BaseModel):
    """One ModelResult per requested model, in the order asked."""

    results: list[ModelResult]
    prefix: str | None
    time_ms: float
    bleu_signature: str | None


class ErrorBody(BaseModel):
    """Every error: a name, a sentence, and (for 413) the limit, its maximum, the value
    given and the line."""

    error: str
    message: str
    limit: str | None = None
    max: int | None = None
    value: int | None = None
    line: int | None = None
    field: str | None = None
    model: str | None = None


ERRORS = {code: {"model": ErrorBody, "description": text} for code, text in (
    (400, "a bad option (e.g. n_best > beam, a beam over the target vocabulary, "
          "references not one per line)"),
    (404, "unknown model, study or test set"),
    (413, f"over a limit: more than {MAX_LINES} lines, {MAX_CHARS} characters or "
          f"{MAX_PIECES} pieces in a line, beam over {MAX_BEAM}, body over 1 MiB"),
    (422, "a malformed body or option"),
    (429, "the model's queue is full; try again"))}
