"""A bounded load test of ``nmt serve`` on loopback (docs/serve.md, "Load test (batching)").

    .venv/bin/python benchmarks/serve/load_test.py --model additive=A --model none=N \\
        [--checkout DIR] [--label new] [--requests 48] [--levels 1,4,8,16] \\
        [--max-seconds 180] [--beam 5] [--data FILE.de.gz] [--out results/serve/X.json] \\
        [-- SERVE ARGS]

Starts ``nmt serve`` from ``--checkout`` (default: this one; another checkout, e.g. git
main at an older commit in /tmp, is run with its own source first on ``PYTHONPATH`` and
as the working directory, under this Python) with one torch thread, on 127.0.0.1 only.
It sends the first ``--requests`` lines of ``--data`` (default test_2016_flickr, de), one
line per request, to every served model at ``--beam``: first at concurrency 1, which
gives each line's solo answer, then at each higher level. Per level it reports
throughput (sentences/s), p50/p95/p99 latency, the status codes other than 200 (a 429 is
a documented answer to overload, anything else an error), how many answers equal the solo
answer (text and pieces of every model's best hypothesis), the server's CPU seconds per
answered request (user + system of its process tree, from /proc: much less sensitive to
other load than the wall clock), the load average before and after, and where the server
has /metrics (the new one, one worker) per model the searches, their mean lines and their
seconds. A level stops
sending after ``--max-seconds``.

``--out X.json`` gets the run: the machine (CPU model, cores), the date, threads, load
averages at start and end, the served models as the server describes them (sha256,
decoding), the serve options and the per-level rows; ``X.requests.jsonl`` beside it one
row per request (level, line, status, latency, each model's best hypothesis), from
which benchmarks/serve/load_summary.py also checks the solo answers of two servers
against each other. The standard library is the only client dependency, so the script
runs under any checkout's Python.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import signal
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
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_head(checkout: Path) -> str | None:
    """``checkout``'s HEAD commit, ``+dirty`` when tracked files changed; None outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (the platform's processor string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and its descendants (Linux /proc), else None.

    A process that ended is no longer counted; the server's workers live as long as it."""
    proc = Path("/proc")
    if not (proc / str(pid)).is_dir():
        return None
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, seconds)
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            text = (d / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        # the command name, in parentheses, may hold spaces: split after its ')'
        fields = text[text.rindex(")") + 2 :].split()
        stats[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK)
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0.0))[1]
        todo.extend(c for c, (parent, _) in stats.items() if parent == p)
    return total


def post(url: str, body: dict[str, Any], timeout: float) -> tuple[int, float, Any]:
    """(status, seconds, JSON answer or None) of one POST; status -1: no HTTP answer."""
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
    checkout: Path, models: list[str], port: int, extra: list[str], threads: int = 1
) -> subprocess.Popen[bytes]:
    """``nmt serve`` of ``checkout`` on 127.0.0.1:``port``, ``threads`` torch threads.

    Raises:
        RuntimeError: the server exited, or did not answer /api/health in 15 minutes.
    """
    cmd = [
        sys.executable,
        "-m",
        "nmt",
        "serve",
        "--threads",
        str(threads),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--device",
        "cpu",
        *sum((["--model", m] for m in models), []),
        *extra,
    ]
    # cwd and PYTHONPATH: the checkout's own nmt before the one installed in this venv
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(checkout)}
    # its own process group: stop_server ends the --workers children too, also of an
    # older checkout, whose parent died on SIGTERM without stopping them
    proc = subprocess.Popen(cmd, cwd=checkout, env=env, start_new_session=True)
    for _ in range(900):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"nmt serve of {checkout} exited with {proc.returncode}"
                ) from None
            time.sleep(1)
    stop_server(proc)
    raise RuntimeError(f"nmt serve of {checkout} did not start in 15 minutes")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (its workers included), SIGKILL to what is
    left of it after 15 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the group is gone
            break
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            proc.poll()  # reap the leader, else it stays a zombie of the group
            time.sleep(0.2)
        else:
            continue
        break
    proc.wait(30)


def served_models(base: str) -> list[dict[str, Any]]:
    """What GET /api/models says of each model that the comparison depends on."""
    with urllib.request.urlopen(f"{base}/api/models", timeout=30) as r:
        got = json.loads(r.read())
    keep = ("id", "name", "checkpoint", "sha256", "attention", "parameters", "decoding")
    return [{k: m.get(k) for k in keep} for m in got.get("models", [])]


def batch_metrics(base: str) -> dict[str, float] | None:
    """The new server's ``nmt_serve_batch_lines`` and ``nmt_serve_search_seconds`` sums and
    counts per model from GET /metrics (``"NAME_sum{model=\"m\"}"`` -> value); None where
    there is no /metrics (the old server)."""
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=30) as r:
            text = r.read().decode()
    except OSError:
        return None
    keep = (
        "nmt_serve_batch_lines_sum",
        "nmt_serve_batch_lines_count",
        "nmt_serve_search_seconds_sum",
    )
    got = {}
    for line in text.splitlines():
        if line.startswith(keep):
            name, _, value = line.rpartition(" ")
            got[name] = float(value)
    return got


def batch_row(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, Any]:
    """Per model, over one level: searches, mean lines per search, search seconds."""
    if before is None or after is None:
        return {}
    out: dict[str, Any] = {}
    for key, value in after.items():
        if not key.startswith("nmt_serve_batch_lines_count"):
            continue
        model = key[key.index("{") :]
        n = value - before.get(key, 0.0)
        lines = after[f"nmt_serve_batch_lines_sum{model}"] - before.get(
            f"nmt_serve_batch_lines_sum{model}", 0.0
        )
        search = after.get(f"nmt_serve_search_seconds_sum{model}", 0.0) - before.get(
            f"nmt_serve_search_seconds_sum{model}", 0.0
        )
        name = model.split('"')[1] if '"' in model else model
        out[name] = {
            "searches": int(n),
            "mean_lines": round(lines / n, 2) if n else None,
            "search_s": round(search, 2),
        }
    return out


def best(answer: Any) -> list[Any] | None:
    """Per model [model, text, pieces] of the best hypothesis: what must equal the solo answer."""
    if answer is None:
        return None
    return [
        [r["model"], r["lines"][0]["text"], r["lines"][0]["tgt_pieces"]] for r in answer["results"]
    ]


def level(
    url: str,
    lines: list[str],
    body: dict[str, Any],
    concurrency: int,
    max_seconds: float,
    solo: list[Any] | None,
    server_pid: int,
    base: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Send every line at ``concurrency``: the level's row, and one raw row per request
    (``answer``: its best(), None when not answered 200). ``base``: the server's URL, to read
    its batch metrics before and after (None: not read, e.g. with several workers, whose
    /metrics is one worker's)."""
    stop = time.monotonic() + max_seconds
    start = time.perf_counter()

    def one(i: int) -> dict[str, Any]:
        if time.monotonic() > stop:
            return {"line": i, "status": 0, "sent_s": None, "ms": None, "answer": None}
        sent = time.perf_counter() - start
        status, seconds, answer = post(url, {**body, "lines": [lines[i]]}, timeout=max_seconds)
        return {
            "line": i,
            "status": status,
            "sent_s": round(sent, 4),
            "ms": round(seconds * 1000, 2),
            "answer": best(answer) if status == 200 else None,
        }

    metrics_before = batch_metrics(base) if base else None
    load_before = os.getloadavg()
    cpu_before = tree_cpu_seconds(server_pid)
    with ThreadPoolExecutor(concurrency) as pool:
        got = list(pool.map(one, range(len(lines))))
    wall = time.perf_counter() - start
    cpu_after = tree_cpu_seconds(server_pid)
    metrics_after = batch_metrics(base) if base else None
    ok = [g for g in got if g["status"] == 200]
    latency = [g["ms"] for g in ok]
    codes: dict[str, int] = {}
    for g in got:
        if g["status"] != 200:
            key = str(g["status"]) if g["status"] else "not_sent"
            codes[key] = codes.get(key, 0) + 1
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    row: dict[str, Any] = {
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
        "server_cpu_ms_per_request": round(1000 * cpu / len(ok), 1) if cpu and ok else None,
        "load_average_start": [round(x, 2) for x in load_before],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    batches = batch_row(metrics_before, metrics_after)
    if batches:
        row["batches"] = batches
    if solo is not None:
        pairs = [(g["answer"], s) for g, s in zip(got, solo, strict=True)]
        row["same_as_solo"] = sum(a is not None and a == s for a, s in pairs)
        row["compared"] = sum(a is not None and s is not None for a, s in pairs)
    for g in got:
        g["concurrency"] = concurrency
    return row, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", required=True, help="ID=CHECKPOINT or ID=FOLDER")
    ap.add_argument("--checkout", type=Path, default=REPO)
    ap.add_argument("--label", default="new")
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--max-seconds", type=float, default=180.0)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    ap.add_argument("--data", type=Path, default=DATA, help="source lines, .gz or plain")
    ap.add_argument("--out", type=Path, help="the run as JSON; X.requests.jsonl beside it")
    ap.add_argument("--commit", help="the checkout's commit, recorded (default: git's HEAD)")
    ap.add_argument("serve_args", nargs="*", help="more nmt serve options, after --")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    if levels[0] != 1:
        ap.error("--levels: the first level must be 1 (it gives the solo answers)")
    if not a.data.is_file():
        ap.error(f"--data: {a.data} is not a file (give the corpus' test_2016_flickr.de.gz)")
    models = [Path(m.partition("=")[2]).resolve() for m in a.model]
    specs = [f"{m.partition('=')[0]}={p}" for m, p in zip(a.model, models, strict=True)]
    opener = gzip.open if a.data.suffix == ".gz" else open
    with opener(a.data, "rt", encoding="utf-8") as f:
        lines = [x.strip() for x in f if x.strip()][: a.requests]
    meta: dict[str, Any] = {
        "label": a.label,
        "checkout": str(a.checkout.resolve()),
        "commit": a.commit or git_head(a.checkout),
        "started": now_utc(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "server_threads": a.threads,
        "python": sys.version.split()[0],
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "models": specs,
        "beam": a.beam,
        "data": str(a.data),
        "requests": len(lines),
        "max_seconds": a.max_seconds,
        "serve_args": a.serve_args,
    }
    port = free_port()
    proc = start_server(a.checkout.resolve(), specs, port, a.serve_args, a.threads)
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/api/translate"
    body = {"beam": a.beam, "models": [m.partition("=")[0] for m in a.model]}
    rows: list[dict[str, Any]] = []
    raw: list[dict[str, Any]] = []
    try:
        meta["served"] = served_models(base)
        for line in lines[:2]:  # warm: first allocations and caches
            post(url, {**body, "lines": [line]}, a.max_seconds)
        solo: list[Any] | None = None
        for c in levels:
            one_process = "--workers" not in a.serve_args
            row, got = level(
                url, lines, body, c, a.max_seconds, solo, proc.pid, base if one_process else None
            )
            if solo is None:  # concurrency 1: each request alone
                solo = [g["answer"] for g in got]
                row["same_as_solo"] = row["compared"] = sum(s is not None for s in solo)
            row["label"] = a.label
            rows.append(row)
            raw.extend(got)
            print(json.dumps(row), flush=True)
    finally:
        stop_server(proc)
    meta["ended"] = now_utc()
    meta["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
        with a.out.with_suffix(".requests.jsonl").open("w") as f:
            for g in raw:
                f.write(json.dumps({"label": a.label, **g}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
