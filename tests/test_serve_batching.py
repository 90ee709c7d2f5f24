"""``nmt serve``'s cross-request batching, deadlines and metrics, through FastAPI's
TestClient on the tiny models of tests/serve_support.py: concurrent requests batched
together answer what each gets alone, a request past ``--timeout`` is 503 and is never
searched once late, a client gone while queued is dropped before its search, and
``GET /metrics`` counts requests, queue depth, batch sizes and latencies."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx (the dev extra)")
pytest.importorskip("prometheus_client", reason="nmt serve's /metrics needs prometheus-client")

from fastapi.testclient import TestClient
from serve_support import LINES, build_app, tiny_models

pytestmark = pytest.mark.slow  # every test here trains or serves a model

MORE = [
    "Ein Junge springt ins Wasser.",
    "Zwei Männer stehen an einer Straße.",
    "Ein Hund läuft über eine grüne Wiese mit vielen Blumen.",
    "Eine Gruppe von Menschen sitzt an einem langen Tisch und isst zusammen.",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory)


def close(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON, floats within 1e-4 (fp32 search is batch-invariant within 1e-5, and
    the answer rounds); ``time_ms`` ignored."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            if k != "time_ms":
                close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= 1e-4, (path, a, b)
    else:
        assert a == b, (path, a, b)


def settled(client: TestClient, model: str) -> str:
    """/metrics once ``model``'s queue is empty (its jobs searched or dropped)."""
    for _ in range(600):
        text = client.get("/metrics").text
        if f'nmt_serve_queue_depth{{model="{model}"}} 0.0' in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"the queue of {model} did not empty")


@pytest.mark.parametrize("threads", [1, 2])
def test_batched_answers_equal_solo_answers(models: dict[str, Path], threads: int) -> None:
    """threads 2: the two models' searches run at once, one thread each."""
    bodies: list[dict[str, Any]] = [
        {"lines": [line], "beam": 3, "n_best": 2, "models": ["additive", "none"]}
        for line in LINES + MORE
    ]
    bodies[1]["lines"] = [MORE[0], LINES[1], MORE[3]]  # several lines in one request
    bodies[2]["top_k"] = 3  # alternatives for one request of the batch only
    bodies[3]["references"] = ["A dog runs."]
    bodies[4]["prefix"] = "A"  # a forced prefix: its own batch
    bodies[5]["models"] = ["none", "additive"]  # another order of models
    solo_app = build_app(models, ids=["additive", "none"], max_batch=1)
    with TestClient(solo_app) as solo:
        alone = [solo.post("/api/translate", json=b).json() for b in bodies]
    batched = build_app(
        models, ids=["additive", "none"], max_batch=32, wait_ms=300, threads=threads
    )
    with TestClient(batched) as client, ThreadPoolExecutor(len(bodies)) as pool:
        health = client.get("/api/health").json()
        assert (health["searches"], health["search_threads"]) == (threads, 1)
        answers = list(pool.map(lambda b: client.post("/api/translate", json=b), bodies))
        metrics = client.get("/metrics").text
    for a, s in zip(answers, alone, strict=True):
        assert a.status_code == 200, a.text
        close(a.json(), s)
    # the lines were searched together: fewer searches than (request, model) pairs
    searches = float(
        next(
            x
            for x in metrics.splitlines()
            if x.startswith('nmt_serve_batch_lines_count{model="additive"}')
        ).split()[-1]
    )
    assert searches < sum("additive" in b["models"] for b in bodies)


def test_a_request_past_its_deadline_is_503_and_not_searched(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import nmt.serve.batcher as serve_batcher

    real = serve_batcher.run_jobs
    release = threading.Event()
    searched: list[int] = []

    def slow(jobs: Any, threads: int, shared: bool = False) -> Any:
        searched.append(len(jobs))
        assert release.wait(60)
        return real(jobs, threads, shared)

    monkeypatch.setattr(serve_batcher, "run_jobs", slow)
    app = build_app(models, ids=["none"], max_batch=1, wait_ms=0, timeout_s=0.5)
    with TestClient(app) as client, ThreadPoolExecutor(2) as pool:
        first = pool.submit(client.post, "/api/translate", json={"lines": [LINES[0]]})
        while not searched:
            time.sleep(0.01)
        second = client.post("/api/translate", json={"lines": [LINES[1]]})  # queued behind
        release.set()
        r = first.result()
        metrics = settled(client, "none")  # the batcher reaches the second job, late

    for ans in (r, second):
        assert ans.status_code == 503, ans.text
        assert ans.json()["error"] == "timeout" and ans.headers["retry-after"] == "1"
        assert "results" not in ans.json()
    assert searched == [1]  # the second request was never searched
    assert 'nmt_serve_requests_total{route="/api/translate",status="503"} 2.0' in metrics
    assert 'nmt_serve_queue_depth{model="none"} 0.0' in metrics  # places given back


def test_a_client_gone_while_queued_is_dropped_before_its_search(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import starlette.requests

    import nmt.serve.batcher as serve_batcher

    real = serve_batcher.run_jobs
    release = threading.Event()
    searched: list[str] = []

    def slow(jobs: Any, threads: int, shared: bool = False) -> Any:
        searched.extend(p.lines[0] for p, _, _ in jobs)
        assert release.wait(60)
        return real(jobs, threads, shared)

    calls = {"n": 0}

    async def gone_later(self: Any) -> bool:  # connected at first, gone while queued
        if self.url.path == "/api/translate" and self.headers.get("x-leaves"):
            calls["n"] += 1
            return calls["n"] > 1
        return False

    monkeypatch.setattr(serve_batcher, "run_jobs", slow)
    monkeypatch.setattr(starlette.requests.Request, "is_disconnected", gone_later)
    app = build_app(models, ids=["none"], queue=2, max_batch=1, wait_ms=0)
    with TestClient(app) as client, ThreadPoolExecutor(2) as pool:
        first = pool.submit(client.post, "/api/translate", json={"lines": [LINES[0]]})
        while not searched:
            time.sleep(0.01)
        left = client.post("/api/translate", json={"lines": [LINES[1]]}, headers={"x-leaves": "1"})
        release.set()
        assert first.result().status_code == 200
        settled(client, "none")
        assert left.status_code == 499
        assert searched == [LINES[0]]  # the one that left was not searched
        # both places came back: queue 2 takes two more at once
        with ThreadPoolExecutor(2) as more:
            again = list(
                more.map(
                    lambda line: client.post("/api/translate", json={"lines": [line]}), LINES[:2]
                )
            )
        assert [a.status_code for a in again] == [200, 200]


def test_metrics_in_the_prometheus_text_format(models: dict[str, Path]) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    with TestClient(build_app(models, ids=["additive", "none"])) as client:
        assert client.post("/api/translate", json={"lines": LINES[:2]}).status_code == 200
        assert client.post("/api/translate", json={"lines": []}).status_code == 422
        assert client.get("/api/health").status_code == 200
        r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    requests = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in families["nmt_serve_requests"].samples
        if s.name.endswith("_total")
    }
    assert requests[("/api/translate", "200")] == 1
    assert requests[("/api/translate", "422")] == 1
    assert requests[("/api/health", "200")] == 1
    depth = {s.labels["model"]: s.value for s in families["nmt_serve_queue_depth"].samples}
    assert depth == {"additive": 0, "none": 0}
    for name in ("nmt_serve_batch_lines", "nmt_serve_queue_seconds", "nmt_serve_search_seconds"):
        counts = {
            s.labels["model"]: s.value for s in families[name].samples if s.name == f"{name}_count"
        }
        assert counts["additive"] >= 1 and counts["none"] >= 1, name
    lines = [
        s
        for s in families["nmt_serve_batch_lines"].samples
        if s.name == "nmt_serve_batch_lines_sum" and s.labels["model"] == "none"
    ]
    assert lines[0].value == 2  # the request's two lines in one search
