"""What stands between a request and the routes of ``nmt serve``: the body limit, counted
as the body arrives (:class:`BodyLimit`), and error bodies that can always be written as
JSON (:func:`json_safe`).

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
