"""Checkpoint format: self-describing, atomic, clear errors on foreign files."""

import errno
import os
import re
import stat
from pathlib import Path

import pytest
import torch

from nmt.config.load import from_dict
from nmt.model.checkpoint import (
    CheckpointError,
    load_checkpoint,
    make_payload,
    read_payload,
    save_atomic,
)

from conftest import tiny_model


def _cfg():
    return from_dict(
        {
            "model": {
                "emb_dim": 16,
                "enc_hidden": 16,
                "dec_hidden": 32,
                "attn_dim": 16,
                "output_dim": 16,
            }
        }
    )


def test_roundtrip_rebuilds_model_and_vocabs(tmp_path, toy_vocabs):
    src, tgt = toy_vocabs
    model = tiny_model(src, tgt)
    save_atomic(make_payload(_cfg(), model, src, tgt), tmp_path / "m.pt")
    loaded = load_checkpoint(tmp_path / "m.pt")
    assert loaded.cfg == _cfg()
    assert loaded.src_vocab.encode("ein mann") == src.encode("ein mann")
    for a, b in zip(model.state_dict().values(), loaded.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600)])
def test_checkpoint_gets_the_mode_of_a_new_file(tmp_path, umask, mode):
    # the temporary file is private (mkstemp); the checkpoint must not stay so
    old = os.umask(umask)
    try:
        save_atomic({"format": "nmt-checkpoint"}, tmp_path / "m.pt")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.pt").stat().st_mode) == mode


def test_foreign_and_old_files_are_rejected(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        read_payload(tmp_path / "none.pt")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(CheckpointError, match="not a readable nmt checkpoint"):
        read_payload(tmp_path / "text.pt")
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not an nmt checkpoint"):
        read_payload(tmp_path / "other.pt")
    torch.save({"format": "nmt-checkpoint", "version": 0}, tmp_path / "old.pt")
    with pytest.raises(CheckpointError, match="version 0 is not supported"):
        read_payload(tmp_path / "old.pt")


def test_failed_write_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    base = {
        "format": "nmt-checkpoint",
        "version": 1,
        "config": {},
        "src_spm": b"s",
        "tgt_spm": b"t",
        "model": {},
    }
    save_atomic({**base, "n": 1}, path)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(CheckpointError, match="disk full.*previous checkpoint is kept"):
        save_atomic({**base, "n": 2}, path)
    monkeypatch.undo()
    assert read_payload(path)["n"] == 1
    assert not list(tmp_path.glob(".*.tmp"))


def test_write_atomic_replaces_whole_or_not_at_all(tmp_path):
    """nmt.ops.files.write_atomic, which the store, the study's caches and the validation
    log share with save_atomic: text or bytes, the mode of a new file, nothing left over."""
    from nmt.ops.files import atomic_open, same_file, write_atomic

    path = tmp_path / "f.txt"
    write_atomic(path, "é\n")
    write_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert path.read_bytes() == "é\n".encode() and (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_current_umask()
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write(b"half")
        raise RuntimeError("crash while writing")
    assert path.read_text(encoding="utf-8") == "é\n" and not list(tmp_path.glob(".*.tmp"))
    os.symlink(path, tmp_path / "link.txt")
    assert same_file(path, tmp_path / "link.txt") and same_file(tmp_path / "x", tmp_path / "x")
    assert not same_file(path, tmp_path / "b.bin")


def test_check_writable_names_what_stops_an_output_before_the_work(tmp_path):
    """nmt.ops.files.check_writable: a directory given for a file, a missing folder, a file
    given for a folder, and a folder that refuses new files even to root (/proc) are
    named; a writable place passes and keeps no probe file."""
    from nmt.ops.files import check_writable

    (tmp_path / "f.json").write_text("{}")
    for path, folder, message in (
        (tmp_path, False, f"--json {tmp_path}: is a directory"),
        (tmp_path / "no" / "f.json", False, f"folder {tmp_path / 'no'} does not exist"),
        (tmp_path / "f.json", True, "exists and is not a directory"),
        (tmp_path / "f.json" / "sub", True, f"{tmp_path / 'f.json'} is not a directory"),
        (Path("/proc/nmt_out.json"), False, "cannot write in /proc"),
        (Path("/proc/nmt_out/deeper"), True, "cannot write in /proc"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            check_writable(path, "--json", folder=folder)
    check_writable(tmp_path / "f.json", "--json")  # an existing file is written over
    check_writable(tmp_path / "new" / "deeper", "--out", folder=True)  # made when missing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_directory_gets_the_checkpoints_inside_it_suggested(tmp_path):
    """`nmt translate runs/` names the run directories' best.pt, not runs/best.pt."""
    for run in ("a", "b", "c"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "best.pt").write_bytes(b"x")
    with pytest.raises(CheckpointError) as e:
        read_payload(tmp_path)
    msg = str(e.value)
    assert f"{tmp_path / 'a' / 'best.pt'} or {tmp_path / 'b' / 'best.pt'}" in msg
    assert "(3 runs there have one)" in msg and str(tmp_path / "best.pt") not in msg
    with pytest.raises(CheckpointError, match=f"such as {tmp_path / 'a' / 'best.pt'}$"):
        read_payload(tmp_path / "a")  # a run directory: its own best.pt


def test_a_study_archive_of_a_run_is_named_as_one(tmp_path):
    """An archived run (results/.../models/RUN) holds checkpoint.json, a digest, and never a
    best.pt; suggesting RUN/best.pt would send the user to a file that cannot exist."""
    (tmp_path / "checkpoint.json").write_text('{"sha256": "' + "0" * 64 + '"}\n')
    with pytest.raises(CheckpointError) as e:
        read_payload(tmp_path)
    assert "is a study's archive of a run" in str(e.value) and "best.pt" in str(e.value)
    assert "such as" not in str(e.value)


def test_an_empty_checkpoint_argument_is_named_as_empty(tmp_path, monkeypatch):
    """`nmt translate ""` reaches the loader as Path("") == Path("."): the message says the
    argument was empty, not that the current directory lacks a manifest."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match="checkpoint path is empty or '.'"):
        read_payload(Path(""))
