"""A run directory is reused only by ``--resume``, and only from its own files
(shared/cases NMT-37): a fresh run never replaces an earlier run's ``best.pt`` or mixes
with its log, ``--resume`` without ``last.pt`` continues the run's latest checkpoint with
one history in ``valid_log.jsonl``, ``nmt study`` plans the same way, and a run keeps its
run id across resume.

The corpus is the cases' toy corpus (16 training, 6 validation pairs), copied to
tests/fixtures/toy16 and mapped onto nmt's config as shared/cases/nmt_toy.yaml does."""

import json
from pathlib import Path

import pytest

from nmt.commands.train import run_training
from nmt.config.load import load_config, load_study_config
from nmt.model.checkpoint import CheckpointError, read_payload, save_atomic
from nmt.model.rundir import refuse_reuse
from nmt.study.plan import StudyError, plan

from conftest import nmt_here

TOY16 = Path(__file__).resolve().parent / "fixtures" / "toy16"
KEYS = ("step", "epoch", "train_loss", "val_loss", "val_bleu", "val_chrf")


def _toy_config(tmp: Path) -> Path:
    path = tmp / "toy.yaml"
    path.write_text(
        json.dumps(
            {
                "name": "toy",
                "data": {
                    "source": "dir",
                    "path": str(TOY16),
                    "train_split": "train",
                    "valid_split": "dev",
                    "test_splits": ["dev"],
                },
                "subwords": {"vocab_size": 64, "model_type": "unigram"},
                "model": {
                    "emb_dim": 16,
                    "enc_hidden": 16,
                    "dec_hidden": 32,
                    "attn_dim": 16,
                    "output_dim": 16,
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
                    "lr": 0.01,
                    "patience": None,
                    "out_dir": str(tmp / "runs" / "{name}"),
                },
                "search": {"beam_size": 4},
            }
        )
    )
    return path


def _train(tmp: Path, *overrides: str, resume: bool = False) -> list[str]:
    logs: list[str] = []
    run_training(load_config(_toy_config(tmp), list(overrides)), resume=resume, log=logs.append)
    return logs


def _records(path: Path) -> list[tuple]:
    return [tuple(r[k] for k in KEYS) for r in map(json.loads, path.read_text().splitlines())]


@pytest.mark.slow
def test_a_fresh_run_never_replaces_or_mixes_with_an_earlier_run(tmp_path):
    """NMT-37: last.pt deleted; a fresh run used to overwrite best.pt with a worse one,
    append to valid_log.jsonl and rewrite summary.json."""
    _train(tmp_path, "name=r2", "train.max_epochs=4")
    out = tmp_path / "runs" / "r2"
    (out / "last.pt").unlink()
    kept = {n: (out / n).read_bytes() for n in ("best.pt", "valid_log.jsonl", "summary.json")}
    with pytest.raises(
        CheckpointError,
        match=r"runs/r2 holds files of an earlier run \(best.pt, "
        r"summary.json, valid_log.jsonl\); .*pass --resume .*or choose another "
        "name",
    ):
        _train(tmp_path, "name=r2", "train.max_epochs=1")
    assert {n: (out / n).read_bytes() for n in kept} == kept
    assert sorted(p.name for p in out.iterdir()) == [
        "best.pt",
        "config.yaml",
        "summary.json",
        "valid_log.jsonl",
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "leftover",
    ["best.pt", "valid_log.jsonl", "summary.json", "step_00000008.pt", "averaged.pt", "last.pt"],
)
def test_any_file_of_a_run_keeps_a_fresh_run_out(tmp_path, leftover):
    out = tmp_path / "runs" / "toy"
    out.mkdir(parents=True)
    (out / leftover).write_bytes(b"x")
    with pytest.raises(CheckpointError, match=rf"holds files of an earlier run \({leftover}\)"):
        _train(tmp_path)
    assert (out / leftover).read_bytes() == b"x"


def test_what_is_not_a_runs_result_does_not_count(tmp_path):
    out = tmp_path / "run"
    (out / "data").mkdir(parents=True)  # the arrow store: a cache, reused by design
    (out / "config.yaml").write_text("{}\n")
    (out / "train.log").write_text("the study appends here before training starts\n")
    refuse_reuse(out)
    refuse_reuse(tmp_path / "new")


@pytest.mark.slow
def test_the_cli_refuses_in_one_line_naming_the_files(tmp_path):
    config = _toy_config(tmp_path)
    out = tmp_path / "runs" / "toy"
    out.mkdir(parents=True)
    (out / "best.pt").write_bytes(b"x")
    r = nmt_here("train", config)  # a refusal, in this process (nmt/cli/app.py prints it)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert errors == [
        f"error: {out} holds files of an earlier run (best.pt); a fresh run would "
        "replace or mix with them: pass --resume to continue that run, or choose "
        "another name / train.out_dir"
    ]


@pytest.mark.slow
def test_resume_without_last_pt_continues_best_pt_with_one_history(tmp_path):
    """NMT-37: --resume said "this run has not started; drop --resume"."""
    _train(tmp_path, "train.max_epochs=6")
    out = tmp_path / "runs" / "toy"
    straight = _records(out / "valid_log.jsonl")
    best_step = read_payload(out / "best.pt")["train_state"]["counters"]["step"]
    (out / "last.pt").unlink()
    logs = _train(tmp_path, "train.max_epochs=6", resume=True)
    assert any(
        f"{out / 'last.pt'} is missing; resuming from {out / 'best.pt'}" in line
        and f"(step {best_step})" in line
        for line in logs
    ), logs
    # resume is exact: the log is the uninterrupted run's, each step once, in order
    assert _records(out / "valid_log.jsonl") == straight
    later = [r for r in straight if r[0] > best_step]
    if later:
        assert _records(out / "valid_log.set_aside.jsonl") == later
    best = read_payload(out / "best.pt")["train_state"]["counters"]["best_bleu"]
    assert best == max(r[4] for r in straight)  # best.pt was never replaced by a worse one


@pytest.mark.slow
def test_resume_prefers_the_latest_kept_checkpoint(tmp_path):
    _train(tmp_path, "train.max_epochs=4", "train.keep_checkpoints=10")
    out = tmp_path / "runs" / "toy"
    straight = _records(out / "valid_log.jsonl")
    assert [r[0] for r in straight] == [4, 8, 12, 16]
    for name in ("last.pt", "best.pt", "step_00000012.pt", "step_00000016.pt"):
        (out / name).unlink()
    logs = _train(tmp_path, "train.max_epochs=4", "train.keep_checkpoints=10", resume=True)
    assert any(f"resuming from {out / 'step_00000008.pt'}" in line for line in logs), logs
    assert any("moved 2 validation record(s) after step 8" in line for line in logs), logs
    assert _records(out / "valid_log.jsonl") == straight
    assert _records(out / "valid_log.set_aside.jsonl") == straight[2:]


@pytest.mark.slow
def test_resume_with_no_checkpoint_left_names_what_is_there(tmp_path):
    out = tmp_path / "runs" / "toy"
    out.mkdir(parents=True)
    (out / "averaged.pt").write_bytes(b"x")  # no training state: nothing --resume can use
    (out / "valid_log.jsonl").write_text('{"step": 4}\n')
    with pytest.raises(CheckpointError) as e:
        _train(tmp_path, resume=True)
    assert "drop --resume" not in str(e.value)  # that advice would be refused as well
    assert (
        f"--resume: nothing to resume in {out}: no last.pt, best.pt or step_*.pt with "
        "training state, only averaged.pt, valid_log.jsonl"
    ) in str(e.value)
    with pytest.raises(CheckpointError) as e:  # and a fresh run does not send it back
        _train(tmp_path)
    assert "--resume" not in str(e.value) and "choose another name" in str(e.value)
    # records and a summary but no checkpoint at all: --resume starts from step 0
    (out / "averaged.pt").unlink()
    (out / "summary.json").write_text("{}\n")
    logs = _train(tmp_path, "train.max_epochs=1", resume=True)
    assert any("resuming from step 0" in x for x in logs), logs
    assert (out / "summary.set_aside.json").read_text() == "{}\n"
    assert (out / "valid_log.set_aside.jsonl").read_text() == '{"step": 4}\n'
    assert (out / "last.pt").is_file()
    with pytest.raises(CheckpointError, match="this run has not started; drop --resume"):
        _train(tmp_path, "name=never", resume=True)


@pytest.mark.slow
def test_a_run_keeps_its_run_id_across_resume(tmp_path):
    _train(tmp_path, "train.max_epochs=1", "train.keep_checkpoints=5")
    out = tmp_path / "runs" / "toy"
    run_id = read_payload(out / "last.pt")["run_id"]
    _train(tmp_path, "train.max_epochs=2", "train.keep_checkpoints=5", resume=True)
    files = ["last.pt", "best.pt", "step_00000004.pt", "step_00000008.pt"]
    assert {read_payload(out / n)["run_id"] for n in files} == {run_id}
    _train(tmp_path, "name=other", "train.max_epochs=1")
    assert read_payload(tmp_path / "runs" / "other" / "last.pt")["run_id"] != run_id
    # a checkpoint from before run ids resumes, and the run gets one from then on
    old = read_payload(out / "last.pt")
    del old["run_id"]
    save_atomic(old, out / "last.pt")
    _train(tmp_path, "train.max_epochs=3", "train.keep_checkpoints=5", resume=True)
    assert isinstance(read_payload(out / "last.pt")["run_id"], str)


@pytest.mark.slow
def test_study_plan_judges_a_run_directory_by_its_own_files(tmp_path):
    """NMT-37: the study's plan looked only at last.pt, and planned "train" over best.pt."""
    study_file = tmp_path / "study.yaml"
    study_file.write_text(
        json.dumps(
            {
                "base_config": str(_toy_config(tmp_path)),
                "run_prefix": "st",
                "attentions": ["additive"],
                "baseline": "additive",
                "overrides": ["train.max_epochs=2", f"train.out_dir={tmp_path}/runs/{{name}}"],
            }
        )
    )
    study = load_study_config(study_file)
    (run,) = plan(study)
    assert run.action == "train"
    run_training(run.cfg, log=lambda _m: None)
    assert plan(study)[0].action == "reuse"
    out = run.out_dir
    (out / "last.pt").unlink()
    (resumed,) = plan(study)
    assert (resumed.action, resumed.note) == ("resume", "best.pt, since last.pt is missing")
    (out / "best.pt").unlink()  # records but no checkpoint: trained again from step 0
    assert plan(study)[0].action == "resume"
    (out / "averaged.pt").write_bytes(b"x")  # a checkpoint without training state
    with pytest.raises(
        StudyError,
        match=rf"{out} holds files of an earlier run \(averaged.pt, "
        r"summary.json, valid_log.jsonl\) but no checkpoint to resume from",
    ):
        plan(study)


def test_a_damaged_validation_log_is_named_with_its_line(tmp_path):
    """A torn or hand-edited ``valid_log.jsonl`` is an error naming the file and line, not
    a traceback after minutes of decoding (`nmt select` reads it before decoding)."""
    from nmt.model.rundir import read_valid_log

    log = tmp_path / "valid_log.jsonl"
    assert read_valid_log(log) == []
    good = {"step": 10, "val_bleu": 12.5, "elapsed_s": 60.0}
    log.write_text(json.dumps(good) + "\n\n" + '{"step": 20, "val_bl', encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"valid_log\.jsonl, line 3: not a JSON record"):
        read_valid_log(log)
    log.write_text(json.dumps(good) + "\n" + json.dumps({"step": "20"}) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"line 2: not a validation record"):
        read_valid_log(log)
    log.write_text(json.dumps(good) + "\n", encoding="utf-8")
    assert read_valid_log(log) == [good]
