"""The study's seed axis and configs/study_deen_heads_converged.yaml (issue 49), planned dry."""

import dataclasses
from pathlib import Path

import pytest

from nmt.config.load import load_study_config
from nmt.config.schema import ConfigError
from nmt.study.plan import StudyError, plan

REPO = Path(__file__).resolve().parents[1]
BASE = str(REPO / "configs" / "multi30k_deen_additive.yaml")


FOLDERS = (str(REPO / "models" / "deen-additive"), str(REPO / "models" / "deen-none"))


def _study(tmp_path, monkeypatch, **changes):
    monkeypatch.chdir(tmp_path)  # no runs/ here: every model is planned to train
    study = load_study_config(REPO / "configs" / "study_deen_heads_converged.yaml")
    changes = {"model_folders": (), **changes}  # the shipped folders: tests below
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


def test_heads_study_reports_the_shipped_additive_and_none_from_their_folders(
    tmp_path, monkeypatch
):
    """models/deen-additive and models/deen-none are the converged study's additive and
    none: the heads study decodes them from the folders instead of training them (the
    none folder's search.alpha, set by nmt export, may differ from the study's)."""
    study = load_study_config(REPO / "configs" / "study_deen_heads_converged.yaml")
    assert study.archive_dir == "results/{name}/models"
    assert study.model_folders == ("models/deen-additive", "models/deen-none")
    runs = {r.label: r for r in plan(_study(tmp_path, monkeypatch, model_folders=FOLDERS))}
    for label, folder in (("additive", FOLDERS[0]), ("none", FOLDERS[1])):
        r = runs[label]
        assert (r.action, r.checkpoint, r.note) == ("shipped", Path(folder), f"from {folder}")
    assert {r.action for label, r in runs.items() if label not in ("additive", "none")} == {"train"}
    from nmt.study.models import source_of, summary_of

    assert source_of(runs["additive"]) == f"from {FOLDERS[0]} (fp16 weights)"
    s = summary_of(runs["additive"])  # the folder's results.json, as a run's summary.json
    assert (s["parameters"], s["epochs"], s["steps"], s["best_val_bleu"]) == (
        3967099,
        20,
        18080,
        37.05,
    )


def test_a_model_folder_that_is_not_the_studys_model_is_refused(tmp_path, monkeypatch):
    with pytest.raises(
        StudyError,
        match=r"models/deen-none/config.yaml was trained with a different config than the "
        r"study's deen_conv_none \(model.dropout: 0.3 \(folder\) vs 0.2 \(study\)\); remove",
    ):
        study = _study(tmp_path, monkeypatch, model_folders=FOLDERS)
        plan(dataclasses.replace(study, overrides=(*study.overrides, "model.dropout=0.2")))
    with pytest.raises(StudyError, match="holds run 'deen_conv_additive', which is no model"):
        plan(_study(tmp_path, monkeypatch, model_folders=FOLDERS[:1], run_prefix="other"))
    with pytest.raises(StudyError, match=r"model_folders: nowhere: not found \(expected a folder"):
        plan(_study(tmp_path, monkeypatch, model_folders=("nowhere",)))
    (tmp_path / "plain").mkdir()
    with pytest.raises(StudyError, match="plain: no manifest.json: not a model folder"):
        plan(_study(tmp_path, monkeypatch, model_folders=("plain",)))
    with pytest.raises(StudyError, match="both hold run 'deen_conv_additive'"):
        plan(_study(tmp_path, monkeypatch, model_folders=(FOLDERS[0], f"{FOLDERS[0]}/")))


def test_allow_missing_needs_report_only(tmp_path, monkeypatch):
    from nmt.commands.study import run_study

    with pytest.raises(StudyError, match="--allow-missing: only with --report-only"):
        run_study(_study(tmp_path, monkeypatch), allow_missing=True)
    with pytest.raises(StudyError, match="no model of the study is finished, archived or shipped"):
        run_study(_study(tmp_path, monkeypatch), report_only=True, allow_missing=True)
