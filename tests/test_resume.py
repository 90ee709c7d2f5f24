"""Interrupted training: SIGINT/SIGTERM save and exit, SIGKILL loses nothing complete, and
--resume reproduces the uninterrupted loss curve exactly (CPU)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nmt.model.checkpoint import read_payload

from conftest import nmt_here

REPO = Path(__file__).resolve().parents[1]
SMALL = [
    "data.train_limit=240",
    "data.valid_limit=30",
    "subwords.vocab_size=200",
    "model.emb_dim=24",
    "model.enc_hidden=24",
    "model.dec_hidden=48",
    "model.attn_dim=24",
    "model.output_dim=24",
    "train.max_epochs=3",
    "train.batch_size=4",
    "train.patience=null",
    "train.progress=false",
    "train.seed=7",
]


def _cmd(multi30k, out, *extra):
    return [
        sys.executable,
        "-m",
        "nmt",
        "train",
        "configs/multi30k_deen_additive.yaml",
        *SMALL,
        f"data.path={multi30k}",
        f"train.out_dir={out}",
        *extra,
    ]


def _curve(out: Path) -> dict[int, tuple[float, float]]:
    """epoch -> (train loss, val loss), the last record of each epoch."""
    records = [json.loads(x) for x in (out / "valid_log.jsonl").read_text().splitlines()]
    return {r["epoch"]: (r["train_loss"], r["val_loss"]) for r in records}


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def reference_curve(tmp_path_factory, multi30k_dir):
    out = tmp_path_factory.mktemp("uninterrupted")
    r = subprocess.run(
        _cmd(multi30k_dir, out), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    return _curve(out)


@pytest.fixture(scope="module")
def multi30k_dir():
    from conftest import MULTI30K

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    return MULTI30K


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupt_then_resume_gives_the_same_loss_curve(
    tmp_path, multi30k_dir, reference_curve, sig
):
    proc = subprocess.Popen(
        _cmd(multi30k_dir, tmp_path),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(tmp_path / "last.pt", proc)  # epoch 1 is done; now stop it inside epoch 2
    time.sleep(0.7)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
        assert "continue with --resume" in err
    state = read_payload(tmp_path / "last.pt")["train_state"]["counters"]
    assert not state["done"]
    if sig != signal.SIGKILL:
        assert state["batch_in_epoch"] > 0  # saved in the middle of an epoch
    assert not list(tmp_path.glob(".*.tmp"))  # never a half-written file left behind
    r = subprocess.run(
        _cmd(multi30k_dir, tmp_path) + ["--resume"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert _curve(tmp_path)[3] == reference_curve[3]
    assert _curve(tmp_path) == reference_curve


@pytest.mark.slow
def test_second_run_without_resume_refuses_to_overwrite(tmp_path, multi30k_dir):
    # refusals before any work: in this process (nmt/cli/app.py prints them as the command)
    (tmp_path / "last.pt").write_bytes(b"x")
    r = nmt_here(*_cmd(multi30k_dir, tmp_path)[3:])
    assert r.returncode == 2 and "pass --resume" in r.stderr
    r = nmt_here(*_cmd(multi30k_dir, tmp_path / "never")[3:], "--resume")
    assert r.returncode == 2 and "--resume: nothing to resume" in r.stderr, r.stderr


@pytest.mark.slow
def test_resume_with_schedule_and_step_validation_and_average(tmp_path, multi30k_dir):
    extra = [
        "train.lr_schedule=warmup_decay",
        "train.warmup_steps=20",
        "train.valid_every_steps=25",
        "train.keep_checkpoints=2",
        "train.max_epochs=2",
    ]
    ref = tmp_path / "ref"
    r = subprocess.run(
        _cmd(multi30k_dir, ref, *extra), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in (ref / "valid_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [25, 50, 60, 75, 100, 120]  # 60 batches an epoch
    # a mid-epoch line says its train loss covers only this epoch's part; an epoch's end not
    said = [x for x in (r.stdout + r.stderr).splitlines() if " epochs, step " in x]
    assert "step 25: train loss" in said[0] and "(this epoch's first 0.42) |" in said[0]
    assert "step 60: train loss" in said[2] and "first" not in said[2], said
    assert lines[-1]["lr"] < lines[0]["lr"] < 1e-3  # decaying after the warm-up
    assert sorted(p.name for p in ref.glob("step_*.pt")) == ["step_00000100.pt", "step_00000120.pt"]
    run = tmp_path / "run"
    proc = subprocess.Popen(
        _cmd(multi30k_dir, run, *extra),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(run / "step_00000050.pt", proc)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    r = subprocess.run(
        _cmd(multi30k_dir, run, *extra) + ["--resume"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    resumed = {
        x["step"]: (x["train_loss"], x["val_loss"], x["lr"])
        for x in map(json.loads, (run / "valid_log.jsonl").read_text().splitlines())
    }
    assert resumed == {x["step"]: (x["train_loss"], x["val_loss"], x["lr"]) for x in lines}
    avg = tmp_path / "avg.pt"
    r = subprocess.run(
        [sys.executable, "-m", "nmt", "average", str(ref), "--last", "2", "-o", str(avg)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    import torch

    a, b = (read_payload(ref / n)["model"] for n in ["step_00000100.pt", "step_00000120.pt"])
    key = next(k for k in a if a[k].is_floating_point())
    assert torch.allclose(read_payload(avg)["model"][key], (a[key] + b[key]) / 2)


@pytest.mark.slow
def test_resume_refuses_a_different_config_and_extends_a_finished_run(tmp_path, multi30k_dir):
    """Kind 4 of issue 12: --resume never silently uses either configuration."""
    out = tmp_path / "run"
    one = ["train.max_epochs=1", "data.train_limit=80"]
    r = subprocess.run(
        _cmd(multi30k_dir, out, *one), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    # a key that changes the model or the data: refused, every differing key named
    r = nmt_here(
        *_cmd(multi30k_dir, out, *one, "model.attention=dot", "train.lr=0.01")[3:], "--resume"
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "model.attention: 'additive' (stored) vs 'dot' (given)" in r.stderr
    assert "train.lr: 0.001 (stored) vs 0.01 (given)" in r.stderr
    # the same budget: finished, nothing to do, the true position in the log
    r = subprocess.run(
        _cmd(multi30k_dir, out, *one) + ["--resume"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "resumed at step 20: 1 epoch(s) and 0 batch(es) of epoch 2 done" in r.stderr
    assert "nothing to do" in r.stderr
    # a budget key: applied, logged, and the finished run goes on
    r = subprocess.run(
        _cmd(multi30k_dir, out, "train.max_epochs=2", "data.train_limit=80") + ["--resume"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "resume: train.max_epochs changed from 1 to 2" in r.stderr
    assert "continuing with the extended budget" in r.stderr
    steps = [json.loads(x)["step"] for x in (out / "valid_log.jsonl").read_text().splitlines()]
    assert steps == [20, 40]
    assert read_payload(out / "last.pt")["config"]["train"]["max_epochs"] == 2


def test_messages_say_none_yet_before_the_first_validation():
    from nmt.training.state import TrainState

    assert TrainState().best_bleu_text() == "none yet"  # not "-1.00"
    assert TrainState(best_bleu=31.234).best_bleu_text() == "31.23"
    assert TrainState(best_bleu=0.0).best_bleu_text() == "0.00"


def test_patience_is_one_rule_for_the_loop_and_the_study():
    from nmt.training.state import TrainState, patience_spent

    assert [patience_spent(b, 3) for b in (0, 2, 3, 4)] == [False, False, True, True]
    assert not patience_spent(100, None)  # no early stopping
    assert TrainState(bad_epochs=3).patience_spent(3) and not TrainState().patience_spent(1)
