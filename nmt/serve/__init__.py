"""``nmt serve``: an HTTP JSON API and one offline web page that put attention models
and the fixed-vector model side by side.

Modules: :mod:`~nmt.serve.limits` (request limits and the errors the API answers with),
:mod:`~nmt.serve.schemas` (pydantic bodies: the limits as types, shown at ``/docs``),
:mod:`~nmt.serve.guard` (the body limit counted as it arrives; error bodies always JSON),
:mod:`~nmt.serve.forced` (forced decoding: per-token log-probabilities, attention per
head, searches continuing a forced prefix), :mod:`~nmt.serve.registry` (the models given
on the command line, their facts and bounded queues), :mod:`~nmt.serve.decode` (one
model's answer to a translate request), :mod:`~nmt.serve.testsets` and
:mod:`~nmt.serve.studies` (example sentences and study reports), :mod:`~nmt.serve.app`
(the FastAPI routes) and :mod:`~nmt.serve.server` (uvicorn). The page is
``nmt/serve/static/``: plain HTML, JS and SVG, no build step, no CDN.

FastAPI and uvicorn come with the ``serve`` extra: ``pip install -e '.[serve]'``.
"""
