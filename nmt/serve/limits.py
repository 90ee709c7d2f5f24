"""What ``nmt serve`` accepts, and the errors it answers with.

Limits (LibreTranslate's model): at most ``MAX_LINES`` lines per request,
``MAX_CHARS`` characters and ``MAX_PIECES`` source pieces per line, beam at most
``MAX_BEAM``, a body of at most ``MAX_BODY_BYTES`` (counted as it arrives, chunked or
not). Two budgets bound a request's time and the size of its answer before any search
runs: ``MAX_SEARCH_WORK`` (beam x source pieces, summed over lines and models) and
``MAX_ANSWER_NUMBERS`` (the numbers the answer would hold if every hypothesis ran to its
length limit: attention weights, per-head weights, log-probabilities, alternatives). A
request over a limit is answered 413 with a JSON body naming the limit,
its maximum, the value given and the line; a bad option 400 (or 422 from validation), an
unknown model, study, test set or route 404, a full per-model queue 429. No answer is ever
200 with an error inside: every error is an :class:`ApiError` (or a validation error)
turned into a JSON body ``{"error": ..., "message": ..., ...}`` with its status code.
"""

from __future__ import annotations

from typing import Any

MAX_LINES = 32  # lines per request
MAX_CHARS = 2000  # characters per line (source, reference or prefix)
MAX_PIECES = 400  # source pieces per line (nmt.inference.translate.MAX_SOURCE_PIECES)
MAX_BEAM = 16  # beam size
MAX_BODY_BYTES = 1 << 20  # a request body larger than this is refused before parsing
DEFAULT_QUEUE = 16  # requests waiting or running per model before 429
MAX_EXAMPLES = 200  # example pairs per /api/examples page
# beam x source pieces (</s> included), summed over the request's lines and models: what a
# search costs grows with both, and one request holds the decoding lock for all of it.
# 64,000 is e.g. 32 lines of 40 pieces at beam 16 with three models, or one line of 400
# pieces at beam 16 with ten.
MAX_SEARCH_WORK = 64_000
# numbers in the answer at worst (every hypothesis as long as the length limit allows):
# n_best x T_max x (S x (1 + heads) + top_k + 2) summed over lines and models; at about
# 8 bytes a number, 5,000,000 is 40 MB of JSON.
MAX_ANSWER_NUMBERS = 5_000_000

LIMITS: dict[str, int] = {
    "max_lines": MAX_LINES,
    "max_chars": MAX_CHARS,
    "max_pieces": MAX_PIECES,
    "max_beam": MAX_BEAM,
    "max_body_bytes": MAX_BODY_BYTES,
    "max_search_work": MAX_SEARCH_WORK,
    "max_answer_numbers": MAX_ANSWER_NUMBERS,
}


class ApiError(Exception):
    """An error the API answers with ``status`` and a JSON body.

    Args:
        status: the HTTP status code (400, 404, 413, 429, ...).
        error: a short machine-readable name, e.g. ``limit_exceeded``.
        message: one sentence for people, naming what was wrong.
        fields: more keys of the body (``limit``, ``max``, ``value``, ``line``, ``model``).
    """

    def __init__(self, status: int, error: str, message: str, **fields: Any):
        super().__init__(message)
        self.status, self.error, self.message, self.fields = status, error, message, fields

    def body(self) -> dict[str, Any]:
        """The JSON body: ``error``, ``message`` and the extra fields."""
        return {"error": self.error, "message": self.message, **self.fields}


def limit_exceeded(
    limit: str,
    value: int,
    line: int | None = None,
    *,
    field: str = "lines",
    model: str | None = None,
) -> ApiError:
    """The 413 error of a request over ``limit`` (a key of :data:`LIMITS`).

    Args:
        value: what the request gave (lines, characters, pieces, beam size, bytes).
        line: the offending line (from 0) of ``field``, or None for the whole request.
        field: the request field: ``lines``, ``references``, ``prefix``, ``beam``, ``body``,
            or ``request`` for a budget of the whole request.
        model: the model whose vocabulary gave ``value`` pieces (``max_pieces`` only).
    """
    where = "" if line is None else f" (line {line} of {field})"
    by = "" if model is None else f" with the vocabulary of model {model!r}"
    return ApiError(
        413,
        "limit_exceeded",
        f"{limit} is {LIMITS[limit]}, the request has {value}{where}{by}",
        limit=limit,
        max=LIMITS[limit],
        value=value,
        line=line,
        field=field,
        model=model,
    )


def bad_option(message: str, option: str) -> ApiError:
    """A 400 error for an option that is valid alone but not with the others."""
    return ApiError(400, "bad_option", message, option=option)


def not_found(what: str, name: str, known: list[str]) -> ApiError:
    """A 404 error for an unknown model, study or test set, listing the known ones."""
    return ApiError(
        404,
        f"unknown_{what}",
        f"no {what} {name!r}; known: {', '.join(known) or '(none)'}",
        name=name,
        known=known,
    )


def chosen_models(asked: list[str] | None, known: list[str]) -> list[str]:
    """The model ids a request names (every served model when it names none).

    Raises:
        ApiError: 404 for an id that is not served, 400 for an id named twice.
    """
    ids = asked or list(known)
    for i in ids:
        if i not in known:
            raise not_found("model", i, list(known))
    if len(set(ids)) != len(ids):
        raise bad_option("a model is named twice in models", "models")
    return ids


def busy(model: str, size: int) -> ApiError:
    """The 429 error of a model whose queue holds ``size`` requests already."""
    return ApiError(
        429,
        "queue_full",
        f"model {model!r} has {size} requests waiting or "
        "running, its queue's size; try again shortly",
        model=model,
        queue=size,
    )
