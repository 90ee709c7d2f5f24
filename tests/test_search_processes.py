"""Search in forked worker processes (nmt/inference/search_processes.py): the same output
as threads, a fresh fork after the model changes, errors reach the caller, bad splits are
refused with the option's name."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import cast

import pytest
import torch
from typer.testing import CliRunner

from nmt.data.vocab import Vocab
from nmt.inference.search_processes import ProcessSearchError, SearchProcesses, check_processes
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator

from conftest import TOY_PAIRS, tiny_model

Vocabs = tuple[Vocab, Vocab]
LINES = [s for s, _ in TOY_PAIRS] * 3 + ["ein mann", "", "zwei katzen schlafen im schnee ."]


def _same(a, b) -> None:
    assert [t.source for t in b] == [t.source for t in a]
    for x, y in zip(a, b, strict=True):
        assert (x.text, x.tgt_pieces, x.nbest, x.complete) == (
            y.text,
            y.tgt_pieces,
            y.nbest,
            y.complete,
        )
        assert x.score == y.score  # searched alone either way: the very same numbers
        if x.attention is None:
            assert y.attention is None
        else:
            assert isinstance(y.attention, torch.Tensor)
            torch.testing.assert_close(x.attention, y.attention, rtol=0, atol=0)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("beam", [1, 3])
def test_processes_translate_as_threads_do(toy_vocabs: Vocabs, precision, beam):
    model = tiny_model(*toy_vocabs).eval()
    dec = Decoding(beam_size=beam, n_best=beam, precision=precision)
    threads = torch.get_num_threads()
    kw = dict(decoding=dec, threads=2, workers=2, batch_size=2)
    ref = Translator(model, *toy_vocabs, **kw).translate(LINES)  # type: ignore[arg-type]
    forked = Translator(model, *toy_vocabs, processes=True, **kw)  # type: ignore[arg-type]
    _same(ref, forked.translate(LINES))
    _same(ref, forked.translate(LINES))  # the same children, a second time
    assert torch.get_num_threads() == threads
    peaks = forked.search_process_peaks_mib()
    assert 1 <= len(peaks) <= 2 and all(p > 10 for p in peaks)  # torch alone takes more
    assert Translator(model, *toy_vocabs, **kw).search_process_peaks_mib() == []  # type: ignore[arg-type]


def test_a_changed_model_is_forked_anew(toy_vocabs: Vocabs):
    model = tiny_model(*toy_vocabs).eval()
    forked = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=2, processes=True)
    before = forked.translate(LINES)
    first = forked._forks
    with torch.no_grad():  # as an optimizer step changes it: in place, version counter moved
        model.generator.bias.add_(torch.linspace(-3, 3, model.generator.bias.numel()))
    after = forked.translate(LINES)
    assert forked._forks is not first
    ref = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=2).translate(LINES)
    _same(ref, after)
    assert [t.text for t in after] != [t.text for t in before]  # the change was seen


def _failing_search(model, src, src_len, decoding):
    """The Translator's search, failing on a batch of one line (module level: the search
    processes receive it pickled, by name)."""
    import nmt.inference.translator

    if src.size(0) == 1:
        raise RuntimeError("batch of one failed")
    return nmt.inference.translator._search(model, src, src_len, decoding)


def test_an_error_in_a_child_reaches_the_caller(toy_vocabs: Vocabs, monkeypatch):
    import nmt.inference.translator

    monkeypatch.setattr(nmt.inference.translator, "_search", _failing_search)
    model = tiny_model(*toy_vocabs).eval()
    forked = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=4, processes=True)
    with pytest.raises(RuntimeError, match="batch of one failed"):
        forked.translate(LINES[:5])  # batches of 4 and 1
    failed = forked._forks
    # the failed children were stopped; the next call (two batches) starts new ones
    assert len(forked.translate(LINES[:8])) == 8
    assert forked._forks is not failed


def test_check_processes_refuses_what_cannot_run(monkeypatch):
    check_processes(torch.device("cpu"))
    with pytest.raises(ProcessSearchError, match="for the CPU, not cuda"):
        check_processes(torch.device("cuda"))
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    with pytest.raises(ProcessSearchError, match="'forkserver' start method"):
        check_processes(torch.device("cpu"))


def test_more_workers_than_threads_still_run_one_thread_each(toy_vocabs: Vocabs):
    model = tiny_model(*toy_vocabs).eval()
    ref = Translator(model, *toy_vocabs, threads=1, workers=1, batch_size=2).translate(LINES)
    forked = Translator(model, *toy_vocabs, threads=1, workers=3, batch_size=2, processes=True)
    _same(ref, forked.translate(LINES))


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (no longer exists, or a zombie not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_ctrl_c_terminates_the_children_at_once(toy_vocabs: Vocabs, monkeypatch):
    # left to finish their batch, idle children outlived a second Ctrl-C at exit and the
    # interpreter waited on them forever
    import nmt.inference.search_processes as sp

    model = tiny_model(*toy_vocabs).eval()
    forked = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=2, processes=True)
    forked.translate(LINES)  # forks the children and records their ids
    pids = list(cast(sp.SearchProcesses, forked._forks).peak_mib)

    def interrupted(nbest):
        raise KeyboardInterrupt

    monkeypatch.setattr(sp, "_from_wire", interrupted)
    with pytest.raises(KeyboardInterrupt):
        forked.translate(LINES)
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids and all(_gone(p) for p in pids)


@pytest.mark.parametrize("signal_first", [False, True])
def test_ctrl_c_while_the_children_start_ends_them_before_returning(
    toy_vocabs: Vocabs, monkeypatch, signal_first
):
    """A Ctrl-C in the second it takes the workers to start left them to the interpreter's
    exit, where one still unpickling its queues printed a FileNotFoundError traceback.
    signal_first: a real SIGINT as the start begins, held until every child is in the
    pool's table (one forked but not yet listed outlived the command), then raised; else a
    KeyboardInterrupt right after the start."""
    import os
    import signal

    import nmt.inference.search_processes as sp

    real, pids = sp._start_all, cast(list[int], [])

    def interrupted(pool, workers):
        if signal_first:
            os.kill(os.getpid(), signal.SIGINT)
        real(pool, workers)
        pids.extend(p.pid for p in pool._processes.values())
        if not signal_first:
            raise KeyboardInterrupt

    monkeypatch.setattr(sp, "_start_all", interrupted)
    model = tiny_model(*toy_vocabs).eval()
    forked = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=2, processes=True)
    with pytest.raises(KeyboardInterrupt):
        forked.translate(LINES)
    # waited for: gone when the exception arrives, not some time later
    assert len(pids) == 2 and all(_gone(p) for p in pids)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_fork_server_ignores_ctrl_c_while_it_imports_torch():
    """A terminal's Ctrl-C reaches the fork server too, and Python's server ignores SIGINT
    only after its preload: one arriving while it imported torch killed it with a
    traceback. Here the SIGINT comes as search_processes (torch, nmt) starts importing."""
    import subprocess
    import sys

    from nmt.inference import search_processes

    script = (
        "import os, signal, sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'nmt.inference.search_processes':\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "import nmt.inference.forkserver_preload\n"
        "print('imported')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "imported\n", r.stderr
    # and it is the server's preload
    assert '"nmt.inference.forkserver_preload"' in Path(search_processes.__file__).read_text()


def test_cli_refuses_processes_without_forkserver(monkeypatch):
    from nmt.cli.app import app

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    for command in ("translate", "evaluate"):
        args = [command, "deen-additive", "--processes", "--device", "cpu"]
        res = CliRunner().invoke(
            app, args + (["-i", "/dev/null"] if command == "translate" else [])
        )
        assert res.exit_code == 2, res.output
        lines = [line for line in res.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "--processes needs the 'forkserver' start method" in lines[0], (
            res.output
        )


@pytest.mark.slow
def test_two_ctrl_c_end_nmt_translate_with_its_children(tmp_path):
    # a second Ctrl-C during the interpreter's exit once left the parent waiting forever on
    # idle children; now the first terminates them
    import os
    import signal
    import subprocess
    import sys

    src = tmp_path / "in.de"
    src.write_text("ein mann mit einem roten hut fährt fahrrad auf der straße .\n" * 4000)
    cmd = [sys.executable, "-m", "nmt", "translate", "deen-additive", "-i", str(src)]
    cmd += ["-o", str(tmp_path / "out.en"), "--device", "cpu", "--precision", "fp32"]
    proc = subprocess.Popen(
        [*cmd, "--beam", "5", "--processes", "--workers", "2"],
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not _children(proc.pid) and time.monotonic() < deadline:  # searching
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        children = _children(proc.pid)
        assert children, "no search process was forked"
        for _ in range(2):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.1)
        proc.wait(timeout=30)
        # the fork server and the resource tracker see the command's end on their pipes
        deadline = time.monotonic() + 10
        while not all(_gone(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(p) for p in children)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _children(pid: int) -> list[int]:
    """The process ids of ``pid``'s children (Linux /proc)."""
    path = f"/proc/{pid}/task/{pid}/children"
    try:
        with open(path, encoding="utf-8") as f:
            return [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []


def test_close_ends_the_search_processes_and_a_later_call_starts_new_ones(toy_vocabs: Vocabs):
    # commands close their Translator, so that no process is left to the interpreter's exit
    model = tiny_model(*toy_vocabs).eval()
    forked = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=2, processes=True)
    before = forked.translate(LINES)
    pids = list(cast(SearchProcesses, forked._forks).peak_mib)
    forked.close()
    assert pids and all(_gone(p) for p in pids)  # waited for: gone on return
    _same(before, forked.translate(LINES))
    forked.close()
    forked.close()  # idempotent
