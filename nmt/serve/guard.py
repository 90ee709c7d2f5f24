"""What stands between a request and the routes of ``nmt serve``: the body limit, counted
as the body arrives (:class:`BodyLimit`), error bodies that can always be written as JSON
(:func:`json_safe`), and the wording of a rejected body's 422 where pydantic's own names
neither the fault nor what to send (:func:`not_json_message`, :func:`unknown_fields_hint`).

The body limit cannot trust ``Content-Length``: a chunked upload has none, and a client
may send more than it announced. :class:`BodyLimit` reads the body itself, stops at the
first chunk past ``MAX_BODY_BYTES`` and answers 413 without reading the rest; a body
within the limit is handed to the application unchanged.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nmt.serve.limits import MAX_BODY_BYTES, limit_exceeded

MAX_ECHO_CHARS = 80  # of a rejected value echoed in a 422 body; longer ones are left out


def json_safe(x: Any) -> Any:
    """``x`` with what JSON cannot hold replaced: a non-finite float by its name
    (``"nan"``, ``"inf"``), a string that is not UTF-8 (a lone surrogate) by one with
    U+FFFD in its place, tuples by lists, anything else by its ``repr``."""
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, str):
        return x.encode("utf-8", errors="replace").decode("utf-8")
    if x is None or isinstance(x, bool | int | float):
        return x
    if isinstance(x, dict):
        return {str(json_safe(k)): json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return json_safe(repr(x))


def echo(value: Any) -> Any:
    """The rejected ``value`` as a 422 body may repeat it: a short scalar, else None (a
    5 MB line is not worth sending back)."""
    if isinstance(value, str):
        return json_safe(value) if len(value) <= MAX_ECHO_CHARS else None
    if value is None or isinstance(value, bool | int | float):
        return json_safe(value)
    return None


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(json_safe(body)).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is answered 413
    ``max_body_bytes`` as soon as it is known to be over (from ``Content-Length``, or
    when the chunks read so far pass it), without reading the rest.

    Args:
        app: the application behind it. limit: the most bytes a body may have.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        size = headers.get(b"content-length", b"").decode("latin-1")
        if size.isdigit() and int(size) > self.limit:
            await self._refuse(send, int(size), read_all=True)
            return
        chunks: list[bytes] = []
        total, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.limit:
                await self._refuse(send, total, read_all=not message.get("more_body"))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: http.disconnect, when it comes

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, size: int, read_all: bool) -> None:
        """413; ``size`` is what was announced or read, a lower bound unless ``read_all``."""
        body = limit_exceeded("max_body_bytes", size, field="body").body()
        body["message"] += " bytes" + ("" if read_all else " (at least: the rest was not read)")
        await _send_json(send, 413, body)


def plain_message(err: dict[str, Any]) -> str:
    """pydantic's message, said plainly where it is obscure."""
    if err.get("type") == "string_unicode":  # JSON's reader met a lone surrogate (\ud800)
        return "is not UTF-8 text: it has a lone surrogate (an unpaired \\ud800-\\udfff escape)"
    return str(err.get("msg", ""))


# what a request looks like, for the errors of a body that is not one (by route; translate's
# shape for the others)
REQUEST_SHAPE = '{"lines": ["Ein Hund läuft im Schnee."]}'
ROUTE_SHAPES = {"/api/reference_alignment": '{"line": "Ein Hund läuft im Schnee."}'}


def not_json_message(
    err: dict[str, Any], content_type: str, shape: str = REQUEST_SHAPE
) -> str | None:
    """The message for a body that is not a JSON object (malformed JSON, or a body sent as
    another content type), else None: pydantic's own ("JSON decode error", "Input should
    be a valid dictionary") names neither the fault nor what to send."""
    loc, kind = tuple(err.get("loc", ())), err.get("type")
    if kind == "json_invalid":
        reason = str((err.get("ctx") or {}).get("error", "malformed JSON"))
        at = f" at character {loc[1]}" if len(loc) > 1 and isinstance(loc[1], int) else ""
        return (
            f"the request body is not valid JSON ({reason}{at}); send a JSON object with "
            f"Content-Type: application/json, e.g. {shape}"
        )
    if loc == ("body",) and kind in ("model_attributes_type", "dict_type", "missing"):
        if "json" not in content_type.lower():  # FastAPI reads a body as JSON only when told
            return (
                f"the request's Content-Type is {content_type or 'missing'!r}, so its body "
                "was not read as JSON; send the header Content-Type: application/json, "
                f"e.g. with {shape}"
            )
        return (
            "the request body is not a JSON object; send one with Content-Type: "
            f"application/json, e.g. {shape}"
        )
    return None


def unknown_fields_hint(listed: list[dict[str, Any]], shape: str) -> str:
    """What to add to a "Field required" message when the body also carries fields this route
    does not take (``{"line": ...}`` sent to /api/translate): their names and the shape to
    send; "" when there are none. ``listed``: the 422 body's errors (``loc``, ``type``)."""
    unknown = [e["loc"][-1] for e in listed if e["type"] == "extra_forbidden" and e["loc"]]
    if not unknown:
        return ""
    names = ", ".join(repr(str(x)) for x in unknown)
    return f"; {names} is not a field here: send e.g. {shape}"
