"""``nmt serve --workers N`` as a process manager would run it: SIGTERM to the parent alone
(what systemd, docker stop or ``kill PID`` send) stops every worker and frees the port.
Before the fix the parent died at once and its workers kept serving on the port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")

from serve_support import REPO, free_port, tiny_models

pytestmark = pytest.mark.slow  # starts nmt serve with two workers (torch imported three times)


def descendants(pid: int) -> set[int]:
    """The live descendants of ``pid`` (Linux /proc)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                text = (d / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            parents[int(d.name)] = int(text[text.rindex(")") + 2 :].split()[1])
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, parent in parents.items() if parent == p}
        found |= kids
        todo.extend(kids)
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] != "Z"


def wait_for_health(proc: subprocess.Popen[str], port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                return
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"nmt serve exited with {proc.returncode}") from None
            time.sleep(0.2)
    raise AssertionError(f"nmt serve did not answer /api/health in {seconds:g} s")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_sigterm_to_the_parent_stops_every_worker_and_frees_the_port(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    models = tiny_models(tmp_path_factory)
    port = free_port()
    cmd = [sys.executable, "-m", "nmt", "serve", "--workers", "2", "--threads", "1"]
    cmd += ["--device", "cpu", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--model", f"additive={models['additive']}", "--model", f"none={models['none']}"]
    # a session of its own: whatever the test leaves is killed as a group at the end
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, text=True)
    try:
        wait_for_health(proc, port, 300)
        # the health answer may come before the second worker is in: wait for both
        deadline = time.monotonic() + 120
        while len(workers := descendants(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(workers) >= 2, f"expected 2 workers, found {sorted(workers)}"
        os.kill(proc.pid, signal.SIGTERM)  # the parent alone, as kill PID does
        code = proc.wait(60)
        deadline = time.monotonic() + 15
        while (left := [p for p in workers if running(p)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, f"workers {left} survive the parent's SIGTERM"
        assert code == 128 + signal.SIGTERM, code
        with socket.socket() as s:  # free: bindable as nmt serve binds it
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen(1)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)
