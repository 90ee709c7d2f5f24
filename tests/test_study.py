"""``nmt study`` end to end on a 200-pair training slice (test sets of
:data:`conftest.STUDY_TEST_PAIRS` pairs): runs, reuse, report, plots."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.config.load import load_study_config
from nmt.config.schema import ConfigError

from conftest import STUDY_TEST_PAIRS, nmt_here

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def study_files(tmp_path_factory):
    from conftest import run_tiny_study

    tmp = tmp_path_factory.mktemp("study")
    cfg, r = run_tiny_study(
        tmp,
        [
            "data.train_limit=200",
            "data.valid_limit=30",
            "subwords.vocab_size=300",
            "model.emb_dim=32",
            "model.enc_hidden=32",
            "model.dec_hidden=64",
            "model.attn_dim=32",
            "model.output_dim=32",
        ],
        {
            "name": "tiny",
            "run_prefix": "tiny",
            "attentions": ["none", "additive", "dot"],
            "parallel": 2,
            "test_splits": ["test_2016_flickr"],
            "join_ks": [1, 3],
            "n_samples": 50,
            "heatmap_sentences": ["Ein Mann schläft."],
            "sampled_heatmaps": 1,
            "archive_dir": str(tmp / "archive"),
        },
    )
    return tmp, cfg, r


@pytest.mark.slow
def test_study_trains_each_attention_and_writes_report(study_files):
    tmp, _cfg, _r = study_files
    report = (tmp / "report" / "report.md").read_text()
    for name in ["none", "additive", "dot"]:
        assert (tmp / "runs" / f"tiny_{name}" / "best.pt").exists()
        assert f"| {name} |" in report
    assert "## test_2016_flickr\n" in report and "## test_2016_flickr_joined" in report
    assert "BLEU signature: `nrefs:1" in report
    assert "ΔBLEU vs none" in report and "(baseline)" in report
    pngs = sorted(p.name for p in (tmp / "report").glob("*.png"))
    assert "bleu_by_length_test_2016_flickr.png" in pngs
    assert "bleu_by_length_test_2016_flickr_joined.png" in pngs
    assert "attention_1_additive.png" in pngs and "attention_2_dot.png" in pngs
    assert not any("none" in p for p in pngs if p.startswith("attention"))
    assert all((tmp / "report" / p).stat().st_size < 1 << 20 for p in pngs)
    results = json.loads((tmp / "report" / "results.json").read_text())
    joined = results["test_sets"]["test_2016_flickr_joined"]["buckets"]
    # joining k=1 and k=3 gives n + n // 3 lines, every one of them in some bucket
    n = STUDY_TEST_PAIRS
    assert sum(r["n"] for r in joined if r["system"] == "none") == n + n // 3
    assert any(r["min_len"] >= 41 and r["n"] > 0 for r in joined)


@pytest.mark.slow
def test_second_study_run_reuses_finished_runs(study_files):
    tmp, cfg, _r = study_files
    r = subprocess.run(
        [sys.executable, "-m", "nmt", "study", str(cfg), "--report-only"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "nmt", "study", str(cfg)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("reused") == 3


@pytest.mark.slow
def test_changed_config_conflicts_with_existing_run(study_files):
    tmp, cfg, _r = study_files
    changed = json.loads(cfg.read_text())
    changed["overrides"].append("train.seed=99")
    other = tmp / "changed.yaml"
    other.write_text(json.dumps(changed))
    r = nmt_here("study", other, "--report-only")
    assert r.returncode == 2
    assert "trained with a different config (train.seed: 1 (run) vs 99 (study))" in r.stderr


@pytest.mark.slow
def test_report_only_names_runs_that_were_never_trained(study_files):
    tmp, cfg, _r = study_files
    spec = json.loads(cfg.read_text())
    spec["run_prefix"], spec["archive_dir"] = "ghost", str(tmp / "no_archive")
    other = tmp / "ghost.yaml"
    other.write_text(json.dumps(spec))
    r = nmt_here("study", other, "--report-only")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--report-only: no run, no model folder and no archive for " in r.stderr
    assert "ghost_dot" in r.stderr and "unfinished" not in r.stderr


@pytest.mark.slow
def test_archived_run_is_reported_without_its_checkpoint(study_files):
    tmp, cfg, _r = study_files
    archive = tmp / "archive" / "tiny_dot"
    assert sorted(p.name for p in archive.iterdir()) == [
        "checkpoint.json",
        "config.yaml",
        "heatmaps",
        "hyps",
        "summary.json",
        "train.log",
        "valid_log.jsonl",
    ]
    assert (archive / "hyps" / "test_2016_flickr_joined.txt.key.json").exists()
    spec = json.loads(cfg.read_text())
    spec["report_dir"] = str(tmp / "report_archived")
    other = tmp / "archived.yaml"
    other.write_text(json.dumps(spec))
    hidden = tmp / "hidden_dot"
    (tmp / "runs" / "tiny_dot").rename(hidden)  # runs/ lost, as in a new session
    try:
        r = subprocess.run(
            [sys.executable, "-m", "nmt", "study", str(other)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
        assert "tiny_dot: no run directory; reported from its records" in r.stderr
        assert not (tmp / "runs" / "tiny_dot").exists()  # not trained again
        old = json.loads((tmp / "report" / "results.json").read_text())["test_sets"]
        new = json.loads((tmp / "report_archived" / "results.json").read_text())["test_sets"]
        assert (
            new["test_2016_flickr_joined"]["buckets"] == old["test_2016_flickr_joined"]["buckets"]
        )
        archived_report = (tmp / "report_archived" / "report.md").read_text()
        assert "| dot |" in archived_report
        # its heatmaps were kept in the archive when it had its checkpoint
        assert "No heatmaps of" not in archived_report
        assert "![attention dot 1](attention_1_dot.png)" in archived_report
        assert "(archived heatmap, drawn when the run still had its checkpoint)" in archived_report
        assert (tmp / "report_archived" / "attention_1_dot.png").read_bytes() == (
            tmp / "report" / "attention_1_dot.png"
        ).read_bytes()
        assert "No heatmaps of" not in (tmp / "report" / "report.md").read_text()
        # an archive whose translations are gone cannot be reported from, and says so
        key = archive / "hyps" / "test_2016_flickr.txt.key.json"
        saved = key.read_text()
        key.unlink()
        r = nmt_here("study", other, "--report-only")
        key.write_text(saved)
        assert r.returncode != 0
        assert "tiny_dot: no checkpoint" in r.stderr and "train the run again" in r.stderr
        # a changed digest in checkpoint.json is blamed on that file, not on the translations
        record = archive / "checkpoint.json"
        saved = record.read_text()
        record.write_text(json.dumps({"sha256": "0" * 64}))
        r = nmt_here("study", other, "--report-only")
        record.write_text(saved)
        assert r.returncode != 0
        assert f"the sha256 in {record} (000000000000...) is not the checkpoint" in r.stderr
    finally:
        hidden.rename(tmp / "runs" / "tiny_dot")


def test_a_report_dir_that_cannot_be_written_is_refused_before_any_training():
    from nmt.commands.study import run_study
    from nmt.config.schema import StudyConfig
    from nmt.study.plan import StudyError

    study = StudyConfig(name="s", report_dir="/proc/nmt_{name}_report")
    with pytest.raises(StudyError, match="report_dir /proc/nmt_s_report: cannot write in /proc"):
        run_study(study, log=lambda m: pytest.fail(f"planned or trained: {m}"))


def test_study_config_errors(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("attentions: [none, cosine]\n")
    with pytest.raises(ConfigError, match="attentions: 'cosine'"):
        load_study_config(path)
    path.write_text("attentions: [additive]\n")
    with pytest.raises(ConfigError, match="baseline: 'none' is not in attentions"):
        load_study_config(path)


@pytest.mark.slow
def test_a_bad_study_override_names_the_study_file_and_the_override(tmp_path):
    """The override is applied to the base config, but the user wrote it in the study file."""
    path = tmp_path / "s.yaml"
    base = REPO / "configs" / "multi30k_deen_additive.yaml"
    path.write_text(
        f"base_config: {base}\nattentions: [none, additive]\noverrides: [train.thraeds=1]\n"
    )
    r = nmt_here("study", path, "--report-only")
    assert r.returncode == 2, r.stderr
    assert (
        f"error: {path}: {base} with override 'train.thraeds=1': train.thraeds: unknown key"
        in r.stderr
    )
    assert "Traceback" not in r.stderr


def _export_tiny(run: Path, out: Path) -> Path:
    """A model folder of ``run``'s best.pt as ``nmt export`` writes one (fp32 weights,
    results.json with the training record), without its test decoding."""
    from nmt.commands.export import training_record
    from nmt.model.checkpoint import load_checkpoint
    from nmt.model.folder import core_files, write_folder

    loaded = load_checkpoint(run / "best.pt")
    files = core_files(loaded.payload, "fp32")
    results = {
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "weights_dtype": "fp32",
        "training": training_record(run, loaded.cfg.to_dict()),
    }
    files["results.json"] = json.dumps(results).encode()
    write_folder(out, files, run_id=None, dtype="fp32")
    return out


@pytest.mark.slow
def test_shipped_folder_is_reported_and_missing_models_are_listed(study_files):
    """A study model with no run directory is decoded from its model folder (same numbers
    as from its run, heatmaps too), and --allow-missing reports the others, listing the
    missing one at the top, where plain --report-only still refuses."""
    tmp, cfg, _r = study_files
    folder = _export_tiny(tmp / "runs" / "tiny_additive", tmp / "folders" / "tiny-additive")
    spec = json.loads(cfg.read_text())
    spec["report_dir"] = str(tmp / "report_shipped")
    spec["archive_dir"] = str(tmp / "archive_shipped")  # dot has no archive here
    spec["model_folders"] = [str(folder)]
    other = tmp / "shipped.yaml"
    other.write_text(json.dumps(spec))
    hidden = {name: tmp / f"hidden_{name}" for name in ("tiny_additive", "tiny_dot")}
    for name, where in hidden.items():
        (tmp / "runs" / name).rename(where)  # runs/ lost, as in a new session
    try:
        cmd = [sys.executable, "-m", "nmt", "study", str(other), "--report-only"]
        r = nmt_here(*cmd[3:])
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert "no model folder and no archive for " in r.stderr and "--allow-missing" in r.stderr
        assert "tiny_dot" in r.stderr and "tiny_additive" not in r.stderr
        r = subprocess.run(
            [*cmd, "--allow-missing"], cwd=REPO, capture_output=True, text=True, timeout=600
        )
        assert r.returncode == 0, r.stderr
        assert "tiny_dot: not trained yet" in r.stderr
        assert not (tmp / "runs" / "tiny_additive").exists()  # nothing written for it
        report = (tmp / "report_shipped" / "report.md").read_text()
        assert report.index("## Missing models (partial report)") < report.index("## Models")
        assert "1 of 3 models of the study are not in this report yet" in report
        assert "- dot (`tiny_dot`): not trained yet (no run directory" in report
        assert "| additive | " in report and f"| from {folder} |" in report
        assert "| dot |" not in report and "(baseline)" in report
        assert (tmp / "report_shipped" / "attention_1_additive.png").exists()
        new = json.loads((tmp / "report_shipped" / "results.json").read_text())
        old = json.loads((tmp / "report" / "results.json").read_text())
        assert new["missing"] == ["tiny_dot"]

        def scores(results):
            rows = results["test_sets"]["test_2016_flickr_joined"]["buckets"]
            return [(r["system"], r["bleu"]) for r in rows if r["system"] != "dot"]

        assert scores(new) == scores(old)  # the folder's fp32 weights are the run's
        # its translations are archived (keyed by the folder's weights), its records not
        shipped = tmp / "archive_shipped" / "tiny_additive"
        assert sorted(p.name for p in shipped.iterdir()) == ["hyps"]
        assert (shipped / "hyps" / "test_2016_flickr.txt.key.json").exists()
    finally:
        for name, where in hidden.items():
            where.rename(tmp / "runs" / name)


def test_archived_heatmap_is_used_only_under_its_key(tmp_path):
    """A heatmap kept in the archive stands for one drawn from the same checkpoint, source
    sentence and decoding, and for nothing else."""
    from nmt.config.load import from_dict
    from nmt.inference.translate import Decoding
    from nmt.study.heatmaps import _archived, _keep, _key
    from nmt.study.plan import PlannedRun

    run = PlannedRun("dot", from_dict({"name": "r"}), "reuse", archive=tmp_path / "archive")
    png = tmp_path / "attention_1_dot.png"
    png.write_bytes(b"png")
    key = _key("ab" * 32, "Ein Mann.", Decoding(beam_size=1))
    _keep(run, png, key, "A man.")
    out = tmp_path / "report"
    out.mkdir()
    for other in (
        _key("cd" * 32, "Ein Mann.", Decoding(beam_size=1)),
        _key("ab" * 32, "Eine Frau.", Decoding(beam_size=1)),
        _key("ab" * 32, "Ein Mann.", Decoding(beam_size=2)),
    ):
        assert _archived(run, png.name, other, out) is None
    assert not (out / png.name).exists()
    assert _archived(run, png.name, key, out) == "A man."
    assert (out / png.name).read_bytes() == b"png"
