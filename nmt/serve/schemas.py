"""The JSON bodies of ``nmt serve`` as pydantic models: the request's limits are types
(shown at ``/docs``, enforced by validation and answered 413 by
:func:`nmt.serve.errors.validation_error`), and the answers are documented the same way.

Types are strict: a JSON string is not a number, ``true`` is not a beam size, and
``"yes"`` is not a boolean (422); an integer is accepted where a float is. Floats must
be finite (Python's JSON reader accepts ``NaN`` and ``Infinity``). Every string must be
encodable as UTF-8 (no lone surrogate such as ``\ud800``), and a line (or a reference)
must not be empty or only white space.

Units: scores and log-probabilities are natural logarithms (nats); BLEU and chrF are
sacreBLEU's sentence scores, 0-100; times are milliseconds.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from nmt.config.schema import LengthPenalty
from nmt.serve.limits import MAX_BEAM, MAX_CHARS, MAX_LINES, MAX_PIECES


def utf8(text: str) -> str:
    """``text`` when it can be written as UTF-8; a lone surrogate (JSON's ``\\ud800``
    without its pair) would otherwise fail deep in the tokenizer, as a 500.

    Raises:
        ValueError: ``text`` holds a lone surrogate (pydantic answers it as a 422).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"has a lone surrogate U+{ord(text[e.start]):04X} at character "
            f"{e.start}, which is not UTF-8 text"
        ) from None
    return text


def not_blank(text: str) -> str:
    """``text`` unless it is empty or only white space: nothing to translate or score.

    Raises:
        ValueError: ``text`` is empty or only white space (pydantic answers it as a 422).
    """
    if not text.strip():
        raise ValueError("is empty (or only white space)")
    return text


Text = Annotated[str, StringConstraints(max_length=MAX_CHARS), AfterValidator(utf8)]
Line = Annotated[Text, AfterValidator(not_blank)]
Name = Annotated[str, AfterValidator(utf8)]


class TranslateRequest(BaseModel):
    """N models x M lines in one call: the side-by-side primitive."""

    # strict: "5" is no beam size and true no boolean for an API client's typo to hide in
    model_config = ConfigDict(extra="forbid", strict=True)

    lines: list[Line] = Field(
        min_length=1,
        max_length=MAX_LINES,
        description=f"Source lines: at most {MAX_LINES}, each at most {MAX_CHARS} characters "
        f"and {MAX_PIECES} source pieces (413 beyond; see `truncate`), none empty.",
    )
    models: list[Name] | None = Field(
        None, min_length=1, description="Model ids (GET /api/models); default: every model."
    )
    beam: int | None = Field(
        None,
        ge=1,
        le=MAX_BEAM,
        description=f"Beam size, 1 (greedy) to "
        f"{MAX_BEAM} (413 beyond); default: each checkpoint's.",
    )
    n_best: int = Field(1, ge=1, le=MAX_BEAM, description="Hypotheses per line, at most beam.")
    alpha: float | None = Field(
        None,
        ge=0,
        le=10,
        allow_inf_nan=False,
        description="GNMT length penalty alpha (finite); default: each checkpoint's.",
    )
    length_penalty: LengthPenalty | None = Field(
        None, description="Length penalty of beam search; default: each checkpoint's."
    )
    prefix: Text | None = Field(
        None,
        description="Target prefix to force: every hypothesis starts with its pieces "
        f"(at most {MAX_CHARS} characters, {MAX_PIECES} pieces), and the search continues "
        "from there. Empty: no prefix.",
    )
    references: list[Line | None] | None = Field(
        None,
        max_length=MAX_LINES,
        description="One reference per line (null for none, "
        "never empty): sentence BLEU and chrF of every hypothesis.",
    )
    top_k: int = Field(
        0,
        ge=0,
        le=10,
        description="Per target step, the k most probable pieces and their log-probabilities.",
    )
    truncate: bool = Field(
        False,
        description=f"Cut lines over {MAX_PIECES} pieces (flagged "
        "`truncated`) instead of answering 413.",
    )


class Alternative(BaseModel):
    """One of a step's most probable pieces."""

    piece: str
    logprob: float


class Hypothesis(BaseModel):
    """One hypothesis of the n-best list; T = len(tgt_pieces), S = len(src_pieces)."""

    text: str
    tgt_pieces: list[str] = Field(
        description="Target pieces, `</s>` last (in place of the "
        "last piece where the length limit cut it: `complete` false)."
    )
    score: float = Field(
        description="The search's ranking score (nats; length-normalised in beam search)."
    )
    log_prob: float = Field(description="Sum of token_logprobs (nats).")
    token_logprobs: list[float] = Field(description="(T,) log p(y_t | y_<t, x), nats.")
    attention: list[list[float]] | None = Field(
        description="(T, S) attention weights (multihead: the mean over heads); null for the "
        "fixed-vector model."
    )
    heads: list[list[list[float]]] | None = Field(
        description="(h, T, S) per-head weights of a multihead model, else null."
    )
    alignment: list[int] | None = Field(
        description="(T,) per target piece the source position of the largest weight, as "
        "`nmt translate --attention` prints it; null without attention."
    )
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
    fixed_vector: bool = Field(
        description="The model reads one fixed context vector "
        "(attention none): every step sees the same vector."
    )
    hypotheses: list[Hypothesis] = Field(
        description="Complete hypotheses first, best score "
        "first, then those cut at the length limit."
    )
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


_ERROR_TEXT = {
    400: "a bad option (e.g. n_best > beam, a beam over the target vocabulary, references "
    "not one per line, a malformed bucket)",
    404: "unknown model, study or test set",
    413: f"over a limit: more than {MAX_LINES} lines, {MAX_CHARS} characters or "
    f"{MAX_PIECES} pieces in a line, beam over {MAX_BEAM}, body over 1 MiB, or over "
    "the search-work or answer-size budget",
    422: "a malformed body or option (wrong JSON type, non-finite number, empty line, "
    "text that is not UTF-8)",
    429: "the model's queue is full; try again (header Retry-After)",
    503: "the request waited past the server's --timeout (queue time counted); no partial "
    "answer is given",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route that can answer ``codes``."""
    return {code: {"model": ErrorBody, "description": _ERROR_TEXT[code]} for code in codes}
