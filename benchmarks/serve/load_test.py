"""A bounded load test of ``nmt serve`` on loopback (docs/serve.md, "Load test").

    .venv/bin/python benchmarks/serve/load_test.py --model additive=A.pt --model none=N.pt \\
        [--checkout DIR] [--label new] [--requests 48] [--levels 1,4,8,16] \\
        [--max-seconds 180] [--beam 5] [--out results/serve/load_new.json] [-- SERVE ARGS]

Starts ``nmt serve`` from ``--checkout`` (default: this one; another checkout, e.g. git
main at an older commit in /tmp, is run with its own source first on ``PYTHONPATH``)
with one torch thread, on 127.0.0.1 only. It sends the first ``--requests`` lines of
test_2016_flickr (de), one line per request, to every served model at ``--beam``:
first at concurrency 1, which gives each line's solo answer, then at each higher level.
Per level it reports throughput (sentences/s), p50/p95/p99 latency, the status codes
other than 200 (a 429 is a documented answer to overload, anything else an error) and
how many answers equal the solo answer (text and pieces of every model's best
hypothesis). A level stops sending after ``--max-seconds``. The standard library is the
only client dependency, so the script runs under any checkout's Python.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "multi30k" / "test_2016_flickr.de.gz"


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile (0-100) of xs, nearest rank; nan for none."""
    s = sorted(xs)
    if not s:
        return float("nan")
    return s[max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, body: dict[str, Any], timeout: float) -> tuple[int, float, Any]:
    """(status, seconds, JSON answer or None) of one POST."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"content-type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            answer = json.loads(r.read())
            return r.status, time.perf_counter() - start, answer
    except urllib.error.HTTPError as e:
        return e.code, time.perf_counter() - start, None
    except OSError:
        return -1, time.perf_counter() - start, None


def start_server(
    checkout: Path, models: list[str], port: int, extra: list[str]
) -> subprocess.Popen[bytes]:
    """``nmt serve`` of ``checkout`` on 127.0.0.1:``port``, one torch thread."""
    cmd = [
        sys.executable,
        "-m",
        "nmt",
        "serve",
        "--threads",
        "1",
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--device",
        "cpu",
        *sum((["--model", m] for m in models), []),
        *extra,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(checkout)}
    proc = subprocess.Popen(cmd, cwd=checkout, env=env)
    for _ in range(900):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"nmt serve exited with {proc.returncode}") from None
            time.sleep(1)
    proc.kill()
    raise RuntimeError("nmt serve did not start in 15 minutes")


def best(answer: Any) -> list[Any] | None:
    """Per model (text, pieces) of the best hypothesis: what must equal the solo answer."""
    if answer is None:
        return None
    return [
        (r["model"], r["lines"][0]["text"], r["lines"][0]["tgt_pieces"]) for r in answer["results"]
    ]


def level(
    url: str,
    lines: list[str],
    body: dict[str, Any],
    concurrency: int,
    max_seconds: float,
    solo: list[Any] | None,
) -> tuple[dict[str, Any], list[Any]]:
    """Send every line at ``concurrency``; the level's row and each line's best()."""
    stop = time.monotonic() + max_seconds

    def one(line: str) -> tuple[int, float, Any]:
        if time.monotonic() > stop:
            return 0, 0.0, None  # not sent: past the level's time
        return post(url, {**body, "lines": [line]}, timeout=max_seconds)

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        got = list(pool.map(one, lines))
    wall = time.perf_counter() - start
    ok = [g for g in got if g[0] == 200]
    latency = [g[1] * 1000 for g in ok]
    codes: dict[str, int] = {}
    for g in got:
        if g[0] != 200:
            codes[str(g[0]) if g[0] else "not_sent"] = (
                codes.get(str(g[0]) if g[0] else "not_sent", 0) + 1
            )
    answers = [best(g[2]) for g in got]
    row = {
        "concurrency": concurrency,
        "requests": len(lines),
        "ok": len(ok),
        "codes": codes,
        "errors": sum(v for k, v in codes.items() if k not in ("429", "not_sent")),
        "sentences_per_s": round(len(ok) / wall, 2),
        "wall_s": round(wall, 1),
        "p50_ms": round(percentile(latency, 50), 1),
        "p95_ms": round(percentile(latency, 95), 1),
        "p99_ms": round(percentile(latency, 99), 1),
    }
    if solo is not None:
        row["same_as_solo"] = sum(
            a is not None and a == s for a, s in zip(answers, solo, strict=True)
        )
        row["compared"] = sum(
            a is not None and s is not None for a, s in zip(answers, solo, strict=True)
        )
    return row, answers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", required=True, help="ID=CHECKPOINT")
    ap.add_argument("--checkout", type=Path, default=REPO)
    ap.add_argument("--label", default="new")
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--max-seconds", type=float, default=180.0)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--out", type=Path)
    ap.add_argument("serve_args", nargs="*", help="more nmt serve options, after --")
    a = ap.parse_args()
    models = [Path(m.partition("=")[2]).resolve() for m in a.model]
    specs = [f"{m.partition('=')[0]}={p}" for m, p in zip(a.model, models, strict=True)]
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        lines = [x.strip() for x in f if x.strip()][: a.requests]
    port = free_port()
    proc = start_server(a.checkout.resolve(), specs, port, a.serve_args)
    url = f"http://127.0.0.1:{port}/api/translate"
    body = {"beam": a.beam, "models": [m.partition("=")[0] for m in a.model]}
    rows: list[dict[str, Any]] = []
    try:
        post(url, {**body, "lines": [lines[0]]}, a.max_seconds)  # warm
        solo: list[Any] | None = None
        for c in (int(x) for x in a.levels.split(",")):
            row, answers = level(url, lines, body, c, a.max_seconds, solo)
            if solo is None:  # concurrency 1: each request alone
                solo = answers
                row["same_as_solo"] = len(lines)
            row["label"] = a.label
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        proc.terminate()
        proc.wait(30)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps(
                {
                    "label": a.label,
                    "checkout": str(a.checkout),
                    "models": specs,
                    "beam": a.beam,
                    "rows": rows,
                    "serve_args": a.serve_args,
                    "load_average": os.getloadavg(),
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
