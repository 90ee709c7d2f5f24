"""The FastAPI application of ``nmt serve``: the JSON API under ``/api``, the page at
``/``, its files under ``/static``, and the OpenAPI page at ``/docs`` (served from local
files when ``fastapi-offline`` is installed, as the ``serve`` extra does).

Every error is a JSON body with its status code (:mod:`nmt.serve.limits`): validation
errors of the limits (too many lines, a line too long, beam too large) become 413,
other validation errors 422 (the rejected value echoed only when short); an answer is
never 200 with an error inside. The body limit is :class:`nmt.serve.guard.BodyLimit`.

A translate request becomes one job per model, queued on that model's
:class:`nmt.serve.batcher.Batcher`, which searches it together with the lines of other
requests of the same decoding. While it waits the route asks whether the client is still
there (one that went away is dropped before its search) and whether the deadline
(``--timeout``, queue time counted) has passed: 503, never a partial answer.
``GET /metrics`` gives the Prometheus series of :mod:`nmt.serve.metrics`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from nmt.serve.batcher import Batcher, Batching, Job, Turns, wait_for_jobs
from nmt.serve.decode import bleu_signature, check_budgets, prepare
from nmt.serve.errors import add_error_answers
from nmt.serve.guard import (
    BodyLimit,
)
from nmt.serve.limits import (
    LIMITS,
    MAX_ANSWER_NUMBERS,
    MAX_BEAM,
    MAX_BODY_BYTES,
    MAX_CHARS,
    MAX_EXAMPLES,
    MAX_LINES,
    MAX_PIECES,
    MAX_SEARCH_WORK,
    ApiError,
    bad_option,
    chosen_models,
)
from nmt.serve.metrics import CountRequests, Metrics
from nmt.serve.registry import ModelEntry, Registry
from nmt.serve.schemas import TranslateRequest, TranslateResponse, errors
from nmt.serve.studies import Studies
from nmt.serve.testsets import TestSets

STATIC = Path(__file__).parent / "static"
# the page loads nothing from elsewhere; inline style attributes are the SVG's
PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "connect-src 'self'; frame-ancestors 'none'"
)

DESCRIPTION = f"""GRU encoder-decoder translation with attention, and the fixed-vector
model, side by side. Models are the ones given on the command line; nothing is uploaded.

**Limits** (answered **413** with a JSON body naming the limit, its maximum, the value
and the line): at most **{MAX_LINES} lines** per request, **{MAX_CHARS} characters** and
**{MAX_PIECES} pieces** per line (source, reference or prefix), **beam at most
{MAX_BEAM}**, a body of at most {MAX_BODY_BYTES} bytes (chunked or not); per request,
at most **{MAX_SEARCH_WORK:,} search work** (beam x source pieces, summed over lines and
models) and **{MAX_ANSWER_NUMBERS:,} answer numbers** at worst (n_best x the length limit x
(source pieces x (1 + heads) + top_k + 2), summed over lines and models). A bad option is
400 or 422 (wrong JSON types, non-finite numbers, empty lines and text that is not UTF-8
included), an unknown model, study or test set 404, a full per-model queue 429. No answer
is ever 200 with an error inside.
"""


def _nmt_version() -> str:
    try:
        return version("nmt")
    except PackageNotFoundError:
        return "unknown"


def _new_app() -> FastAPI:
    # no /redoc: FastAPI's own loads its script from a CDN, and /docs says it all
    kw: dict[str, Any] = {
        "title": "nmt serve",
        "version": _nmt_version(),
        "description": DESCRIPTION,
        "redoc_url": None,
    }
    try:
        from fastapi_offline import FastAPIOffline
    except ImportError:
        return FastAPI(**kw)
    return FastAPIOffline(**kw)


def _route_codes_only(app: FastAPI) -> None:
    """Make the OpenAPI schema list only the codes each route can answer: FastAPI adds a
    422 to every route with a parameter, and a study's name, any string, cannot fail."""
    schema_of = app.openapi

    def openapi() -> dict[str, Any]:
        schema = schema_of()  # FastAPI keeps it: the edit below is made once
        schema["paths"]["/api/studies/{name}"]["get"]["responses"].pop("422", None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _leaving(entry: ModelEntry) -> Callable[[Any], None]:
    """A future's callback giving back ``entry``'s queue place."""
    return lambda _: entry.queue.leave()


def create_app(
    registry: Registry, studies: Studies, testsets: TestSets, batching: Batching | None = None
) -> FastAPI:
    """The application serving ``registry``'s models, ``studies`` and ``testsets``, its
    translate requests batched per model as ``batching`` says (default
    :class:`nmt.serve.batcher.Batching`)."""
    batching = batching or Batching()
    app = _new_app()
    add_error_answers(app)

    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    _route_codes_only(app)
    # registry.searches at a time (one per model, on their share of the threads), each
    # batch taken at its turn
    turns = Turns(registry.searches)
    batchers = {
        i: Batcher(
            registry.search_threads,
            batching.max_batch,
            batching.wait_ms / 1000,
            turns=turns,
            return_wait_s=batching.return_wait_ms / 1000,
            shared=registry.searches > 1,
        )
        for i in registry.models
    }
    metrics = Metrics({i: e.queue.depth for i, e in registry.models.items()})
    for i, b in batchers.items():
        b.observe = metrics.observer(i)
    app.add_middleware(CountRequests, metrics=metrics, routes=lambda: app.router.routes)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    # the routes in this order: it is the order of /docs and of the OpenAPI paths
    _add_page_and_model_routes(app, registry)
    _add_translate_route(app, registry, batchers=batchers, batching=batching)

    @app.get("/metrics", include_in_schema=False)
    def prometheus() -> Response:
        return Response(metrics.text(), media_type=metrics.content_type)

    _add_study_routes(app, studies)
    _add_example_routes(app, testsets)
    return app


def _add_page_and_model_routes(app: FastAPI, registry: Registry) -> None:
    """Register on ``app`` the page ``/``, ``GET /api/health`` and ``GET /api/models``,
    which describe ``registry``'s models."""

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(
            STATIC / "index.html",
            headers={"Content-Security-Policy": PAGE_POLICY, "X-Content-Type-Options": "nosniff"},
        )

    @app.get("/api/health", tags=["models"])
    def health() -> dict[str, Any]:
        """Liveness: the served model ids, the decoding threads (and how many searches
        run at once, on how many threads each) and nmt's version."""
        return {
            "status": "ok",
            "models": list(registry.models),
            "threads": registry.threads,
            "searches": registry.searches,
            "search_threads": registry.search_threads,
            "version": _nmt_version(),
        }

    @app.get("/api/models", tags=["models"])
    def models() -> dict[str, Any]:
        """Per model: id, direction, attention type, step order, parameters, decoding
        defaults, the test BLEU stored beside the checkpoint with its signature (null when
        none), its sha256; the page's default pair; the limits."""
        return {
            "models": [e.info for e in registry.models.values()],
            "default": registry.default_pair(),
            "limits": LIMITS,
            "queue": {i: e.queue.size for i, e in registry.models.items()},
        }


def _add_translate_route(
    app: FastAPI, registry: Registry, *, batchers: dict[str, Batcher], batching: Batching
) -> None:
    """Register on ``app`` ``POST /api/translate``: its jobs are queued on ``batchers``
    (one per model of ``registry``) and answered within ``batching.timeout_s``."""

    @app.post(
        "/api/translate",
        tags=["translate"],
        response_model=TranslateResponse,
        responses=errors(400, 404, 413, 422, 429, 503),
    )
    async def translate(req: TranslateRequest, request: Request) -> JSONResponse:
        """Translate M lines with N models: per (model, line) the pieces, the n-best list
        with per-token log-probabilities and attention (T x S; per head for multihead;
        null for the fixed-vector model, flagged `fixed_vector`), the truncation and
        unknown-piece flags, sentence BLEU and chrF against a reference, and the time."""
        start, arrived = time.perf_counter(), time.monotonic()
        ids = chosen_models(req.models, list(registry.models))
        refs: list[str | None] = [None] * len(req.lines)
        if req.references is not None:
            if len(req.references) != len(req.lines):
                raise bad_option(
                    f"{len(req.references)} references for {len(req.lines)} "
                    "lines: give one per line (null for none)",
                    "references",
                )
            refs = list(req.references)
        prepared = await run_in_threadpool(lambda: [prepare(registry.models[i], req) for i in ids])
        check_budgets(prepared, req.top_k)
        if await request.is_disconnected():  # nobody to answer: search nothing
            raise ApiError(499, "client_disconnected", "the client went away")
        entries = registry.enter(ids)
        deadline = arrived + batching.timeout_s  # the time it took to prepare counts
        jobs = [Job(p, refs, req.top_k, deadline) for p in prepared]
        for j in jobs:  # the batcher counts a request answered once all its jobs are
            j.request = jobs
        for e, j in zip(entries, jobs, strict=True):
            j.future.add_done_callback(_leaving(e))  # searched or dropped: the place is free
            batchers[e.id].submit(j)
        results = await wait_for_jobs(jobs, request, deadline, batching.timeout_s)
        return JSONResponse(
            {
                "results": results,
                "prefix": req.prefix,
                "time_ms": round((time.perf_counter() - start) * 1000, 3),
                "bleu_signature": bleu_signature(),
            }
        )


def _add_study_routes(app: FastAPI, studies: Studies) -> None:
    """Register on ``app`` ``GET /api/studies`` and ``GET /api/studies/{name}``, which
    serve ``studies``."""

    @app.get("/api/studies", tags=["studies"])
    def study_list() -> dict[str, Any]:
        """The served studies (``--study``): name, direction (null when the study's
        config cannot be read) and test sets."""
        return {"studies": studies.names()}

    @app.get("/api/studies/{name}", tags=["studies"], responses=errors(404))
    def study(name: str) -> dict[str, Any]:
        """A study's BLEU-by-length buckets: per model n, BLEU with its 95% interval, chrF,
        length ratio and brevity penalty; the ids of each bucket's sentences (line numbers
        of the test set of the same name in /api/examples)."""
        return studies.get(name)


def _add_example_routes(app: FastAPI, testsets: TestSets) -> None:
    """Register on ``app`` ``GET /api/testsets`` and ``GET /api/examples``, which serve
    ``testsets``' sentences by length bucket."""

    @app.get("/api/testsets", tags=["examples"])
    def testset_index() -> dict[str, Any]:
        """The test sets to pick examples from, with lines per length bucket; the joined
        long set included."""
        return testsets.index()

    @app.get("/api/examples", tags=["examples"], responses=errors(400, 404, 422))
    def examples(
        split: str = Query(..., description="A test set of /api/testsets."),
        bucket: str | None = Query(
            None,
            description="One range of source words, "
            "e.g. 31-40, or 61- (61%2B; a bare + in a URL "
            "is a space) for no end; default: every line.",
        ),
        offset: int = Query(0, ge=0),
        limit: int = Query(20, ge=1, le=MAX_EXAMPLES),
    ) -> dict[str, Any]:
        """Source/reference pairs of a test set, by source length in words."""
        return testsets.examples(split, bucket, offset, limit)
