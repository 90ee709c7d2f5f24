"""A bounded load test of ``nmt serve`` on loopback: 200 requests at concurrency 8 (one
test sentence each) against a live uvicorn server with a tiny model. No request may fail;
the p50/p95 latency and the sentences/s are compared with the Translator that
``nmt translate`` runs, on the same lines (written to ``$NMT_SERVE_LOAD_OUT`` when set;
docs/serve.md has the numbers of real models)."""

from __future__ import annotations

import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")
httpx = pytest.importorskip("httpx", reason="the load test's client is httpx (the dev extra)")

from serve_support import build_app, live_server, tiny_models  # noqa: E402

from conftest import MULTI30K  # noqa: E402

pytestmark = pytest.mark.slow  # every test here trains or serves a model

REQUESTS, CONCURRENCY = 200, 8


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile (0-100) of xs, nearest rank."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))]


def test_200_requests_at_concurrency_8_without_errors(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from nmt.data.corpus import read_lines
    from nmt.inference.translator import Translator

    models = tiny_models(tmp_path_factory)
    lines = [x for x in read_lines(MULTI30K / "test_2016_flickr.de.gz") if x.strip()][:REQUESTS]
    assert len(lines) == REQUESTS
    app = build_app(models, ids=["additive"])
    with live_server(app) as url, httpx.Client(base_url=url, timeout=300) as client:

        def one(line: str) -> tuple[int, float, dict[str, Any]]:
            start = time.perf_counter()
            r = client.post("/api/translate", json={"lines": [line], "beam": 1})
            return r.status_code, time.perf_counter() - start, r.json()

        assert one(lines[0])[0] == 200  # warm
        start = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            answers = list(pool.map(one, lines))
        wall = time.perf_counter() - start
    codes = [a[0] for a in answers]
    assert codes == [200] * REQUESTS, {c: codes.count(c) for c in set(codes)}
    latency = [a[1] * 1000 for a in answers]
    texts = [a[2]["results"][0]["lines"][0]["text"] for a in answers]
    # the same lines through nmt translate's Translator (greedy, one thread, batches of 64)
    translator = Translator.from_checkpoint(models["additive"], "cpu", threads=1)
    from nmt.inference.translate import Decoding

    greedy = Decoding(beam_size=1, precision="fp32", max_ratio=translator.decoding.max_ratio)
    start = time.perf_counter()
    batch = translator.translate(lines, greedy)
    batch_wall = time.perf_counter() - start
    same = sum(t == b.text for t, b in zip(texts, batch, strict=True))
    report = {
        "requests": REQUESTS,
        "concurrency": CONCURRENCY,
        "errors": 0,
        "p50_ms": round(percentile(latency, 50), 1),
        "p95_ms": round(percentile(latency, 95), 1),
        "mean_ms": round(statistics.mean(latency), 1),
        "serve_sentences_per_s": round(REQUESTS / wall, 1),
        "translate_sentences_per_s": round(REQUESTS / batch_wall, 1),
        "same_text_as_translate": same,
        "cpu_count": os.cpu_count(),
    }
    print("nmt serve load test:", json.dumps(report))
    if os.environ.get("NMT_SERVE_LOAD_OUT"):
        Path(os.environ["NMT_SERVE_LOAD_OUT"]).write_text(json.dumps(report, indent=1) + "\n")
    # one line per request is searched alone, the Translator's lines in batches: the texts
    # agree up to fp32 rounding of different batch shapes
    assert same >= REQUESTS * 0.95
    assert report["p95_ms"] >= report["p50_ms"] > 0
