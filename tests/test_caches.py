"""Nothing stale (issue 29): every cache nmt keeps is keyed by the content it was made from,
so a change that keeps line count, size and modification time (two lines swapped, then
``os.utime``) is seen. The training store's own cases are in tests/test_store.py."""

import dataclasses
import json
import os
from pathlib import Path

import torch

from nmt.config.load import from_dict
from nmt.model.checkpoint import make_payload, save_atomic
from nmt.study.decode import TestSet as EvalSet
from nmt.study.decode import (
    beam_decoding,
    decode,
    greedy_decoding,
    load_models,
)
from nmt.study.plan import PlannedRun

from conftest import TOY_PAIRS, tiny_model

SOURCES = [s for s, _ in TOY_PAIRS]


def _run(tmp_path: Path, toy_vocabs, seed: int = 0) -> PlannedRun:
    """A run directory holding a tiny model's best.pt (weights from ``seed``)."""
    cfg = from_dict(
        {
            "name": "c",
            "model": {
                "emb_dim": 16,
                "enc_hidden": 16,
                "dec_hidden": 32,
                "attn_dim": 16,
                "output_dim": 16,
                "dropout": 0.0,
            },
            "train": {"out_dir": str(tmp_path / "run")},
        }
    )
    src, tgt = toy_vocabs
    model = tiny_model(src, tgt)
    torch.manual_seed(seed)
    for p in model.parameters():
        p.data.normal_(0, 0.5)
    save_atomic(make_payload(cfg, model, src, tgt), tmp_path / "run" / "best.pt")
    return PlannedRun("additive", cfg, "reuse")


def _keep_time(path: Path, change) -> None:
    """Apply ``change()`` to ``path`` and give it back its modification time (``cp -p``)."""
    before = path.stat()
    change()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _decode(run: PlannedRun, ts: EvalSet, decoding=None) -> tuple[list[str], list[str]]:
    """(translations, log lines) of ``ts``, the checkpoint loaded afresh."""
    models, digests = load_models([run])
    loaded = models[run.label]
    logs: list[str] = []
    hyps = decode(
        run, loaded, ts, decoding or greedy_decoding(run.cfg), logs.append, digests[run.label]
    )
    return hyps, logs


def test_study_translations_are_reused_only_for_the_same_content(tmp_path, toy_vocabs):
    run = _run(tmp_path, toy_vocabs)
    ts = EvalSet("t", SOURCES, SOURCES, "")
    first, logs = _decode(run, ts)
    assert any("translating t.txt" in x and "not cached yet" in x for x in logs)
    again, logs = _decode(run, ts)
    assert again == first and logs == []  # reused
    cache = run.out_dir / "hyps" / "t.txt"
    assert json.loads((cache.parent / "t.txt.key.json").read_text())["key"]["lines"] == 6

    # two source lines swapped: same count, same size
    swapped = EvalSet("t", [SOURCES[1], SOURCES[0], *SOURCES[2:]], SOURCES, "")
    hyps, logs = _decode(run, swapped)
    assert hyps == [first[1], first[0], *first[2:]]
    assert any("the source lines changed" in x for x in logs)

    # the cached file edited (same line count), its time restored
    _keep_time(cache, lambda: cache.write_text("x\n" * 6, encoding="utf-8"))
    hyps, logs = _decode(run, swapped)
    assert hyps[0] == first[1] and any("not the lines their key records" in x for x in logs)

    # another decoding under the same file name (greedy with another length limit)
    models, _ = load_models([run])
    short = dataclasses.replace(greedy_decoding(run.cfg), max_ratio=0.1)
    _hyps, logs = _decode(run, swapped, short)
    assert any("the decoding settings changed" in x for x in logs)
    key = json.loads((cache.parent / "t.txt.key.json").read_text())["key"]
    assert key["decoding"]["max_ratio"] == 0.1


def test_study_translations_of_a_replaced_checkpoint_with_its_old_time_are_made_again(
    tmp_path, toy_vocabs
):
    run = _run(tmp_path, toy_vocabs, seed=0)
    ts = EvalSet("t", SOURCES, SOURCES, "")
    models, _ = load_models([run])
    beam = beam_decoding(run.cfg, 2, 0.6)
    first, _ = _decode(run, ts, beam)
    best = run.out_dir / "best.pt"
    other = _run(tmp_path / "other", toy_vocabs, seed=1).out_dir / "best.pt"
    # best.pt replaced by another model, as `cp -p` would: older than the cache
    _keep_time(best, lambda: best.write_bytes(other.read_bytes()))
    os.utime(best, ns=(1, 1))
    hyps, logs = _decode(run, ts, beam)
    assert any("the checkpoint changed" in x for x in logs)
    fresh, logs = _decode(_run(tmp_path / "fresh", toy_vocabs, seed=1), ts, beam)
    assert hyps == fresh and hyps != first


def test_served_test_bleu_is_shown_only_beside_the_weights_it_scored(tmp_path, toy_vocabs):
    from nmt.commands.evaluate import evaluate_checkpoints
    from nmt.data.digest import file_sha256
    from nmt.serve.registry import _stored_scores

    run = _run(tmp_path, toy_vocabs)
    best = run.out_dir / "best.pt"
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s, _ in TOY_PAIRS))
    (tmp_path / "ref.txt").write_text("".join(t + "\n" for _, t in TOY_PAIRS))
    records = evaluate_checkpoints(
        [best], src=tmp_path / "src.txt", ref=tmp_path / "ref.txt", beam_size=1, device="cpu"
    ).json
    digest = file_sha256(best)
    assert records[0]["checkpoint_sha256"] == digest
    (run.out_dir / "eval.json").write_text(json.dumps(records))
    shown, stale, _val = _stored_scores(best, digest)
    assert shown is not None and shown["status"] == "verified" and stale is None
    assert shown["bleu"] == records[0]["bleu"]
    # best.pt replaced by other weights under the same name, with its old time
    other = _run(tmp_path / "other", toy_vocabs, seed=1).out_dir / "best.pt"
    _keep_time(best, lambda: best.write_bytes(other.read_bytes()))
    shown, stale, _val = _stored_scores(best, file_sha256(best))
    assert shown is None and stale is not None and stale["file"] == "eval.json"
    # a record of an older nmt, without a digest: matched by name, shown as unverified
    legacy = [{k: v for k, v in records[0].items() if k != "checkpoint_sha256"}]
    (run.out_dir / "eval.json").write_text(json.dumps(legacy))
    shown, _stale, _val = _stored_scores(best, file_sha256(best))
    assert shown is not None and shown["status"] == "unverified"


def test_served_study_example_ids_need_the_lines_the_study_decoded():
    from nmt.data.digest import lines_sha256
    from nmt.serve.studies import _test_set
    from nmt.serve.testsets import TestSet as ServedSet

    lines = ["ein hund .", "zwei katzen spielen im park ."]
    record = {
        "buckets": [{"min_len": 1, "max_len": None, "system": "a", "n": 2}],
        "sources_sha256": lines_sha256(lines),
    }
    same = _test_set("t", record, ServedSet("t", lines, lines, ""))
    assert same["buckets"][0]["example_ids"] == [0, 1] and same["notes"] == []
    swapped = _test_set("t", record, ServedSet("t", lines[::-1], lines, ""))
    assert swapped["buckets"][0]["example_ids"] is None
    assert "its source lines differ" in swapped["notes"][0]


def test_a_checkpoints_digest_is_of_the_bytes_loaded(tmp_path, toy_vocabs, monkeypatch):
    """A best.pt replaced while it is loaded keeps the digest of the weights loaded, and a
    missing one is a CheckpointError, not a raw OSError."""
    import shutil

    import pytest

    import nmt.model.checkpoint as checkpoint
    from nmt.data.digest import file_sha256
    from nmt.model.checkpoint import CheckpointError

    run = _run(tmp_path, toy_vocabs)
    best = tmp_path / "run" / "best.pt"
    original = file_sha256(best)
    expected = torch.load(best, weights_only=True)["model"]
    other = _run(tmp_path / "other", toy_vocabs, seed=1).cfg.train.out_dir
    real_load = torch.load

    def replaced_meanwhile(source, *args, **kwargs):
        shutil.copy(Path(other) / "best.pt", best)
        return real_load(source, *args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "load", replaced_meanwhile)
    models, digests = load_models([run])
    monkeypatch.setattr(checkpoint.torch, "load", real_load)
    assert digests[run.label] == original != file_sha256(best)
    loaded = models[run.label]
    assert loaded is not None
    assert all(torch.equal(v, expected[k]) for k, v in loaded.model.state_dict().items())
    best.unlink()
    with pytest.raises(CheckpointError, match="best.pt: checkpoint not found"):
        load_models([run])
