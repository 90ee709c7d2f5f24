"""One-line errors and visible warnings for what a user can get wrong (shared/cases
NMT-22, NMT-23, NMT-24, NMT-27), each on the case's own input where it has one."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import REPO, nmt_here

CASES = REPO.parent / "shared" / "cases"
TOY = CASES / "nmt_toy.yaml"


def _nmt(*args, cwd: Path = REPO, timeout: int = 300, input: str | None = None):
    return subprocess.run(
        [sys.executable, "-m", "nmt", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def _one_line_error(r) -> str:
    """The one ``error:`` line of a refused command (``_nmt``'s subprocess, or
    ``nmt_here`` in this process: the same handler prints it, nmt/cli/app.py)."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _case(name: str, tmp_path: Path) -> Path:
    if not (CASES / name).is_dir():
        pytest.skip(f"{CASES / name} not found")
    shutil.copytree(CASES / name, tmp_path / name)
    shutil.copy(TOY, tmp_path / "nmt_toy.yaml")
    return tmp_path / name


@pytest.fixture(scope="module")
def toy_checkpoint(tmp_path_factory):
    """A 2-epoch toy model trained on the NMT-22 case's corpus (with its long line)."""
    tmp = tmp_path_factory.mktemp("toy")
    if not (CASES / "NMT-22").is_dir():
        pytest.skip("shared/cases not found")
    case = _case("NMT-22", tmp)
    r = _nmt("train", "../nmt_toy.yaml", cwd=case)
    assert r.returncode == 0, r.stderr
    return case, case / "runs" / "toy" / "best.pt"


# --- NMT-24: an unavailable device -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_requested_without_cuda_is_one_line(tmp_path, toy_checkpoint):
    case = _case("NMT-24", tmp_path)
    msg = _one_line_error(nmt_here("train", "../nmt_toy.yaml", "train.device=cuda", cwd=case))
    assert "train.device: CUDA requested ('cuda') but not available" in msg
    assert not (case / "runs").exists()  # refused before any work
    _case_dir, ckpt = toy_checkpoint
    msg = _one_line_error(nmt_here("evaluate", ckpt, "--device", "cuda:1"))
    assert "--device: CUDA requested ('cuda:1')" in msg
    msg = _one_line_error(nmt_here("translate", ckpt, "--device", "cuda", input="ein mann\n"))
    assert "--device: CUDA requested" in msg


@pytest.mark.slow
def test_unknown_device_names_the_option(toy_checkpoint):
    _case_dir, ckpt = toy_checkpoint
    msg = _one_line_error(nmt_here("translate", ckpt, "--device", "tpu", input="x\n"))
    assert "--device: 'tpu'" in msg


# --- NMT-27: a vocabulary size the corpus cannot support ----------------------------------


@pytest.mark.slow
def test_vocab_size_below_the_characters_is_one_line(tmp_path):
    case = _case("NMT-27", tmp_path)
    msg = _one_line_error(nmt_here("train", "../nmt_toy.yaml", "subwords.vocab_size=30", cwd=case))
    assert "subwords.vocab_size: 30 is too small for this corpus" in msg
    import re

    from nmt.data.vocab import train_vocab

    found = re.search(r"at least (\d+)", msg)
    assert found is not None, msg
    minimum = int(found.group(1))
    src = [x.strip() for x in (case / "train.de").read_text(encoding="utf-8").splitlines()]
    assert len(train_vocab(src, minimum)) == minimum  # the stated minimum is the real one
    with pytest.raises(ValueError, match=f"at least {minimum}"):
        train_vocab(src, minimum - 1)


@pytest.mark.slow
def test_vocab_size_above_what_the_corpus_allows_is_a_visible_warning(tmp_path):
    case = _case("NMT-27", tmp_path)
    r = _nmt("train", "../nmt_toy.yaml", "subwords.vocab_size=8000", "train.max_epochs=1", cwd=case)
    assert r.returncode == 0, r.stderr
    warn = [x for x in r.stderr.splitlines() if x.startswith("warning: subwords.vocab_size")]
    assert len(warn) == 2  # source and target side
    import re

    assert re.search(
        r"8000 is more than the src side of this corpus supports; using \d\d pieces", warn[0]
    ), warn[0]


def test_other_sentencepiece_refusals_name_the_setting():
    from nmt.data.vocab import train_vocab

    with pytest.raises(
        ValueError,
        match=r"^subwords: SentencePiece refused vocab_size=50, "
        r"model_type=bogus",
    ):
        train_vocab(["ein mann läuft ."] * 20, 50, model_type="bogus")


# --- NMT-22: nothing is cut silently -------------------------------------------------------


@pytest.mark.slow
def test_evaluate_warns_naming_the_cut_lines(toy_checkpoint):
    case, ckpt = toy_checkpoint
    r = _nmt("evaluate", ckpt, "--src", case / "long.de", "--ref", case / "long.en", "--beam", "1")
    assert r.returncode == 0, r.stderr
    # one warning for the cut input; a toy model's outputs may also hit the length limit,
    # which is a warning of its own
    warn = [x for x in r.stderr.splitlines() if x.startswith("warning:") and "pieces" in x]
    assert len(warn) == 1 and "1 input line cut to the first 400 pieces (line 2," in warn[0]
    r = _nmt("translate", ckpt, "-i", case / "long.de", "--beam", "1")
    assert "1 input line cut to the first 400 pieces (line 2," in r.stderr


def test_truncation_warning_lists_the_first_lines():
    from nmt.inference.translate import Translation, truncation_warning

    ts = [Translation("x", "y", [], [], None, truncated=i % 2 == 1) for i in range(30)]
    w = truncation_warning(ts, "f.de")
    assert w == (
        "warning: f.de: 15 input lines cut to the first 400 pieces (lines 2, 4, 6, 8, "
        "10, 12, 14, 16, 18, 20, ..., counting from 1)"
    )
    assert truncation_warning(ts[:1], "f.de") is None


# --- NMT-23: Ctrl-C at the interactive prompt exits 130, Ctrl-D exits 0 --------------------


def _interactive(ckpt: Path, key: bytes) -> int:
    pid, fd = pty.fork()
    if pid == 0:  # child: the real command on a terminal
        # a suite started in the background (`cmd &`) inherits SIGINT ignored, and Python
        # then installs no KeyboardInterrupt handler: give the child a terminal's default
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execv(sys.executable, [sys.executable, "-m", "nmt", "translate", str(ckpt)])
    out, end = b"", time.time() + 120
    while b"> " not in out and time.time() < end:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    os.write(fd, key)
    end = time.time() + 60
    while time.time() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if select.select([fd], [], [], 0.2)[0]:
            try:
                os.read(fd, 4096)
            except OSError:
                pass
    os.kill(pid, 9)
    raise AssertionError("nmt translate did not exit")


@pytest.mark.slow
def test_ctrl_c_at_the_prompt_exits_130_and_ctrl_d_exits_0(toy_checkpoint):
    _case_dir, ckpt = toy_checkpoint
    assert _interactive(ckpt, b"\x03") == 130
    assert _interactive(ckpt, b"\x04") == 0


def test_a_time_budget_that_ends_before_one_epoch_is_warned_about():
    """The quick start on a busy CPU: 4 steps in the 10-minute budget gave BLEU 0.00 and
    no word of why (fresh-user report, 2026-12-02)."""
    from nmt.commands.train import undertrained_warning
    from nmt.config.load import from_dict
    from nmt.training.state import TrainState

    cfg = from_dict({"train": {"max_minutes": 10}})
    warning = undertrained_warning(cfg, TrainState(step=4, epoch=0, elapsed_s=1008.0))
    assert warning is not None and "4 steps, before one full epoch" in warning
    assert "train.max_minutes=10" in warning
    # it names the score instead of promising "near 0", which a model of 355 steps (val BLEU
    # 12.78) contradicted (fresh-user report, 2026-12-04)
    warned = undertrained_warning(
        cfg, TrainState(step=355, epoch=0, elapsed_s=648.0, best_bleu=12.78)
    )
    assert warned is not None and "val BLEU 12.78" in warned and "near 0" not in warned
    # a full epoch, a budget not spent, an interrupted run or no budget: nothing to say
    assert undertrained_warning(cfg, TrainState(step=900, epoch=1, elapsed_s=700.0)) is None
    assert undertrained_warning(cfg, TrainState(step=4, epoch=0, elapsed_s=30.0)) is None
    assert (
        undertrained_warning(
            cfg, TrainState(step=4, epoch=0, elapsed_s=1008.0, interrupted="SIGINT")
        )
        is None
    )
    assert (
        undertrained_warning(
            from_dict({"train": {"max_minutes": None}}),
            TrainState(step=4, epoch=0, elapsed_s=1008.0),
        )
        is None
    )
