"""Screenshot of ``nmt serve``'s page with the shipped pair on a long joined source (issue 50,
item 6): the heatmap and the fixed-vector panel on a 60-word German sentence, full page.

    .venv/bin/python benchmarks/serve/long_input_shot.py [--out results/serve/long_input]

Starts ``nmt serve`` (no ``--model``: the shipped models/deen-additive and models/deen-none)
on a free loopback port with one torch thread, opens the page in the system's chromium with
the sentence in its URL (beam 5, the models' own length penalties) and writes
``serve_long_60_words_shipped.png`` and ``answer.json`` (the translate answer the page showed)
to ``--out``. Needs Debian's chromium (/usr/bin/chromium) and Playwright's Python package.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
# four joined test-style captions, 60 words (the Playwright test's LONG60)
SOURCE = (
    "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt das große Fenster "
    "eines alten Hauses. Zwei Hunde spielen im Schnee vor dem Haus und "
    "jagen einen roten Ball. Eine Frau mit einem grünen Hut sitzt auf einer Bank im Park "
    "und liest ein dickes Buch. Drei Kinder laufen lachend über die Wiese zu ihrer "
    "Mutter, die wartet."
)


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], limit_s: float = 120.0) -> None:
    """Wait until ``/api/health`` answers. Raises RuntimeError: the server exited or the
    limit passed."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            raise RuntimeError(f"nmt serve exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"{url}/api/health", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"nmt serve not ready after {limit_s:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "results" / "serve" / "long_input")
    ap.add_argument("--data-path", default=str(REPO.parent / "shared" / "data" / "multi30k"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "nmt", "serve", "--port", str(port), "--threads", "1"]
    cmd += ["--data-path", args.data_path]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    try:
        wait_ready(url, proc)
        query = urllib.parse.urlencode({"src": SOURCE, "models": "additive,none", "beam": 5})
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            with page.expect_response("**/api/translate", timeout=120_000) as resp:
                page.goto(f"{url}/?{query}")
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            answer = resp.value.json()
            shot = args.out / "serve_long_60_words_shipped.png"
            page.screenshot(path=str(shot), full_page=True)
            browser.close()
        # plain JSON: a .gz under results/ is taken for a file of translations
        (args.out / "answer.json").write_text(
            json.dumps(answer, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        words = len(SOURCE.split())
        for r in answer["results"]:
            hyp = r["lines"][0]["hypotheses"][0]["text"]
            print(f"{r['model']}: {len(hyp.split())} words for {words}: {hyp}")
        print(f"wrote {shot}")
        return 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
