"""The JSON answers of ``nmt serve`` to errors: a limit exceeded (413), a request that does
not validate (422, with every error listed), the API's own errors, HTTP errors (a body that
is not UTF-8 is 422, as docs/serve.md says, not FastAPI's 400) and anything unexpected
(500, one line). :func:`add_error_answers` installs them on an application."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from nmt.serve.guard import (
    REQUEST_SHAPE,
    ROUTE_SHAPES,
    echo,
    json_safe,
    not_json_message,
    plain_message,
    unknown_fields_hint,
)
from nmt.serve.limits import ApiError, limit_exceeded


def add_error_answers(app: FastAPI) -> None:
    """Install this module's error answers on ``app``. Raises nothing."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)


def _limit_error(err: dict[str, Any]) -> ApiError | None:
    """The 413 error of one validation error that is a limit, else None."""
    loc, kind, given = tuple(err.get("loc", ())), err.get("type"), err.get("input")
    if len(loc) < 2 or loc[0] != "body":
        return None
    field = str(loc[1])
    if len(loc) == 2 and field in ("lines", "references") and kind == "too_long":
        return limit_exceeded("max_lines", len(given or ()), field=field)
    if len(loc) == 2 and field == "prefix" and kind == "string_too_long":
        return limit_exceeded("max_chars", len(given or ""), 0, field="prefix")
    if len(loc) >= 3 and field in ("lines", "references") and kind == "string_too_long":
        return limit_exceeded("max_chars", len(given or ""), int(loc[2]), field=field)
    if loc == ("body", "beam") and kind == "less_than_equal":
        return limit_exceeded("max_beam", int(given or 0), field="beam")
    return None


def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """413 when a validation error is a limit (the first such), else 422 with the list:
    per error its ``loc``, ``msg``, ``type`` and, when short, the rejected ``input``."""
    found = exc.errors() if isinstance(exc, RequestValidationError) else []
    for err in found:
        limit = _limit_error(err)
        if limit is not None:
            return JSONResponse(json_safe(limit.body()), status_code=413)
    listed = [
        {
            "loc": list(e.get("loc", ())),
            "msg": plain_message(e),
            "type": str(e.get("type", "")),
            "input": echo(e.get("input")),
        }
        for e in found
    ]
    first = listed[0] if listed else {"msg": str(exc), "loc": []}
    content_type = request.headers.get("content-type", "")
    shape = ROUTE_SHAPES.get(request.url.path, REQUEST_SHAPE)
    not_json = not_json_message(found[0], content_type, shape) if found else None
    if not_json is not None:
        return JSONResponse(
            json_safe({"error": "invalid_request", "message": not_json, "errors": listed}),
            status_code=422,
        )
    loc = [x for x in first["loc"] if x != "body"]
    msg = str(first["msg"]).removeprefix("Value error, ")
    body: dict[str, Any] = {
        "error": "invalid_request",
        "message": f"{'.'.join(map(str, loc))}: {msg}",
        "errors": listed,
    }
    if first.get("type") == "missing":  # a body meant for another route: name both halves
        body["message"] += unknown_fields_hint(listed, shape)
    if len(loc) >= 2 and loc[0] in ("lines", "references") and isinstance(loc[1], int):
        body.update(field=loc[0], line=loc[1])
        sep = " " if msg[:1].islower() else ": "  # "line 2 of lines is empty"
        body["message"] = f"line {loc[1]} of {loc[0]}{sep}{msg}"
    return JSONResponse(json_safe(body), status_code=422)


def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, UnicodeDecodeError):  # FastAPI says 400; docs/serve.md 422
        bad = exc.__cause__
        return JSONResponse(
            {
                "error": "invalid_request",
                "message": f"body: is not UTF-8 text (byte {bad.start} is "
                f"{bad.object[bad.start : bad.start + 1]!r})",
            },
            status_code=422,
        )
    name = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(
        {"error": name, "message": str(exc.detail)},
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


def _internal_error(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        json_safe({"error": "internal_error", "message": f"{type(exc).__name__}: {exc}"}),
        status_code=500,
    )
