"""Real-model measurements of ``nmt serve`` (docs/serve.md): the README's screenshot, and a
load test of 200 requests at concurrency 8 against ``nmt translate`` on the same lines.

    .venv/bin/python benchmarks/serve/run_real.py ADDITIVE.pt NONE.pt [--skip-load] [--skip-shots]

Starts ``nmt serve`` as a subprocess (one torch thread) with the two checkpoints and
reports/deen_long_study, drives the page in the system's chromium for the screenshots
(results/serve/*.png), then sends the first 200 lines of test_2016_flickr, one per
request, 8 at a time, to the attention model with its default decoding, and translates
the same lines with ``nmt translate`` (one thread; its wall time includes loading).
Writes results/serve/load.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "results" / "serve"
DATA = REPO.parent / "shared" / "data" / "multi30k"
SRC = (
    "Eine Frau mit einem roten Hut sitzt am Ufer des Flusses und liest ein Buch, "
    "während zwei kleine Hunde im Gras spielen."
)
REF = (
    "A woman in a red hat sits on the bank of the river reading a book while two small "
    "dogs play in the grass."
)


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))]


def start_server(additive: str, none: str, port: int) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "nmt",
        "serve",
        "--model",
        f"additive={additive}",
        "--model",
        f"none={none}",
        "--study",
        "reports/deen_long_study",
        "--threads",
        "1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"})
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.kill()
    raise RuntimeError("nmt serve did not start")


def screenshots(url: str) -> None:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = b.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(600_000)
        q = urllib.parse.urlencode(
            {"src": SRC, "ref": REF, "models": "additive,none", "beam": 5, "nbest": 2}
        )
        page.goto(f"{url}/?{q}")
        page.wait_for_selector("body[data-ready='1']")
        page.hover(".pane[data-model=additive] .tgt-word[data-t='4']")
        page.screenshot(path=str(OUT / "serve_side_by_side.png"), full_page=False)
        q = urllib.parse.urlencode(
            {
                "tab": "study",
                "study": "deen_long_study",
                "sset": "test_2016_flickr_joined",
                "src": SRC,
                "models": "additive,none",
                "beam": 1,
                "nbest": 1,
            }
        )
        page.goto(f"{url}/?{q}")
        page.wait_for_selector(".study-line")
        page.click(".bucket-hit[data-bucket='41-50']")
        page.wait_for_selector(".bucket-row")
        page.screenshot(path=str(OUT / "serve_study.png"), full_page=True)
        b.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(url: str, additive: str, pid: int) -> dict[str, object]:
    sys.path.insert(0, str(REPO))
    from nmt.data.corpus import read_lines

    lines = [x for x in read_lines(DATA / "test_2016_flickr.de.gz") if x.strip()][:200]
    with httpx.Client(base_url=url, timeout=600) as client:

        def one(line: str) -> tuple[int, float, str]:
            t = time.perf_counter()
            r = client.post("/api/translate", json={"lines": [line], "models": ["additive"]})
            text = r.json()["results"][0]["lines"][0]["text"]
            return r.status_code, time.perf_counter() - t, text

        one(lines[0])
        t, cpu = time.perf_counter(), cpu_seconds(pid)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(one, lines))
        wall, serve_cpu = time.perf_counter() - t, cpu_seconds(pid) - cpu
    errors = sum(a[0] != 200 for a in answers)
    lat = [a[1] * 1000 for a in answers]
    src = OUT / "load_lines.de"
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    import resource

    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nmt",
            "translate",
            additive,
            "-i",
            str(src),
            "-o",
            str(OUT / "load_lines.en"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    cli_wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert r.returncode == 0, r.stderr
    cli = (OUT / "load_lines.en").read_text(encoding="utf-8").splitlines()
    same = sum(a[2] == c for a, c in zip(answers, cli, strict=True))
    import torch

    from nmt.inference.translator import Translator

    torch.set_num_threads(1)
    translator = Translator.from_checkpoint(additive, "cpu", threads=1)
    t, cpu = time.perf_counter(), time.process_time()
    translator.translate(lines)
    batch_wall, batch_cpu = time.perf_counter() - t, time.process_time() - cpu
    src.unlink()
    (OUT / "load_lines.en").unlink()
    return {
        "requests": len(lines),
        "concurrency": 8,
        "errors": errors,
        "p50_ms": round(percentile(lat, 50), 1),
        "p95_ms": round(percentile(lat, 95), 1),
        "serve_sentences_per_s": round(len(lines) / wall, 2),
        "serve_cpu_ms_per_sentence": round(1000 * serve_cpu / len(lines), 1),
        "translate_cpu_ms_per_sentence_with_loading": round(1000 * cli_cpu / len(lines), 1),
        "translate_cpu_ms_per_sentence_in_process": round(1000 * batch_cpu / len(lines), 1),
        "translate_wall_s_with_loading": round(cli_wall, 1),
        "translate_sentences_per_s_with_loading": round(len(lines) / cli_wall, 2),
        "translate_sentences_per_s_in_process": round(len(lines) / batch_wall, 2),
        "same_text_as_translate": same,
        "load_average_before": os.getloadavg(),
    }


def main() -> None:
    additive, none = sys.argv[1], sys.argv[2]
    port = 8765
    proc = start_server(additive, none, port)
    try:
        url = f"http://127.0.0.1:{port}"
        if "--skip-shots" not in sys.argv:
            screenshots(url)
        if "--skip-load" not in sys.argv:
            report = load(url, additive, proc.pid)
            (OUT / "load.json").write_text(json.dumps(report, indent=1) + "\n")
            print(json.dumps(report))
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
