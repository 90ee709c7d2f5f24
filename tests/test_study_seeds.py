"""The study's seed axis and configs/study_deen_heads_converged.yaml (issue 49), planned dry."""

import dataclasses
from pathlib import Path

import pytest

from nmt.config.load import load_study_config
from nmt.config.schema import ConfigError
from nmt.study.plan import StudyError, plan

REPO = Path(__file__).resolve().parents[1]
BASE = str(REPO / "configs" / "multi30k_deen_additive.yaml")


def _study(tmp_path, monkeypatch, **changes):
    monkeypatch.chdir(tmp_path)  # no runs/ here: every model is planned to train
    study = load_study_config(REPO / "configs" / "study_deen_heads_converged.yaml")
    return dataclasses.replace(study, base_config=BASE, **changes)


def test_heads_study_plans_the_six_new_models_beside_the_converged_three(tmp_path, monkeypatch):
    runs = plan(_study(tmp_path, monkeypatch))
    names = [r.cfg.name for r in runs]
    assert names == [
        "deen_conv_none",
        "deen_conv_additive",
        "deen_conv_dot",
        "deen_conv_local_m",
        "deen_conv_local_p",
        "deen_conv_multihead-4h",
        "deen_conv_multihead-1h",
        "deen_conv_multihead-4h_s2",
        "deen_conv_multihead-1h_s2",
    ]
    assert [r.label for r in runs][-2:] == ["multihead-4h_s2", "multihead-1h_s2"]
    assert all(r.action == "train" for r in runs)
    by = {r.label: r.cfg for r in runs}
    for label, heads, seed in (
        ("multihead-4h", 4, 1),
        ("multihead-4h_s2", 4, 2),
        ("multihead-1h", 1, 1),
        ("multihead-1h_s2", 1, 2),
    ):
        c = by[label]
        assert (c.model.attention, c.model.heads, c.train.seed) == ("multihead", heads, seed)
    for c in by.values():  # the converged study's size and stopping rule, for every model
        assert (c.model.enc_hidden, c.model.dec_hidden, c.model.emb_dim) == (128, 256, 128)
        assert (c.train.max_epochs, c.train.patience, c.train.max_minutes) == (40, 3, None)
        assert c.data.train_join_ks == (2, 3, 4) and c.data.max_train_words == 50
        assert c.train.threads == 1
    converged = load_study_config(REPO / "configs" / "study_deen_converged.yaml")
    old = {r.label: r.cfg for r in plan(dataclasses.replace(converged, base_config=BASE))}
    for label in ("none", "additive", "dot"):  # the same runs, so they are reused
        assert by[label] == old[label]


def test_seed_runs_are_the_same_tiny_model_with_another_seed(tmp_path, monkeypatch):
    from nmt.model.seq2seq import build_model

    tiny = (
        "model.emb_dim=16",
        "model.enc_hidden=16",
        "model.dec_hidden=32",
        "model.attn_dim=16",
        "model.output_dim=16",
    )
    runs = {r.label: r for r in plan(_study(tmp_path, monkeypatch, overrides=tiny))}
    a, b = runs["multihead-4h"].cfg, runs["multihead-4h_s2"].cfg
    assert dataclasses.replace(b, name=a.name, train=dataclasses.replace(b.train, seed=1)) == a
    sizes = {
        label: sum(p.numel() for p in build_model(runs[label].cfg.model, 40, 40).parameters())
        for label in ("multihead-4h", "multihead-1h")
    }
    assert sizes["multihead-4h"] == sizes["multihead-1h"]  # equal total size
    assert runs["multihead-1h_s2"].overrides(_study(tmp_path, monkeypatch))[-3:] == [
        "train.seed=2",
        "model.attention=multihead",
        "name=deen_conv_multihead-1h_s2",
    ]


def test_seed_axis_errors(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="seed_models: 'multihead-2h' is not a model"):
        plan(_study(tmp_path, monkeypatch, seed_models=("multihead-2h",)))
    with pytest.raises(StudyError, match="would be the same model"):
        plan(_study(tmp_path, monkeypatch, extra_seeds=(1,)))  # 1 is the base config's seed
    path = tmp_path / "s.yaml"
    path.write_text("seed_models: [additive]\n")
    with pytest.raises(ConfigError, match="extra_seeds: expected distinct seeds"):
        load_study_config(path)
