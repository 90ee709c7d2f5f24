"""``GET /metrics`` of ``nmt serve`` in the Prometheus text format (``prometheus-client``).

Each application has its own collector registry, so that several apps in one process (the
tests) do not share counts. With ``--workers N`` each worker process answers its own
counts: a scrape sees the worker that took the connection (docs/serve.md).

Series:

* ``nmt_serve_requests_total{route, status}``: answered requests, by route template
  (``/api/translate``; ``other`` for an unknown path) and HTTP status.
* ``nmt_serve_queue_depth{model}``: translate requests waiting for or in a search.
* ``nmt_serve_batch_lines{model}``: histogram of the source lines per search.
* ``nmt_serve_queue_seconds{model}``: histogram of the time a job waited for its search.
* ``nmt_serve_search_seconds{model}``: histogram of the time of each batched search and
  forced pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.routing import Match

LINE_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
SECOND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """The server's Prometheus series (see the module's docstring).

    Args:
        depth: model id -> a function giving its current queue depth (read at scrape).
    """

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, depth: dict[str, Callable[[], int]]):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "nmt_serve_requests",
            "Answered requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        queue = Gauge(
            "nmt_serve_queue_depth",
            "Translate requests waiting for or in a search",
            ["model"],
            registry=self.registry,
        )
        for mid, f in depth.items():
            queue.labels(model=mid).set_function(f)
        self.batch = Histogram(
            "nmt_serve_batch_lines",
            "Source lines per batched search",
            ["model"],
            buckets=LINE_BUCKETS,
            registry=self.registry,
        )
        self.queue_s = Histogram(
            "nmt_serve_queue_seconds",
            "Seconds a job waited for its search",
            ["model"],
            buckets=SECOND_BUCKETS,
            registry=self.registry,
        )
        self.search_s = Histogram(
            "nmt_serve_search_seconds",
            "Seconds of one batched search and forced pass",
            ["model"],
            buckets=SECOND_BUCKETS,
            registry=self.registry,
        )

    def observer(self, model: str) -> Callable[[int, list[float], float], None]:
        """The :class:`nmt.serve.batcher.Batcher` callback of ``model``."""

        def observe(lines: int, waited: list[float], searched: float) -> None:
            self.batch.labels(model=model).observe(lines)
            for w in waited:
                self.queue_s.labels(model=model).observe(w)
            self.search_s.labels(model=model).observe(searched)

        return observe

    def text(self) -> bytes:
        """The exposition of every series."""
        return generate_latest(self.registry)


class CountRequests:
    """ASGI middleware: counts each HTTP answer in ``metrics.requests`` by the route
    template it matched (``other`` for none) and its status (499 when no answer was
    sent: the client went away).

    Args:
        app: the ASGI application wrapped. metrics: where to count. routes: the
            application's routes (Starlette ``Route``/``Mount``, with ``matches`` and
            ``path``), read at answer time.
    """

    def __init__(self, app: Any, metrics: Metrics, routes: Callable[[], list[Any]]):
        self.app, self.metrics, self.routes = app, metrics, routes

    def _route(self, scope: dict[str, Any]) -> str:
        for r in self.routes():
            if r.matches(scope)[0] == Match.FULL:
                return str(getattr(r, "path", "other"))
        return "other"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [499]

        async def counting_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:  # answered 500 by the outermost middleware
            status[0] = 500 if status[0] == 499 else status[0]
            raise
        finally:
            self.metrics.requests.labels(route=self._route(scope), status=str(status[0])).inc()
