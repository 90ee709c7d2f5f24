"""A kill costs at most the work since the last checkpoint and never locks a run
(shared/cases NMT-20, NMT-46): ``nmt train`` is SIGKILLed at every point where it writes
a file (each ``os.fsync``, the moment a temporary file or a record is written but not yet
in place), each time in a fresh run directory, then resumed with ``--resume`` (following
the advice of any message). After each: the resumed run ends like the uninterrupted one
(same validation records, same weights, same files), no temporary file is left, and no
message ends the run or sends the user elsewhere.

The kill is made inside the training process (a wrapper around ``os.fsync`` that SIGKILLs
its own process at the named write point), so it lands at exactly one write point every
time, unlike a kill from outside that races the write (the cases' kill_during_save.py).
Every run is a process forked from one server that imported nmt and trained once to
warm up, so a run costs its training (about a second), not torch's start. The corpus is
the cases' toy corpus (tests/fixtures/toy16), the model tiny, two training steps."""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO

TOY16 = Path(__file__).resolve().parent / "fixtures" / "toy16"
RUN_TIMEOUT_S = 600  # one training of two tiny steps, on a loaded machine

# The server: reads one JSON request a line ({"args", "kill_at", "err"}), forks a child that
# runs nmt's CLI with those args and its stderr in the file "err", waits for it and answers
# {"rc": exit code, -9 when killed}. os.fsync SIGKILLs the child at the write point named
# "kill_at" ("FILE LINES": the file being written and the lines of valid_log.jsonl at that
# moment, the same in a resumed run as in the uninterrupted one); every write point is
# printed on stderr first. argv[1]: the arguments of a warm-up run made in the server.
SERVER = r"""
import json, os, re, signal, sys, traceback
kill_at, real_fsync = "", os.fsync
def fsync(fd):
    name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
    name = re.sub(r"^\.(.+)\.[a-z0-9_]{8}\.tmp$", r"\1", name)
    log = os.path.join(os.environ["NMT_RUN_DIR"], "valid_log.jsonl")
    lines = len(open(log).read().splitlines()) if os.path.exists(log) else 0
    point = f"{name} {lines}"
    print(f"write point: {point}", file=sys.stderr, flush=True)
    if point == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    real_fsync(fd)
os.fsync = fsync
from nmt.cli.app import main
def run(args):
    sys.argv = ["nmt", *args]
    try:
        main()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0
replies = os.fdopen(os.dup(1), "w")
quiet = os.open(os.devnull, os.O_WRONLY)
os.dup2(quiet, 1)
os.dup2(quiet, 2)
if run(json.loads(sys.argv[1])) != 0:
    sys.exit(3)
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(err, 2)
        kill_at = req["kill_at"]
        code = run(req["args"])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
    replies.flush()
"""


def _config(tmp: Path) -> Path:
    path = tmp / "toy.yaml"
    path.write_text(
        json.dumps(
            {
                "name": "k",
                "data": {
                    "source": "dir",
                    "path": str(TOY16),
                    "train_split": "train",
                    "valid_split": "dev",
                    "test_splits": ["dev"],
                },
                "subwords": {"vocab_size": 64, "model_type": "unigram"},
                "model": {
                    "emb_dim": 8,
                    "enc_hidden": 8,
                    "dec_hidden": 16,
                    "attn_dim": 8,
                    "output_dim": 8,
                    "dropout": 0.3,
                    "attention": "additive",
                },
                "train": {
                    "batch_size": 4,
                    "max_epochs": 1,
                    "max_steps": 2,
                    "valid_every_steps": 1,
                    "keep_checkpoints": 1,
                    "threads": 1,
                    "device": "cpu",
                    "precision": "fp32",
                    "progress": False,
                    "seed": 1,
                    "patience": None,
                    "out_dir": str(tmp / "runs" / "{name}"),
                },
                "search": {"beam_size": 2, "valid_beam_size": 1, "precision": "fp32"},
            }
        )
    )
    return path


class _Trainer:
    """``nmt train CONFIG`` runs forked from one warm server (see ``SERVER``)."""

    def __init__(self, config: Path):
        self.config, self.err = config, config.parent / "stderr.txt"
        env = dict(os.environ, OMP_NUM_THREADS="1", NMT_RUN_DIR=str(config.parent / "runs" / "k"))
        warm = ["train", str(config), "name=warm"]  # another run directory: runs/warm
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, json.dumps(warm)],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def __call__(self, kill_at: str, *extra: str) -> tuple[int, str]:
        """(exit code, -9 when killed; stderr) of ``nmt train CONFIG [extra]``."""
        req = {
            "args": ["train", str(self.config), *extra],
            "kill_at": kill_at,
            "err": str(self.err),
        }
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], RUN_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            pytest.fail(
                f"nmt train {' '.join(extra)} (kill at {kill_at!r}): no answer in "
                f"{RUN_TIMEOUT_S} s or the server died (rc {self.proc.returncode})"
            )
        return json.loads(line)["rc"], self.err.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the server and a child it forked
        self.proc.wait()


@pytest.fixture
def trainer(tmp_path):
    t = _Trainer(_config(tmp_path))
    yield t
    t.close()


def _records(out: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("elapsed_s", "run_id")}
        for line in (out / "valid_log.jsonl").read_text().splitlines()
    ]


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def _run_files(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if "set_aside" not in p.name)


def test_a_kill_at_every_write_resumes_exactly_and_leaves_nothing(trainer, tmp_path):
    """A fresh run killed at each write point of the uninterrupted run in turn, then
    resumed to its end: the same records, weights and files as the uninterrupted run."""
    out = tmp_path / "runs" / "k"
    rc, said = trainer("")
    assert rc == 0, said[-2000:]
    points = [
        x.removeprefix("write point: ") for x in said.splitlines() if x.startswith("write point: ")
    ]
    names = {p.split()[0] for p in points}
    assert {"config.yaml", "valid_log.jsonl", "best.pt", "last.pt", "summary.json"} <= names
    assert len(set(points)) == len(points), points  # each names one moment of the run
    expected, weights, files = _records(out), _weights(out / "last.pt"), _run_files(out)
    for point in points:
        shutil.rmtree(out)
        rc, said = trainer(point)
        assert rc == -9, (point, said[-2000:])  # killed there, after no error
        assert "Traceback" not in said and "error:" not in said, (point, said[-2000:])
        stale = sorted(p.name for p in out.glob(".*.tmp"))
        rc, more = trainer("", "--resume")
        said = more
        if rc == 2 and "this run has not started; drop --resume" in more:
            rc, more = trainer("")  # killed before any record: the advice works
            said += more
        context = (point, said[-2000:])
        assert rc == 0, context
        # no error but the one whose advice was followed
        assert "Traceback" not in said and "error:" not in more, context
        if stale:  # the kill's temporary file is removed, and said so
            assert f"removed {len(stale)} temporary file(s)" in said, context
        assert not list(out.rglob("*.tmp")), context
        assert _run_files(out) == files, context
        assert _records(out) == expected, context
        got = _weights(out / "last.pt")
        assert all(torch.equal(got[n], weights[n]) for n in weights), context
