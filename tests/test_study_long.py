"""The long-sentence study (issue 9) end to end on a slice: joined training pairs, joined
validation, the training-length axis (-N models), and the report's length-ratio, brevity
penalty, drop and long-alignment sections."""

import json
from pathlib import Path

import pytest

from nmt.config.load import load_study_config
from nmt.config.schema import ConfigError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def long_study(tmp_path_factory):
    from conftest import run_tiny_study

    tmp = tmp_path_factory.mktemp("long_study")
    cfg, _r = run_tiny_study(
        tmp,
        [
            "data.train_limit=240",
            "data.valid_limit=24",
            "data.train_join_ks=[2,3]",
            "data.train_join_per_k=30",
            "data.max_train_words=40",
            "data.valid_join_ks=[2]",
            "subwords.vocab_size=300",
            "model.emb_dim=24",
            "model.enc_hidden=24",
            "model.dec_hidden=48",
            "model.attn_dim=24",
            "model.output_dim=24",
        ],
        {
            "name": "long",
            "run_prefix": "long",
            "attentions": ["none", "additive"],
            "extra_caps": [15],
            "cap_attentions": ["additive"],
            "parallel": 2,
            "test_splits": [],
            "join_ks": [1, 4],
            "n_samples": 40,
            "buckets": "1-10,11-30,31-",
            "drop_buckets": "1-10,31-",
            "heatmap_sentences": [],
            "sampled_heatmaps": 0,
            "long_heatmap_words": [35, 70],
            "long_heatmaps": 1,
            "beam_size": 2,
            "alphas": [0.6, 1.2],
            "long_set_splits": ["test_2017_flickr"],
        },
    )
    return tmp, cfg


@pytest.mark.slow
def test_cap_axis_runs_are_trained_with_their_own_cap(long_study):
    tmp, _cfg = long_study
    runs = tmp / "runs"
    assert sorted(p.name for p in runs.iterdir()) == [
        "long_additive",
        "long_additive-15",
        "long_none",
    ]
    import yaml

    caps = {
        p.name: yaml.safe_load((p / "config.yaml").read_text())["data"]["max_train_words"]
        for p in runs.iterdir()
    }
    assert caps == {"long_additive": 40, "long_additive-15": 15, "long_none": 40}
    log = [json.loads(x) for x in (runs / "long_none" / "valid_log.jsonl").read_text().splitlines()]
    # selection on the mean of plain and joined validation BLEU
    assert all(
        x["val_bleu"] == pytest.approx((x["val_bleu_plain"] + x["val_bleu_joined"]) / 2, abs=0.011)
        for x in log
    )


@pytest.mark.slow
def test_report_shows_training_data_ratio_bp_drop_and_long_alignment(long_study):
    tmp, _cfg = long_study
    report = (tmp / "report" / "report.md").read_text()
    assert report.index("## Headline") < report.index("## Models")
    assert "| additive-15 | 15 |" in report
    assert "## Training data" in report and "| 40 | none, additive |" in report
    assert "| 15 | additive-15 |" in report
    assert "| hyp/ref length | BP |" in report
    assert "40 resamples, seed 12345" in report
    assert "## Alignment on long input" in report
    pngs = {p.name for p in (tmp / "report").glob("*.png")}
    assert {
        "long_attention_1_additive.png",
        "long_attention_1_additive-15.png",
        "training_lengths.png",
        "bleu_by_length_test_2016_flickr_joined.png",
    } <= pngs
    assert not any(p.startswith("long_attention") and "none" in p for p in pngs)
    assert "- **none** (" in report  # the fixed-vector model's output beside the heatmaps
    res = json.loads((tmp / "report" / "results.json").read_text())["test_sets"]
    joined = res["test_2016_flickr_joined"]
    assert [d["system"] for d in joined["drops"]] == ["none", "additive", "additive-15"]
    for d in joined["drops"]:
        a, b = d["bleu"]
        assert d["drop"]["delta"] == pytest.approx(a["score"] - b["score"])
    for row in joined["buckets"]:
        if row["n"]:
            assert 0 < row["brevity_penalty"] <= 1 and row["len_ratio"] > 0


@pytest.mark.slow
def test_report_decodes_with_beam_search_alpha_chosen_on_val_and_greedy_beside(long_study):
    tmp, _cfg = long_study
    report = (tmp / "report" / "report.md").read_text()
    results = json.loads((tmp / "report" / "results.json").read_text())
    assert "Decoding: beam search, beam 2" in report
    choice = results["alpha_choice"]
    assert set(choice) == {"none", "additive", "additive-15"}
    for label, c in choice.items():
        scores = c["val_score_by_alpha"]
        assert set(scores) == {"0.6", "1.2"}
        assert scores[f"{c['alpha']:g}"] == max(scores.values())
        assert f"- {label}: alpha {c['alpha']:g} chosen on the validation score" in report
        cached = list(
            (tmp / "runs" / f"long_{label}" / "hyps").glob(
                f"test_2016_flickr_joined.beam2_a{c['alpha']:g}.txt"
            )
        )
        assert cached, label
    sets = results["test_sets"]
    assert {"test_2016_flickr_joined", "test_2017_flickr_joined"} <= set(sets)
    assert "Greedy search on test_2017_flickr_joined, beside the beam" in report
    greedy = sets["test_2016_flickr_joined"]["greedy"]
    assert [d["system"] for d in greedy["drops"]] == ["none", "additive", "additive-15"]
    # Figure 2: the training-length axis of the cap attentions, with its 95% bands
    assert (tmp / "report" / "figure2_test_2016_flickr_joined.png").is_file()
    assert "![Figure 2: test_2016_flickr_joined]" in report


def test_study_cap_options_are_checked(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("attentions: [none, additive]\ncap_attentions: [dot]\nextra_caps: [30]\n")
    with pytest.raises(ConfigError, match="cap_attentions: 'dot' is not in attentions"):
        load_study_config(path)
    path.write_text("attentions: [none]\nextra_caps: [0]\ncap_attentions: [none]\n")
    with pytest.raises(ConfigError, match="extra_caps: every cap must be"):
        load_study_config(path)
    path.write_text("attentions: [none]\ndrop_buckets: '1-10'\n")
    with pytest.raises(ConfigError, match="drop_buckets: expected two ranges"):
        load_study_config(path)


def test_study_search_options_are_checked_naming_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("attentions: [none]\nbeam_size: 0\n")
    with pytest.raises(ConfigError, match=r"s\.yaml: beam_size: must be at least 1"):
        load_study_config(path)
    path.write_text("attentions: [none]\nbeam_size: 5\nalphas: [-1.0]\n")
    with pytest.raises(ConfigError, match=r"s\.yaml: alphas: expected GNMT alphas >= 0"):
        load_study_config(path)
    with pytest.raises(ConfigError, match=r"s\.yaml.*alphas: expected GNMT alphas"):
        load_study_config(path, ["alphas=[]"])


@pytest.mark.slow
def test_a_changed_budget_resumes_while_another_change_is_refused(long_study):
    from nmt.study.plan import StudyError, plan

    tmp, cfg = long_study
    raw = json.loads(cfg.read_text())
    raw["overrides"].append("train.max_steps=3")
    budget = tmp / "budget.yaml"
    budget.write_text(json.dumps(raw))
    assert {r.label: r.action for r in plan(load_study_config(budget))} == {
        "none": "resume",
        "additive": "resume",
        "additive-15": "resume",
    }
    assert {r.action for r in plan(load_study_config(cfg))} == {"reuse"}
    raw["overrides"].append("model.emb_dim=8")
    other = tmp / "other.yaml"
    other.write_text(json.dumps(raw))
    with pytest.raises(StudyError, match=r"model.emb_dim: 24 \(run\) vs 8 \(study\)"):
        plan(load_study_config(other))


@pytest.mark.slow
def test_a_run_ended_by_early_stopping_is_reused_when_only_the_budget_grows(long_study, tmp_path):
    """A larger epoch cap does not revive a run that patience ended (it would train no
    step), so --report-only can report it; a run the budget ended is still resumed."""
    import shutil

    import torch

    from nmt.study.plan import plan

    tmp, cfg = long_study
    shutil.copytree(tmp / "runs", tmp_path / "runs")
    last = tmp_path / "runs" / "long_none" / "last.pt"
    payload = torch.load(last, weights_only=True)
    payload["train_state"]["counters"].update(done=True, bad_epochs=2)
    torch.save(payload, last)
    raw = json.loads(cfg.read_text())
    raw["overrides"] = [
        o.replace(str(tmp / "runs"), str(tmp_path / "runs")) for o in raw["overrides"]
    ] + ["train.patience=2", "train.max_epochs=5"]
    grown = tmp_path / "grown.yaml"
    grown.write_text(json.dumps(raw))
    actions = {r.label: (r.action, r.note) for r in plan(load_study_config(grown))}
    assert actions["none"][0] == "reuse" and "stopped early" in actions["none"][1]
    assert actions["additive"][0] == "resume"
