"""A kill costs at most the work since the last checkpoint and never locks a run
(shared/cases NMT-20, NMT-46): ``nmt train`` is SIGKILLed at every point where it writes
a file (each ``os.fsync``, the moment a temporary file or a record is written but not yet
in place), then resumed with ``--resume``. After each: the resumed run ends like the
uninterrupted one (same validation records, same weights), no temporary file is left,
and no message ends the run or sends the user elsewhere.

The kill is made inside the child (a wrapper around ``os.fsync`` that SIGKILLs its own
process at the N-th call), so it lands at exactly one write point every time, unlike a
kill from outside that races the write (the cases' kill_during_save.py). The corpus is
the cases' toy corpus (tests/fixtures/toy16), the model tiny, two training steps."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from conftest import REPO

TOY16 = Path(__file__).resolve().parent / "fixtures" / "toy16"

# the child: nmt's CLI with os.fsync SIGKILLing the process at the write point named
# NMT_KILL_AT ("FILE LINES": the file being written and the lines of valid_log.jsonl at that
# moment, the same in a resumed run as in the uninterrupted one); every write point is
# printed on stderr first
CHILD = r"""
import os, re, signal, sys
kill_at, real_fsync = os.environ.get("NMT_KILL_AT", ""), os.fsync
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
sys.argv = ["nmt", *sys.argv[1:]]
from nmt.cli.app import main
main()
"""


def _config(tmp: Path) -> Path:
    path = tmp / "toy.yaml"
    path.write_text(json.dumps({
        "name": "k", "data": {"source": "dir", "path": str(TOY16), "train_split": "train",
                              "valid_split": "dev", "test_splits": ["dev"]},
        "subwords": {"vocab_size": 64, "model_type": "unigram"},
        "model": {"emb_dim": 8, "enc_hidden": 8, "dec_hidden": 16, "attn_dim": 8,
                  "output_dim": 8, "dropout": 0.3, "attention": "additive"},
        "train": {"batch_size": 4, "max_epochs": 1, "max_steps": 2, "valid_every_steps": 1,
                  "keep_checkpoints": 1, "threads": 1, "device": "cpu", "precision": "fp32",
                  "progress": False, "seed": 1, "patience": None,
                  "out_dir": str(tmp / "runs" / "{name}")},
        "search": {"beam_size": 2, "valid_beam_size": 1, "precision": "fp32"}}))
    return path


def _nmt(config: Path, kill_at: str, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NMT_KILL_AT=kill_at, OMP_NUM_THREADS="1",
               NMT_RUN_DIR=str(config.parent / "runs" / "k"))
    return subprocess.run([sys.executable, "-c", CHILD, "train", str(config), *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def _records(out: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed_s", "run_id")}
            for line in (out / "valid_log.jsonl").read_text().splitlines()]


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def test_a_kill_at_every_write_resumes_exactly_and_leaves_nothing(tmp_path):
    """One run killed at its first write point, resumed and killed at the next, and so on
    through every write point of the uninterrupted run; then resumed to its end."""
    config = _config(tmp_path)
    out = tmp_path / "runs" / "k"
    straight = _nmt(config, "")
    assert straight.returncode == 0, straight.stderr
    points = [x.removeprefix("write point: ") for x in straight.stderr.splitlines()
              if x.startswith("write point: ")]
    names = {p.split()[0] for p in points}
    assert {"config.yaml", "valid_log.jsonl", "best.pt", "last.pt", "summary.json"} <= names
    expected, weights = _records(out), _weights(out / "last.pt")
    files = sorted(p.name for p in out.iterdir())
    os.rename(out, tmp_path / "runs" / "straight")
    for j, point in enumerate(points):
        stale = sorted(p.name for p in out.glob(".*.tmp")) if out.exists() else []
        killed = _nmt(config, point, *(["--resume"] if j else []))
        said = killed.stderr
        if killed.returncode == 2 and "this run has not started; drop --resume" in said:
            killed = _nmt(config, point)  # killed before any record: the advice works
            said += killed.stderr
        context = (point, said[-2000:])
        # killed there, after no error: the advice of any earlier message was followed
        assert killed.returncode == -9, context
        assert "Traceback" not in said and "error:" not in killed.stderr, context
        if stale:  # the previous kill's temporary file is gone before this run wrote
            assert f"removed {len(stale)} temporary file(s)" in said, context
    resumed = _nmt(config, "", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert not list(out.rglob("*.tmp"))
    assert sorted(p.name for p in out.iterdir() if "set_aside" not in p.name) == files
    assert _records(out) == expected
    got = _weights(out / "last.pt")
    assert all(torch.equal(got[n], weights[n]) for n in weights)
