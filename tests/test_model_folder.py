"""Model folders (nmt/model/folder.py) and ``nmt export``: a tiny run trained here in seconds
is exported, then loaded by path, by a shipped name and from an offline Hugging Face Hub
cache, and gives the checkpoint's translations; a tampered or missing file is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nmt.cli.app import app
from nmt.config.load import from_dict
from nmt.model import folder as folder_module
from nmt.model.checkpoint import CheckpointError, load_checkpoint, save_atomic
from nmt.model.folder import MANIFEST, WEIGHTS, read_manifest

from conftest import TOY_PAIRS, write_split

runner = CliRunner()
SOURCES = ["ein mann läuft .", "zwei hunde spielen im schnee .", "eine katze schläft ."]


def _corpus(root: Path, src: str = "de", tgt: str = "en") -> Path:
    data = root / "data"
    for split, times in (("train", 4), ("val", 1), ("test_2016_flickr", 1)):
        write_split(data, split, src, [s for s, _ in TOY_PAIRS] * times)
        write_split(data, split, tgt, [t for _, t in TOY_PAIRS] * times)
    return data


def _train(root: Path, name: str, src: str = "de", tgt: str = "en") -> Path:
    """A tiny run, trained here in a few seconds: its run directory."""
    from nmt.commands.train import run_training

    data = _corpus(root / name, src, tgt)
    cfg = from_dict(
        {
            "name": name,
            "data": {
                "source": "dir",
                "path": str(data),
                "src_lang": src,
                "tgt_lang": tgt,
                "test_splits": ["test_2016_flickr"],
            },
            "subwords": {"vocab_size": 40, "model_type": "bpe"},
            "model": {
                "emb_dim": 16,
                "enc_hidden": 16,
                "dec_hidden": 32,
                "attn_dim": 16,
                "output_dim": 16,
                "dropout": 0.0,
            },
            "train": {
                "batch_size": 6,
                "max_epochs": 2,
                "threads": 1,
                "device": "cpu",
                "progress": False,
                "seed": 1,
                "out_dir": str(root / "runs" / name),
                "precision": "fp32",
            },  # auto would measure the CPU first (seconds)
            "search": {"beam_size": 2, "precision": "fp32"},
        }
    )
    run_training(cfg, log=lambda m: None)
    return root / "runs" / name


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(run directory, its model folder exported in fp16)."""
    root = tmp_path_factory.mktemp("folder")
    run = _train(root, "toy_deen")
    out = root / "toy-deen"
    r = runner.invoke(app, ["export", str(run), str(out), "--dtype", "fp16"])
    assert r.exit_code == 0, r.output
    return run, out


def _translate(model: str, tmp: Path) -> list[str]:
    src = tmp / "src.de"
    src.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    out = tmp / f"out{len(list(tmp.iterdir()))}.en"
    r = runner.invoke(app, ["translate", model, "-i", str(src), "-o", str(out), "--beam", "2"])
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8").splitlines()


def test_export_writes_the_hub_layout_with_card_and_evidence(exported):
    run, out = exported
    names = {p.name for p in out.iterdir()}
    assert {
        "model.safetensors",
        "config.yaml",
        "source.spm.model",
        "target.spm.model",
        "manifest.json",
        "README.md",
        "results.json",
        "valid_log.jsonl",
        "test_2016_flickr.hyp.en.gz",
        "test_2016_flickr_joined.hyp.en.gz",
        "val.hyp.en.gz",
    } <= names
    manifest = read_manifest(out)
    assert manifest["dtype"] == "fp16" and set(manifest["files"]) == names - {MANIFEST}
    card = (out / "README.md").read_text(encoding="utf-8")
    front = card.split("---\n")[1]
    import yaml

    meta = yaml.safe_load(front)
    assert meta["language"] == ["de", "en"] and meta["library_name"] == "nmt"
    metrics = meta["model-index"][0]["results"][0]["metrics"]
    results = json.loads((out / "results.json").read_text())
    test = results["test"]["test_2016_flickr"]
    assert metrics[0]["value"] == round(test["bleu"], 2) and metrics[2]["type"] == "chrf"
    assert test["signature"] in card and test["papers_signature"] in card
    assert "## BLEU by source length" in card and "## How to use it" in card
    # the card's joined set is k = 1..5 of the 6 test pairs: 6 + 3 + 2 + 1 + 1 lines
    joined = results["other"]["test_2016_flickr_joined"]
    assert joined["n_sentences"] == 13
    # the stored translations are the ones scored: re-scoring them gives the same BLEU
    import gzip

    import sacrebleu

    hyps = gzip.decompress((out / test["hypotheses"]).read_bytes()).decode().splitlines()
    refs = [t for _, t in TOY_PAIRS]
    assert sacrebleu.corpus_bleu(hyps, [refs]).score == pytest.approx(test["bleu"], abs=1e-6)
    assert results["chosen_checkpoint_sha256"] == load_checkpoint(out, with_digest=True).sha256


def test_round_trip_translates_as_the_checkpoint(exported, tmp_path):
    run, out = exported
    # fp16 storage is exact for the test: compare with the checkpoint's weights rounded
    ckpt, folder = load_checkpoint(run / "best.pt"), load_checkpoint(out)
    assert ckpt.cfg == folder.cfg and ckpt.src_vocab.model_bytes == folder.src_vocab.model_bytes
    for (k, a), (k2, b) in zip(
        ckpt.model.state_dict().items(), folder.model.state_dict().items(), strict=True
    ):
        assert k == k2 and b.dtype == a.dtype and (a.half().float() == b).all()
    # the folder translates as the checkpoint with its weights rounded the same way
    rounded = dict(
        ckpt.payload,
        model={
            k: v.half().float() if v.is_floating_point() else v
            for k, v in ckpt.payload["model"].items()
        },
    )
    save_atomic(rounded, tmp_path / "rounded.pt")
    assert _translate(str(out), tmp_path) == _translate(str(tmp_path / "rounded.pt"), tmp_path)


def test_fp32_export_is_bit_exact_and_translates_as_the_checkpoint(exported, tmp_path):
    run, _ = exported
    out = tmp_path / "fp32"
    r = runner.invoke(app, ["export", str(run / "best.pt"), str(out), "--dtype", "fp32"])
    assert r.exit_code == 0, r.output
    a, b = load_checkpoint(run / "best.pt"), load_checkpoint(out)
    assert all(
        (x == y).all()
        for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True)
    )
    assert _translate(str(out), tmp_path) == _translate(str(run / "best.pt"), tmp_path)
    r = runner.invoke(app, ["export", str(run), str(out)])  # never over a folder
    assert r.exit_code == 2 and "not an empty directory" in r.output


def test_tampered_and_missing_files_are_refused(exported, tmp_path):
    _, out = exported
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "config.yaml").write_text((copy / "config.yaml").read_text() + "# edited\n")
    with pytest.raises(CheckpointError, match=r"config\.yaml: altered"):
        load_checkpoint(copy)
    r = runner.invoke(app, ["translate", str(copy), "-i", "/dev/null"])
    assert r.exit_code == 2 and "config.yaml: altered" in r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    shutil.copy(out / "config.yaml", copy / "config.yaml")
    load_checkpoint(copy)  # the original bytes again: accepted
    (copy / WEIGHTS).unlink()
    r = runner.invoke(app, ["evaluate", str(copy)])
    assert r.exit_code == 2 and "model.safetensors: missing from the model folder" in r.output
    # a manifest naming a file outside the folder is refused before anything is read
    shutil.copy(out / WEIGHTS, copy / WEIGHTS)
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["files"]["../x"] = {"sha256": "0" * 64}
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="bad file entry '../x'"):
        load_checkpoint(copy)


def test_offline_hub_cache_loads(exported, tmp_path, monkeypatch):
    """A cache in huggingface_hub's own layout: models--ORG--NAME/{refs/main,snapshots/REV}."""
    _, out = exported
    cache = tmp_path / "hub"
    repo = cache / "models--nmt-org--toy-deen"
    revision = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(out, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    loaded = load_checkpoint("hf://nmt-org/toy-deen", with_digest=True)
    assert loaded.sha256 == load_checkpoint(out, with_digest=True).sha256
    assert _translate("hf://nmt-org/toy-deen", tmp_path) == _translate(str(out), tmp_path)
    assert load_checkpoint(f"hf://nmt-org/toy-deen@{revision}").cfg.name == "toy_deen"
    with pytest.raises(CheckpointError, match="HF_HUB_OFFLINE is set"):
        load_checkpoint("hf://nmt-org/not-cached")
    with pytest.raises(CheckpointError, match="hf://ORG/NAME"):
        load_checkpoint("hf://just-a-name")


def test_shipped_names_resolve_and_unknown_names_are_listed(exported, tmp_path, monkeypatch):
    _, out = exported
    models = tmp_path / "models"
    models.mkdir()
    shutil.copytree(out, models / "toy-deen")
    monkeypatch.setattr(folder_module, "SHIPPED_DIR", models)
    monkeypatch.chdir(tmp_path)
    assert _translate("toy-deen", tmp_path) == _translate(str(out), tmp_path)
    r = runner.invoke(app, ["evaluate", "toy-dee"])
    assert r.exit_code == 2 and "known: toy-deen" in r.output
    import torch

    from nmt.serve.registry import check_specs, default_specs, load_entry

    assert default_specs() == [str(models / "toy-deen")]
    entry = load_entry(None, Path("toy-deen"), torch.device("cpu"), threads=1)
    assert entry.id == "additive"  # a plain spec is served under its attention type
    # nmt serve shows the test BLEU of the folder's results.json, verified by its sha256
    assert entry.info["test_bleu"]["status"] == "verified"
    assert check_specs(["toy-deen", "x=hf://a/b"])[0][1] == Path("toy-deen")
    with pytest.raises(CheckpointError, match="known: toy-deen"):
        check_specs(["toy-deen-2"])
    monkeypatch.setattr(folder_module, "SHIPPED_DIR", tmp_path / "none")
    with pytest.raises(ValueError, match="give at least one --model"):
        check_specs(default_specs())


def test_evaluate_joined_split_and_a_folder_of_another_pair(exported, tmp_path):
    run, out = exported
    js = tmp_path / "scores.json"
    r = runner.invoke(
        app,
        [
            "evaluate",
            str(out),
            "--split",
            "test_2016_flickr_joined",
            "--buckets",
            "1-10,11-",
            "--precision",
            "fp32",
            "--json",
            str(js),
        ],
    )
    assert r.exit_code == 0, r.output
    record = json.loads(js.read_text())[0]
    assert record["test_set"] == "test_2016_flickr_joined" and record["n_sentences"] == 13
    results = json.loads((out / "results.json").read_text())
    assert record["bleu"] == pytest.approx(results["other"]["test_2016_flickr_joined"]["bleu"])
    # a de->en folder asked to score French files
    fr = _corpus(tmp_path / "fr", "fr", "en")
    r = runner.invoke(
        app, ["evaluate", str(out), "--src", str(fr / "val.fr"), "--ref", str(fr / "val.en")]
    )
    assert r.exit_code == 2 and "a fr file by its name" in r.output and "de->en" in r.output


def test_evaluate_columns_are_named_as_typed(exported, tmp_path, monkeypatch):
    # the run inside is named toy_deen; the user typed the folder's path and its shipped name
    _, out = exported
    models = tmp_path / "models"
    models.mkdir()
    shutil.copytree(out, models / "toy-deen")
    monkeypatch.setattr(folder_module, "SHIPPED_DIR", models)
    monkeypatch.chdir(tmp_path)
    js = tmp_path / "scores.json"
    r = runner.invoke(
        app,
        [
            "evaluate",
            str(out),
            "toy-deen",
            "toy-deen",
            "--buckets",
            "1-",
            "--precision",
            "fp32",
            "--json",
            str(js),
        ],
    )
    assert r.exit_code == 0, r.output
    header = next(line for line in r.output.splitlines() if line.startswith(" " * 24))
    assert header.split() == [str(out), "toy-deen", "toy-deen", "(2)"]
    assert f"decoding of {str(out)}: " in r.output and "decoding of toy-deen: " in r.output
    assert "toy_deen" not in r.output  # the run's internal name is nowhere in the table
    records = json.loads(js.read_text())
    assert [x["label"] for x in records] == [str(out), "toy-deen", "toy-deen (2)"]
    assert {x["name"] for x in records} == {"toy_deen"}  # the JSON keeps the run's name
