"""A checkpoint is data, never code (shared/cases NMT-36, NMT-28): every command that reads
one refuses a file carrying Python objects, without running them, in one line; a file with
the nmt marker but missing or wrong-typed entries is a one-line error naming the entry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt.config.load import from_dict, load_study_config
from nmt.model.checkpoint import CheckpointError, make_payload, read_payload, save_atomic

from conftest import REPO, nmt_here, tiny_model


class _Trap:
    """Unpickling this creates ``path``: proof that the file's code ran."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _evil(path: Path, marker: Path) -> Path:
    torch.save(
        {"format": "nmt-checkpoint", "version": 1, "config": {}, "evil": _Trap(marker)}, path
    )
    return path


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


def _nmt(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nmt", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def _one_line_refusal(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "refused" in lines[0], r.stderr


def test_read_payload_refuses_pickled_code_without_running_it(tmp_path):
    marker = tmp_path / "pwned.txt"
    evil = _evil(tmp_path / "evil.pt", marker)
    with pytest.raises(CheckpointError, match=r"evil.pt: refused: .*\(io.open\)"):
        read_payload(evil)
    assert not marker.exists()
    # the same object hidden deep inside an otherwise complete checkpoint
    torch.save(
        {
            "format": "nmt-checkpoint",
            "version": 1,
            "config": {"note": _Trap(marker)},
            "src_spm": b"s",
            "tgt_spm": b"t",
            "model": {},
        },
        tmp_path / "deep.pt",
    )
    with pytest.raises(CheckpointError, match="refused"):
        read_payload(tmp_path / "deep.pt")
    assert not marker.exists()


def test_own_checkpoints_load_with_weights_only(tmp_path, toy_vocabs):
    src, tgt = toy_vocabs
    train_state: dict[str, object] = {
        "optimizer": {"state": {}, "param_groups": []},
        "schedule": None,
        "rng": {"torch": torch.get_rng_state(), "python": __import__("random").getstate()},
        "counters": {"step": 3},
    }
    payload = make_payload(_cfg(), tiny_model(src, tgt), src, tgt, train_state=train_state)
    save_atomic(payload, tmp_path / "m.pt")
    torch.load(tmp_path / "m.pt", weights_only=True)  # what the safe loader relies on
    assert read_payload(tmp_path / "m.pt")["train_state"]["counters"] == {"step": 3}


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda p: p.pop("model"), "key 'model' is missing"),
        (lambda p: p.pop("src_spm"), "key 'src_spm' is missing"),
        (lambda p: p.update(config=[1, 2]), "'config' is a list, expected dict"),
        (lambda p: p.update(tgt_spm="text"), "'tgt_spm' is a str, expected bytes"),
        (lambda p: p["model"].update(w=[0.0]), "model entry 'w' is a list, expected a tensor"),
        (lambda p: p.update(train_state=5), "'train_state' is a int"),
        (
            lambda p: p.update(train_state={"rng": {}, "counters": {}}),
            "'train_state.optimizer' is missing",
        ),
        (
            lambda p: p.update(train_state={"optimizer": {}, "rng": {"torch": 1}, "counters": {}}),
            "'train_state.rng' needs",
        ),
    ],
)
def test_marker_with_missing_or_wrong_typed_keys_is_one_line_error(
    tmp_path, toy_vocabs, damage, message
):
    src, tgt = toy_vocabs
    payload = make_payload(_cfg(), tiny_model(src, tgt), src, tgt)
    damage(payload)
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(
        CheckpointError, match="bad.pt: damaged nmt checkpoint: " + message.replace("(", r"\(")
    ):
        read_payload(tmp_path / "bad.pt")


def test_damaged_sentencepiece_model_and_config_are_checkpoint_errors(tmp_path, toy_vocabs):
    from nmt.model.checkpoint import load_checkpoint

    src, tgt = toy_vocabs
    payload = make_payload(_cfg(), tiny_model(src, tgt), src, tgt)
    torch.save({**payload, "src_spm": b"not a model"}, tmp_path / "spm.pt")
    with pytest.raises(CheckpointError, match="spm.pt: damaged .*SentencePiece"):
        load_checkpoint(tmp_path / "spm.pt")
    torch.save({**payload, "config": {"model": {"atention": "x"}}}, tmp_path / "cfg.pt")
    with pytest.raises(CheckpointError, match="cfg.pt: stored config is invalid: model.atention"):
        load_checkpoint(tmp_path / "cfg.pt")


@pytest.mark.parametrize("command", ["translate", "evaluate", "average"])
def test_every_reading_command_refuses_in_one_line(tmp_path, command):
    marker = tmp_path / "pwned.txt"
    evil = str(_evil(tmp_path / "evil.pt", marker))
    # average gets two different evil files: the same file twice is refused before loading
    other = str(_evil(tmp_path / "evil2.pt", tmp_path / "pwned2.txt"))
    args = {
        "translate": [evil],
        "evaluate": [evil],
        "average": [evil, other, "-o", str(tmp_path / "avg.pt")],
    }[command]
    _one_line_refusal(_nmt(command, *args))
    assert not marker.exists()
    assert not (tmp_path / "avg.pt").exists()


@pytest.mark.slow
def test_resume_and_bench_refuse_in_one_line(tmp_path):
    marker = tmp_path / "pwned.txt"
    run = tmp_path / "run"
    run.mkdir()
    _evil(run / "last.pt", marker)
    r = _nmt(
        "train", str(REPO / "configs/quickstart_deen.yaml"), f"train.out_dir={run}", "--resume"
    )
    _one_line_refusal(r)
    _one_line_refusal(_nmt("bench", str(run / "last.pt")))
    assert not marker.exists()


def test_study_reuse_refuses_a_planted_checkpoint(tmp_path):
    from nmt.study.plan import plan

    marker = tmp_path / "pwned.txt"
    study_yaml = tmp_path / "study.yaml"
    study_yaml.write_text(
        f"name: s\nbase_config: {REPO / 'configs/quickstart_deen.yaml'}\nrun_prefix: s\n"
        f"attentions: [none, additive]\noverrides: ['train.out_dir={tmp_path}/{{name}}']\n"
    )
    (tmp_path / "s_none").mkdir()
    _evil(tmp_path / "s_none" / "last.pt", marker)
    with pytest.raises(CheckpointError, match="s_none/last.pt: refused"):
        plan(load_study_config(study_yaml))
    assert not marker.exists()


def test_garbage_truncated_and_misfit_files_get_clear_messages(tmp_path, toy_vocabs):
    from nmt.model.checkpoint import load_checkpoint

    (tmp_path / "noise.pt").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(CheckpointError, match=r"noise.pt: not a readable nmt checkpoint"):
        read_payload(tmp_path / "noise.pt")
    src, tgt = toy_vocabs
    payload = make_payload(_cfg(), tiny_model(src, tgt), src, tgt)
    save_atomic(payload, tmp_path / "ok.pt")
    data = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(
        CheckpointError,
        match=r"cut.pt: not a readable nmt checkpoint "
        r"\(truncated, damaged or not a torch file",
    ):
        read_payload(tmp_path / "cut.pt")
    key = next(iter(payload["model"]))
    shape = tuple(payload["model"][key].shape)
    torch.save(
        {**payload, "model": {**payload["model"], key: torch.zeros(3, 3, 3)}}, tmp_path / "shape.pt"
    )
    with pytest.raises(
        CheckpointError,
        match=rf"tensor '{key}' has shape \(3, 3, 3\), the "
        rf"model needs \({shape[0]}, ",
    ):
        load_checkpoint(tmp_path / "shape.pt")
    weights = dict(payload["model"])
    weights.pop(key)
    torch.save({**payload, "model": weights}, tmp_path / "missing.pt")
    with pytest.raises(CheckpointError, match=rf"tensor '{key}' is missing"):
        load_checkpoint(tmp_path / "missing.pt")


def test_average_last_n_needs_n_checkpoints(tmp_path, toy_vocabs):
    src, tgt = toy_vocabs
    run = tmp_path / "run"
    for i in (1, 2, 3):
        save_atomic(make_payload(_cfg(), tiny_model(src, tgt), src, tgt), run / f"step_{i:08d}.pt")
    r = nmt_here("average", run, "--last", "5", "-o", tmp_path / "a.pt")  # no pickle: in-process
    assert r.returncode == 2 and "--last 5: only 3 checkpoint(s) found" in r.stderr
    assert not (tmp_path / "a.pt").exists()


def test_a_plain_pickle_is_one_error_without_torch_warnings(tmp_path, recwarn):
    """torch warns about a foreign pickle protocol, naming its own site-packages file; the
    user is shown only nmt's error about their file."""
    import pickle

    path = tmp_path / "plain.pt"
    path.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    with pytest.raises(
        CheckpointError,
        match=r"plain\.pt: not an nmt checkpoint|plain\.pt: not "
        r"a readable nmt checkpoint",
    ):
        read_payload(path)
    assert not [w for w in recwarn if "torch" in str(w.filename)], [str(w.message) for w in recwarn]
