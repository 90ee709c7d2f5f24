"""Checkpoint averaging only within one run (shared/cases NMT-38, NMT-26): run ids,
checkpoints older than run ids, each file once, an output that is no input, messages that
name the differing config keys; float64 accumulation."""

import dataclasses
import os
import shutil

import pytest
import torch

from nmt.config.load import from_dict
from nmt.model.average import average_checkpoints, check_output
from nmt.model.checkpoint import (
    CheckpointError,
    load_checkpoint,
    make_payload,
    read_payload,
    save_atomic,
)

from conftest import nmt_here, tiny_model


def _cfg(**train):
    return from_dict(
        {
            "model": {
                "emb_dim": 16,
                "enc_hidden": 16,
                "dec_hidden": 32,
                "attn_dim": 16,
                "output_dim": 16,
            },
            "train": train,
        }
    )


def _save(path, vocabs, *, seed=0, run_id=None, cfg=None, legacy=False, **model):
    src, tgt = vocabs
    torch.manual_seed(seed)
    m = tiny_model(src, tgt, **model)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.01 * (seed + 1))  # distinct weights per file
    payload = make_payload(cfg or _cfg(), m, src, tgt, run_id=run_id)
    if legacy:  # as written by nmt before run ids
        del payload["run_id"]
    save_atomic(payload, path)
    return path


def test_every_payload_has_a_run_id_and_one_without_still_loads(tmp_path, toy_vocabs):
    a = _save(tmp_path / "a.pt", toy_vocabs)
    b = _save(tmp_path / "b.pt", toy_vocabs)
    ids = [read_payload(p)["run_id"] for p in (a, b)]
    assert all(isinstance(i, str) and len(i) == 32 for i in ids) and ids[0] != ids[1]
    old = _save(tmp_path / "old.pt", toy_vocabs, legacy=True)
    assert "run_id" not in read_payload(old)
    load_checkpoint(old)
    bad = read_payload(a)
    bad["run_id"] = 7
    torch.save(bad, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="'run_id' is a int, expected str"):
        read_payload(tmp_path / "bad.pt")


def test_checkpoints_of_two_runs_are_refused_naming_both_files(tmp_path, toy_vocabs):
    """NMT-38: two runs of one architecture and vocabulary (seeds 1 and 7)."""
    s1 = _save(tmp_path / "s1.pt", toy_vocabs, seed=1, cfg=_cfg(seed=1))
    s7 = _save(tmp_path / "s7.pt", toy_vocabs, seed=7, cfg=_cfg(seed=7))
    with pytest.raises(CheckpointError) as e:
        average_checkpoints([s1, s7])
    msg = str(e.value)
    assert "\n" not in msg
    assert f"{s1} and {s7} are checkpoints of different training runs" in msg
    assert f"train.seed: 1 ({s1}) vs 7 ({s7})" in msg
    # the same config and seed trained twice is still two runs
    a = _save(tmp_path / "a.pt", toy_vocabs, seed=1)
    b = _save(tmp_path / "b.pt", toy_vocabs, seed=2)
    with pytest.raises(CheckpointError, match="different training runs .*same configuration"):
        average_checkpoints([a, b])


def test_checkpoints_of_one_run_average_even_across_a_budget_change(tmp_path, toy_vocabs):
    a = _save(tmp_path / "a.pt", toy_vocabs, seed=1, run_id="r1", cfg=_cfg(max_epochs=5))
    b = _save(tmp_path / "b.pt", toy_vocabs, seed=2, run_id="r1", cfg=_cfg(max_epochs=9))
    averaged = average_checkpoints([a, b])
    assert averaged["run_id"] == "r1" and averaged["train_state"] is None
    wa, wb = read_payload(a)["model"], read_payload(b)["model"]
    key = next(k for k, v in wa.items() if v.is_floating_point())
    assert torch.allclose(averaged["model"][key], (wa[key] + wb[key]) / 2)


def test_checkpoints_without_run_id_are_one_run_when_their_configs_agree(tmp_path, toy_vocabs):
    a = _save(tmp_path / "a.pt", toy_vocabs, seed=1, legacy=True, cfg=_cfg(max_epochs=5))
    b = _save(tmp_path / "b.pt", toy_vocabs, seed=2, legacy=True, cfg=_cfg(max_epochs=9))
    new = _save(tmp_path / "new.pt", toy_vocabs, seed=3)
    average_checkpoints([a, b])
    average_checkpoints([a, new])  # one file with an id, one without: compared by config
    other_seed = _save(tmp_path / "c.pt", toy_vocabs, seed=4, legacy=True, cfg=_cfg(seed=9))
    with pytest.raises(
        CheckpointError,
        match=rf"{a} and {other_seed} have different "
        rf"configurations \(train.seed: 1 \({a}\) vs 9 \({other_seed}\); "
        "without a run id",
    ):
        average_checkpoints([a, other_seed])


def test_different_configurations_name_every_differing_key(tmp_path, toy_vocabs):
    """NMT-26 message: a different hidden size was refused with only "(another model
    configuration)"; also the language pair, which keeps every shape."""
    cfg = _cfg()
    wide = from_dict(
        {**cfg.to_dict(), "model": {**cfg.to_dict()["model"], "enc_hidden": 24, "dec_hidden": 48}}
    )
    for legacy in (False, True):
        a = _save(tmp_path / "a.pt", toy_vocabs, legacy=legacy, run_id="r1")
        c = _save(
            tmp_path / "c.pt",
            toy_vocabs,
            seed=1,
            legacy=legacy,
            run_id="r2",
            cfg=wide,
            enc_hidden=24,
            dec_hidden=48,
        )
        with pytest.raises(CheckpointError) as e:
            average_checkpoints([c, a])
        assert f"model.enc_hidden: 24 ({c}) vs 16 ({a})" in str(e.value)
        assert f"model.dec_hidden: 48 ({c}) vs 32 ({a})" in str(e.value)
    reversed_cfg = dataclasses.replace(
        cfg, data=dataclasses.replace(cfg.data, src_lang="en", tgt_lang="de")
    )
    a = _save(tmp_path / "a.pt", toy_vocabs, run_id="r1")
    r = _save(tmp_path / "r.pt", toy_vocabs, seed=1, run_id="r1", cfg=reversed_cfg)
    with pytest.raises(CheckpointError, match=rf"data.src_lang: 'en' \({r}\) vs 'de' \({a}\)"):
        average_checkpoints([r, a])


def test_the_same_checkpoint_twice_is_refused(tmp_path, toy_vocabs):
    """NMT-38: by path (however spelled) and by content (a copy)."""
    a = _save(tmp_path / "a.pt", toy_vocabs, run_id="r1")
    b = _save(tmp_path / "b.pt", toy_vocabs, seed=1, run_id="r1")
    with pytest.raises(CheckpointError, match=rf"{a}: given twice; each checkpoint"):
        average_checkpoints([a, b, a])
    os.symlink(a, tmp_path / "link.pt")
    with pytest.raises(CheckpointError, match=f"link.pt: given twice \\(also as {a}\\)"):
        average_checkpoints([a, tmp_path / "link.pt"])
    shutil.copy(a, tmp_path / "copy.pt")
    with pytest.raises(
        CheckpointError,
        match=rf"copy.pt: the same checkpoint as {a} "
        r"\(identical contents\)",
    ):
        average_checkpoints([a, b, tmp_path / "copy.pt"])


def test_duplicates_are_refused_before_any_payload_is_loaded(tmp_path, toy_vocabs, monkeypatch):
    a = _save(tmp_path / "a.pt", toy_vocabs, run_id="r1")
    b = _save(tmp_path / "b.pt", toy_vocabs, seed=1, run_id="r1")
    shutil.copy(a, tmp_path / "copy.pt")
    loads = []
    monkeypatch.setattr("nmt.model.average.read_payload", lambda p: loads.append(p))
    for paths in ([a, b, a], [a, b, tmp_path / "copy.pt"]):
        with pytest.raises(CheckpointError, match="each checkpoint can be averaged once"):
            average_checkpoints(paths)
    assert loads == []
    with pytest.raises(CheckpointError, match=f"^{tmp_path / 'gone.pt'}: checkpoint not found$"):
        average_checkpoints([a, tmp_path / "gone.pt"])


def test_an_output_that_is_an_input_or_a_runs_checkpoint_is_refused(tmp_path, toy_vocabs):
    a = _save(tmp_path / "a.pt", toy_vocabs, run_id="r1")
    b = _save(tmp_path / "b.pt", toy_vocabs, seed=1, run_id="r1")
    with pytest.raises(CheckpointError, match=rf"--output {b}: is the input {b}"):
        check_output([a, b], b)
    os.symlink(a, tmp_path / "link.pt")
    with pytest.raises(CheckpointError, match=rf"link.pt: is the input {a}"):
        check_output([a, b], tmp_path / "link.pt")
    check_output([a, b], tmp_path / "avg.pt")
    run = tmp_path / "run"
    run.mkdir()
    (run / "valid_log.jsonl").write_text("{}\n")
    for name in ("last.pt", "best.pt", "step_00000008.pt"):
        with pytest.raises(CheckpointError, match=f"{name} is one of its checkpoint names"):
            check_output([a, b], run / name)
    check_output([a, b], run / "averaged.pt")
    before = b.read_bytes()
    r = nmt_here("average", a, b, "-o", b)  # in this process: a refusal needs none of its own
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert [x for x in r.stderr.splitlines() if x.startswith("error:")] == [
        f"error: --output {b}: is the input {b}; the average would replace it: write it to "
        "another file"
    ]
    assert b.read_bytes() == before


def test_average_names_the_mismatching_tensor_and_is_order_independent(tmp_path, toy_vocabs):
    """NMT-26: the refusal names the tensor and both shapes; float64 accumulation."""
    src, tgt = toy_vocabs
    cfg = _cfg()
    paths = []
    for i in range(4):
        m = tiny_model(src, tgt)
        torch.manual_seed(i)  # after tiny_model, which seeds itself: four different files
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(torch.rand_like(p) * 1e3)  # wide range: float32 sums depend on order
        payload = make_payload(cfg, m, src, tgt, run_id="one-run")
        save_atomic(payload, tmp_path / f"m{i}.pt")
        paths.append(tmp_path / f"m{i}.pt")
    fwd = average_checkpoints(paths)["model"]
    rev = average_checkpoints(paths[::-1])["model"]
    loaded = [read_payload(p)["model"] for p in paths]
    for key, value in fwd.items():
        assert torch.equal(value, rev[key]), key
        if value.is_floating_point():
            exact = sum(x[key].double() for x in loaded) / len(loaded)
            assert torch.equal(value, exact.to(value.dtype)), key
    bad = read_payload(paths[0])
    key = next(iter(bad["model"]))
    shape = tuple(bad["model"][key].shape)
    bad["model"][key] = torch.zeros(shape[0] + 1, *shape[1:])
    torch.save(bad, tmp_path / "bad.pt")
    with pytest.raises(
        CheckpointError,
        match=rf"bad.pt: .*tensor '{key}' has shape "
        rf"\({shape[0] + 1}, .*\) here but \({shape[0]}, .*\) there",
    ):
        average_checkpoints([paths[0], tmp_path / "bad.pt", paths[1]])


def test_an_average_with_one_of_its_own_inputs_is_refused(tmp_path, toy_vocabs):
    """An averaged checkpoint given to ``nmt average`` together with one of its own inputs
    (found 2026-12-05: accepted silently, counting that input twice); also one level
    down, an average of averages, and for a renamed copy of the input."""
    a, b, c = (tmp_path / f"step_{i}.pt" for i in (1, 2, 3))
    for i, p in enumerate((a, b, c)):
        _save(p, toy_vocabs, seed=i, run_id="r" * 32)
    avg = tmp_path / "averaged.pt"
    save_atomic(average_checkpoints([a, b]), avg)
    with pytest.raises(
        CheckpointError,
        match=rf"{avg} is an average that already includes "
        rf"{b}; averaging them together would count {b} twice",
    ):
        average_checkpoints([avg, b])
    copy = tmp_path / "renamed.pt"
    shutil.copyfile(a, copy)
    with pytest.raises(CheckpointError, match=f"already includes {copy}"):
        average_checkpoints([copy, avg])
    again = tmp_path / "again.pt"
    save_atomic(average_checkpoints([avg, c]), again)  # not one of its inputs: accepted
    with pytest.raises(CheckpointError, match=f"{again} is an average that already includes"):
        average_checkpoints([again, a])
