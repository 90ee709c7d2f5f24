"""Nothing lost to an empty split, a stray checkpoint, a model too large or a killed first
checkpoint (shared/cases NMT-45, NMT-43, NMT-44, NMT-46, NMT-20), and a config key that
cannot act is said so. The corpus is the cases' toy corpus (tests/fixtures/toy16), the
model tiny; NMT-45's empty validation files are made in the test."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt.commands.select import SelectOptions, select
from nmt.commands.train import run_training
from nmt.config.load import load_config
from nmt.model.checkpoint import CheckpointError, read_payload
from nmt.model.footprint import ResourceError, check_fits, parameter_count
from nmt.model.rundir import remove_stale_temporaries
from nmt.model.seq2seq import build_model, count_parameters

from conftest import REPO

pytestmark = pytest.mark.slow  # every test here trains, or reads a trained run

TOY16 = Path(__file__).resolve().parent / "fixtures" / "toy16"


def _config(tmp: Path, corpus: Path = TOY16) -> Path:
    path = tmp / "toy.yaml"
    path.write_text(
        json.dumps(
            {
                "name": "toy",
                "data": {
                    "source": "dir",
                    "path": str(corpus),
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
                    "max_epochs": 2,
                    "threads": 1,
                    "device": "cpu",
                    "precision": "fp32",
                    "progress": False,
                    "seed": 1,
                    "patience": None,
                    "out_dir": str(tmp / "runs" / "{name}"),
                },
                "search": {"beam_size": 2},
            }
        )
    )
    return path


def _train(tmp: Path, *overrides: str, resume: bool = False, corpus: Path = TOY16) -> list[str]:
    logs: list[str] = []
    run_training(load_config(_config(tmp, corpus), list(overrides)), resume=resume, log=logs.append)
    return logs


def _cli(tmp: Path, *args: str, corpus: Path = TOY16) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nmt", "train", str(_config(tmp, corpus)), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize("dev", [("", ""), ("\n\n", "\n\n"), ("ein mann .\n", "\n")])
def test_an_unscorable_validation_split_is_refused_before_training(tmp_path, dev):
    """NMT-45: empty validation files trained a whole epoch, then sacreBLEU's IndexError."""
    corpus = tmp_path / "corpus"
    shutil.copytree(TOY16, corpus)
    (corpus / "dev.de").write_text(dev[0])
    (corpus / "dev.en").write_text(dev[1])
    r = _cli(tmp_path, corpus=corpus)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (error,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert error.startswith("error: data.valid_split: split 'dev' (")
    assert f"{corpus / 'dev.de'} and {corpus / 'dev.en'}" in error and "cannot be scored" in error
    assert not (tmp_path / "runs" / "toy").exists()  # refused before any step


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_0(tmp_path):
    """NMT-46: records but no checkpoint; --resume said "choose another name", a fresh run
    said "pass --resume". Now --resume starts again, the orphan records set aside."""
    _train(tmp_path)
    out = tmp_path / "runs" / "toy"
    straight = (out / "valid_log.jsonl").read_text().splitlines()
    for p in out.glob("*.pt"):
        p.unlink()
    (out / "summary.json").unlink()
    (out / ".best.pt.abcd1234.tmp").write_bytes(b"half a checkpoint")
    refused: list[str] = []
    with pytest.raises(CheckpointError, match="pass --resume to continue that run"):
        # the advice given ... (the stale temporary file is removed at start, refused or not)
        run_training(load_config(_config(tmp_path), []), log=refused.append)
    assert any("removed 1 temporary file(s)" in x for x in refused), refused
    assert not list(out.glob(".*.tmp"))
    logs = _train(tmp_path, resume=True)  # ... works
    assert any("has no checkpoint" in x and "resuming from step 0" in x for x in logs), logs
    strip = ("elapsed_s", "run_id")

    def records(lines):
        return [{k: v for k, v in json.loads(x).items() if k not in strip} for x in lines]

    assert records((out / "valid_log.jsonl").read_text().splitlines()) == records(straight)
    assert (out / "valid_log.set_aside.jsonl").read_text().splitlines() == straight
    assert not list(out.glob(".*.tmp"))


def test_stale_temporary_files_are_removed_and_nothing_else(tmp_path):
    """NMT-20: a kill during a checkpoint write left .NAME.XXXXXXXX.tmp forever."""
    out = tmp_path / "run"
    (out / "data").mkdir(parents=True)
    stale = [
        out / ".last.pt.k3j_9xq1.tmp",
        out / ".valid_log.jsonl.abcdefgh.tmp",
        out / "data" / ".manifest.json.0a1b2c3d.tmp",
    ]
    kept = [out / "notes.tmp", out / ".hidden", out / "best.pt", out / ".x.pt.short.tmp"]
    for p in stale + kept:
        p.write_bytes(b"12345")
    note = remove_stale_temporaries(out)
    assert note is not None and "removed 3 temporary file(s)" in note and "15 bytes" in note
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)
    assert remove_stale_temporaries(out) is None
    assert remove_stale_temporaries(tmp_path / "missing") is None


def test_select_refuses_a_checkpoint_of_another_run(tmp_path):
    """NMT-43: another run's best.pt copied in was chosen and reported with this run's
    epochs and validation history."""
    _train(tmp_path, "name=a", "train.keep_checkpoints=2")
    _train(tmp_path, "name=b", "model.attention=dot", "train.max_epochs=1")
    a, b = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    ids = {n: read_payload(d / "best.pt")["run_id"] for n, d in (("a", a), ("b", b))}
    shutil.copyfile(b / "best.pt", a / "best.pt")
    opts = SelectOptions(
        beam=2,
        alphas=(0.6,),
        average=2,
        valid_split="dev",
        test_splits=("dev2",),
        data_path=str(TOY16),
    )
    with pytest.raises(CheckpointError) as e:
        select(a, opts, log=lambda _m: None)
    msg = str(e.value)
    assert msg.startswith(
        f"{a / 'best.pt'} belongs to another training run (run id {ids['b'][:8]}) than "
    )
    assert f"(run id {ids['a'][:8]})" in msg and "move it out of" in msg
    assert not (a / "averaged.pt").exists()  # refused before any work
    # --resume of that directory is refused the same way, before training
    with pytest.raises(CheckpointError, match="belongs to another training run"):
        _train(tmp_path, "name=a", "train.keep_checkpoints=2", "train.max_epochs=3", resume=True)


def test_a_record_of_another_run_in_the_log_is_named_with_its_line(tmp_path):
    _train(tmp_path, "train.max_epochs=1")
    out = tmp_path / "runs" / "toy"
    lines = (out / "valid_log.jsonl").read_text().splitlines()
    record = json.loads(lines[0]) | {"run_id": "f" * 32}
    (out / "valid_log.jsonl").write_text("\n".join([*lines, json.dumps(record)]) + "\n")
    with pytest.raises(
        CheckpointError,
        match=rf"valid_log.jsonl, record {len(lines) + 1} "
        r"belongs to another training run \(run id ffffffff\)",
    ):
        _train(tmp_path, "train.max_epochs=2", resume=True)


def test_the_parameter_count_is_known_before_the_model_is_built(tmp_path):
    cfg = load_config(_config(tmp_path), ["model.attention=multihead", "model.heads=2"]).model
    counted = parameter_count(cfg, 50, 60)
    assert counted == count_parameters(build_model(cfg, 50, 60))


def test_a_model_too_large_is_one_line_before_any_work(tmp_path):
    """NMT-44: torch's allocator traceback ("can't allocate 40025600000 bytes")."""
    r = _cli(tmp_path, "name=big", "model.emb_dim=100000", "model.output_dim=100000")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (error,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert error.startswith("error: run big: a model of ") and " parameters (" in error
    assert "model.emb_dim=100000" in error and "model.output_dim=100000" in error
    assert "needs at least" in error and "GiB to train" in error and "but this cpu has" in error
    cfg = load_config(_config(tmp_path), ["model.emb_dim=100000"]).model
    with pytest.raises(ResourceError, match="to load"):
        check_fits(cfg, 10**6, 10**6, torch.device("cpu"), training=False)


def test_max_tokens_below_every_pair_is_warned_about(tmp_path):
    """train.max_tokens=1 was silently ignored (every batch one pair)."""
    logs = _train(tmp_path, "train.max_tokens=1", "train.max_epochs=1")
    assert any(
        "train.max_tokens=1 is below the padded length of every training pair" in x for x in logs
    ), logs
    logs = _train(tmp_path, "name=fine", "train.max_tokens=40", "train.max_epochs=1")
    assert not any("train.max_tokens" in x for x in logs), logs
