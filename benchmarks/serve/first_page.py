"""How long a new user waits for ``nmt serve``'s first page (issue 47's promise: from a fresh
clone, ``nmt serve`` with no arguments shows the shipped pair side by side within 30 s on a
2-core CPU).

    .venv/bin/python benchmarks/serve/first_page.py [CHECKOUT] [--out DIR] [--port N]

Starts ``CHECKOUT/.venv/bin/nmt serve --port N`` (no other argument; ``CHECKOUT`` defaults to
this repository, ``N`` to a free port) with ``CHECKOUT`` as the current directory, waits
for ``/api/health``, then opens the page in the system's chromium (Playwright with
``executable_path``; ``playwright install`` cannot work here; the browser is started
before the clock, as a user's is already open) and does what a user does:
clicks the first sentence of the page's example list, or, when the page lists none (no
local corpus: its note is recorded), types :data:`TYPED` and presses Translate. The clock
stops when every served model's pane shows its translation and the attention model's
heatmap is drawn.

Prints one JSON object (and writes ``DIR/first_page.json`` and ``DIR/first_page.png``):
``server_ready_s`` (process start to ``/api/health`` answering), ``first_translation_s``
(process start to both panes and the heatmap on screen), ``page_s`` (page opened to the
same), ``models`` (the panes, with their translations), the sentence and where it came
from, the server's log, CPU and load average. Not a test: one measurement, on whatever
else the machine is running (say so beside the result).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# the README's example when the page has no example list (no local corpus)
TYPED = "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster."
LIMIT_S = 300  # give up after this long: a broken start must not hang the harness


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def wait_ready(url: str, proc: subprocess.Popen[str], t0: float) -> float:
    """Seconds from ``t0`` until ``GET /api/health`` answers 200.

    Raises:
        RuntimeError: the server exited, or did not answer within :data:`LIMIT_S`."""
    while time.perf_counter() - t0 < LIMIT_S:
        if proc.poll() is not None:
            raise RuntimeError(f"nmt serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/api/health", timeout=2) as r:
                if r.status == 200:
                    return time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"nmt serve did not answer /api/health within {LIMIT_S} s")


def drive_page(browser: Any, url: str, shot: Path, t0: float) -> dict[str, Any]:
    """Open the page in ``browser``, translate one example sentence (or :data:`TYPED`),
    and time it from ``t0`` (the server's start) and from opening the page."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.set_default_timeout(LIMIT_S * 1000)
    t_open = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    # the example list is filled after the page says ready: wait for it or its note
    page.wait_for_function(
        "document.querySelector('#examples li') || "
        "document.querySelector('#examples-note').textContent",
        timeout=30_000,
    )
    note = page.locator("#examples-note").text_content() or ""
    if page.locator("#examples li").count():
        origin = (
            f"the page's example list (set {page.locator('#set').input_value()!r}, "
            "first line), clicked"
        )
        page.locator("#examples li").first.click()
    else:
        origin = "typed: the page lists no example"
        page.fill("#src", TYPED)
        page.click("#go")
    ids = page.locator("#model-boxes input:checked").evaluate_all("bs => bs.map(b => b.value)")
    for model in ids:
        page.wait_for_selector(f".pane[data-model='{model}'] .translation .tgt-word")
    attention = [
        m for m in ids if page.locator(f".pane[data-model='{m}'] .fixed-panel").count() == 0
    ]
    for model in attention:
        page.wait_for_selector(f".pane[data-model='{model}'] .heatmap svg")
    done = time.perf_counter()
    shown = {
        m: page.locator(f".pane[data-model='{m}'] .translation").inner_text().strip() for m in ids
    }
    source = page.locator("#src").input_value()
    page.screenshot(path=str(shot), full_page=False)
    return {
        "first_translation_s": round(done - t0, 2),
        "page_s": round(done - t_open, 2),
        "source": source,
        "sentence_from": origin,
        "examples_note": note,
        "models": ids,
        "heatmap_in": attention,
        "translations": shown,
    }


def main() -> None:
    args = sys.argv[1:]
    out = REPO / "results" / "serve" / "first_page"
    port = None
    if "--out" in args:
        i = args.index("--out")
        out = Path(args[i + 1])
        del args[i : i + 2]
    if "--port" in args:
        i = args.index("--port")
        port = int(args[i + 1])
        del args[i : i + 2]
    checkout = Path(args[0]).resolve() if args else REPO
    nmt = checkout / ".venv" / "bin" / "nmt"
    if not nmt.exists():
        sys.exit(f"{nmt} does not exist: run `bash scripts/setup.sh` in {checkout} first")
    out.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    log: list[str] = []
    with sync_playwright() as p:
        # the browser is up before the clock starts: a user's browser is already open
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [str(nmt), "serve", "--port", str(port)],
            cwd=checkout,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: log.extend(proc.stdout or []), daemon=True)
        reader.start()
        try:
            ready = wait_ready(url, proc, t0)
            result = drive_page(browser, url, out / "first_page.png", t0)
        finally:
            proc.terminate()
            proc.wait(30)
            reader.join(5)
            browser.close()
    report = {
        "command": f"cd {checkout} && .venv/bin/nmt serve --port {port}",
        "server_ready_s": round(ready, 2),
        **result,
        "server_log": [line.rstrip("\n") for line in log],
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (out / "first_page.json").write_text(
        json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
