"""The experiment scripts' own logic (arguments, which run is kept, resumed or started), run
with a stand-in for ``nmt`` that records its arguments instead of training."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# a guard against a hung script, not a measure of speed: each run of a script starts Python
# a few times (scripts/run_state.sh epochs_done; without torch, see nmt/ops/validlog.py),
# which under a loaded machine (a training beside the tests) takes far longer than on an
# idle one
TIMEOUT_S = 600


def _tree(tmp: Path, script: str) -> Path:
    """A copy of ``scripts/{script}`` beside an empty recipe config, and a fake ``nmt``."""
    (tmp / "scripts").mkdir()
    for name in (script, "run_state.sh"):
        shutil.copy(REPO / "scripts" / name, tmp / "scripts" / name)
    (tmp / "configs").mkdir()
    (tmp / "configs" / "recipe_deen.yaml").write_text("name: recipe_deen\n")
    fake = tmp / "fake_nmt"
    fake.write_text('#!/usr/bin/env bash\necho "$*" >> "$(dirname "$0")/calls.txt"\n')
    fake.chmod(0o755)
    return fake


def _run(
    tmp: Path, *args: str, script: str = "quality.sh", **env: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(tmp / "scripts" / script), *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "PYTHONPATH": str(REPO), **env},
    )


def _log(run: Path, epochs: int) -> None:
    run.mkdir(parents=True)
    (run / "valid_log.jsonl").write_text(
        "".join(
            json.dumps({"epoch": e, "epochs_done": float(e), "step": e, "val_bleu": 1.0}) + "\n"
            for e in range(1, epochs + 1)
        )
    )


def test_quality_keeps_finished_runs_resumes_interrupted_ones(tmp_path):
    fake = _tree(tmp_path, "quality.sh")
    _log(tmp_path / "runs" / "quality_deen_s1", 2)  # finished
    _log(tmp_path / "runs" / "quality_deen_s2", 1)  # interrupted
    (tmp_path / "runs" / "quality_deen_s2" / "last.pt").write_bytes(b"")
    r = _run(tmp_path, "deen", "3", NMT=str(fake), EPOCHS="2")
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert "quality_deen_s1: finished (2 epochs), kept" in r.stdout
    assert "quality_deen_s2: resuming after epoch 1" in r.stdout
    trains = sorted(c for c in calls if c.startswith("train "))
    assert len(trains) == 2 and "name=quality_deen_s1" not in " ".join(trains)
    assert trains[0].endswith("train.seed=2 name=quality_deen_s2 --resume")
    assert trains[1].endswith("train.seed=3 name=quality_deen_s3")
    assert all(
        "model.tie_embeddings=true model.step_order=cgru" in t and "train.max_epochs=2" in t
        for t in trains
    )
    # bf16 is emulated on an AVX2-only CPU: the default lets nmt choose per CPU
    assert all("train.precision=auto" in t for t in trains)
    # the stand-in trains nothing, so the script stops before choosing on val
    assert r.returncode == 1 and "did not finish 2 epochs" in r.stderr
    assert not any(c.startswith("select") for c in calls)
    assert (
        "3 models of configs/recipe_deen.yaml"
        in (tmp_path / "results" / "quality" / "deen_timing.txt").read_text()
    )


def test_quality_selects_the_ensemble_of_finished_runs(tmp_path):
    fake = _tree(tmp_path, "quality.sh")
    for i in (1, 2):
        _log(tmp_path / "runs" / f"quality_deen_s{i}", 2)
    r = _run(tmp_path, "deen", "2", NMT=str(fake), EPOCHS="2")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "calls.txt").read_text().splitlines() == [
        "select runs/quality_deen_s1 runs/quality_deen_s2 --device cpu "
        "--alphas 0.6,1.0,1.4,1.8,2.2 --test-splits test_2016_flickr,test_2017_flickr "
        "--json results/quality/deen.json"
    ]
    r = _run(tmp_path, "deen", "2", NMT=str(fake), EPOCHS="2", ALPHAS="1.4,1.8")
    assert " --alphas 1.4,1.8 " in (tmp_path / "calls.txt").read_text().splitlines()[-1]


def test_quality_scores_test_2017_mscoco_only_when_both_its_files_are_there(tmp_path):
    fake = _tree(tmp_path, "quality.sh")
    (tmp_path / "configs" / "recipe_deen.yaml").write_text(
        "name: recipe_deen\ndata:\n  path: corpus            # a comment\n"
    )
    for i in (1, 2):
        _log(tmp_path / "runs" / f"quality_deen_s{i}", 2)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "test_2017_mscoco.de.gz").write_bytes(b"")
    for expected in ("test_2017_flickr --json", "test_2017_flickr,test_2017_mscoco --json"):
        r = _run(tmp_path, "deen", "2", NMT=str(fake), EPOCHS="2")
        assert r.returncode == 0, r.stderr
        assert expected in (tmp_path / "calls.txt").read_text().splitlines()[-1]
        (tmp_path / "corpus" / "test_2017_mscoco.en").write_text("a dog .\n")  # the target
    # DATA_PATH: the corpus, and so test_2017_mscoco, from another directory
    (tmp_path / "elsewhere").mkdir()
    r = _run(tmp_path, "deen", "2", NMT=str(fake), EPOCHS="2", DATA_PATH="elsewhere")
    assert r.returncode == 0, r.stderr
    assert (
        (tmp_path / "calls.txt")
        .read_text()
        .splitlines()[-1]
        .endswith(
            f"--test-splits test_2016_flickr,test_2017_flickr --data-path {tmp_path}/elsewhere "
            "--json results/quality/deen.json"
        )
    )
    # a relative DATA_PATH is taken from where the script is run, not from the repository
    (tmp_path / "elsewhere" / "deeper").mkdir()
    r = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "quality.sh"), "deen", "2"],
        cwd=tmp_path / "elsewhere",
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHON": sys.executable,
            "PYTHONPATH": str(REPO),
            "NMT": str(fake),
            "EPOCHS": "2",
            "DATA_PATH": "deeper",
        },
    )
    assert r.returncode == 0, r.stderr
    assert (
        f"--data-path {tmp_path}/elsewhere/deeper "
        in (tmp_path / "calls.txt").read_text().splitlines()[-1]
    )


def test_quality_refuses_bad_arguments(tmp_path):
    _tree(tmp_path, "quality.sh")
    r = _run(tmp_path)
    assert r.returncode == 2 and "DIRECTION must be deen, ende or enfr" in r.stderr
    r = _run(tmp_path, "deen", "two")
    assert r.returncode == 2 and "N must be a positive integer, got 'two'" in r.stderr
    r = _run(tmp_path, "enfr")
    assert r.returncode == 2 and "configs/recipe_enfr.yaml not found" in r.stderr
    # a fresh clone before scripts/setup.sh: no .venv, so no nmt (the default NMT) to run
    r = _run(tmp_path, "deen", "2")
    assert (
        r.returncode == 2
        and ".venv/bin/nmt not found; run 'bash scripts/setup.sh' first" in r.stderr
        and not (tmp_path / "runs" / "quality_deen_s1.log").exists()
    )
    r = _run(tmp_path, "bogus")  # the usage text ends where the header does
    assert "DIRECTION must be deen, ende or enfr, got 'bogus'" in r.stderr
    assert r.stdout.rstrip().endswith(
        "# the protocol of docs/results.md, the wide grid in the one select before test)."
    )
    # a setting written after the command would otherwise be ignored for hours of training
    r = _run(tmp_path, "deen", "2", "DATA_PATH=corpus")
    assert r.returncode == 2 and "too many arguments: 'DATA_PATH=corpus'" in r.stderr
    assert "not found" not in r.stderr  # refused first, before anything else is looked at
    r = _run(tmp_path, "deen", "2", DATA_PATH=str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "DATA_PATH " in r.stderr and "is not a directory" in r.stderr


def test_quality_shows_why_a_model_failed_and_records_no_time_for_a_sitting_that_trained_nothing(
    tmp_path,
):
    """No corpus: every `nmt train` failed at once, the script said "run the script again to
    resume", which cannot help, and wrote a timing line to results/ (fresh-user report,
    2026-12-04)."""
    fake = _tree(tmp_path, "quality.sh")
    fake.write_text(
        '#!/usr/bin/env bash\necho "$*" >> "$(dirname "$0")/calls.txt"\n'
        'echo "error: data.path: ../shared/data/multi30k holds no train.de" >&2\n'
        "exit 2\n"
    )
    r = _run(tmp_path, "deen", "2", NMT=str(fake))
    assert r.returncode == 1
    assert "quality_deen_s1: failed; the end of runs/quality_deen_s1.log:" in r.stdout
    assert "  error: data.path: ../shared/data/multi30k holds no train.de" in r.stdout
    assert "every model failed before training an epoch" in r.stderr
    assert "resume" not in r.stderr
    assert not (tmp_path / "results" / "quality" / "deen_timing.txt").exists()
    # seed 1 ran (an interrupted training), seed 2 failed: the sitting's time counts, and
    # each is told apart, the failed one not sent to resume as if merely unfinished
    fake.write_text(
        '#!/usr/bin/env bash\necho "$*" >> "$(dirname "$0")/calls.txt"\n'
        'case "$*" in *train.seed=2*) echo "error: bad" >&2; exit 2 ;; esac\n'
        "mkdir -p runs/quality_deen_s1\n"
        'echo \'{"epoch": 1, "epochs_done": 1.0, "step": 1, "val_bleu": 1.0}\' '
        "> runs/quality_deen_s1/valid_log.jsonl\n"
    )
    r = _run(tmp_path, "deen", "2", NMT=str(fake), EPOCHS="2")
    assert r.returncode == 1
    assert "quality_deen_s1: trained" in r.stdout
    assert (
        "runs/quality_deen_s1 did not finish 2 epochs; run the script again to resume" in r.stderr
    )
    assert "runs/quality_deen_s2 failed (its error is above" in r.stderr
    assert (
        "2 models of configs/recipe_deen.yaml"
        in (tmp_path / "results" / "quality" / "deen_timing.txt").read_text()
    )


def test_ablation_keeps_what_is_done_and_resumes_the_rest(tmp_path):
    fake = _tree(tmp_path, "ablation_deen.sh")
    (tmp_path / "results" / "ablation_deen").mkdir(parents=True)
    (tmp_path / "results" / "ablation_deen" / "tied.json").write_text("{}")
    _log(tmp_path / "runs" / "ablation_deen_cgru", 2)  # trained, not scored
    _log(tmp_path / "runs" / "ablation_deen_word-dropout", 1)  # interrupted
    (tmp_path / "runs" / "ablation_deen_word-dropout" / "last.pt").write_bytes(b"")
    r = _run(
        tmp_path,
        "tied",
        "cgru",
        "word-dropout",
        script="ablation_deen.sh",
        NMT=str(fake),
        EPOCHS="2",
    )
    assert r.returncode == 0, r.stderr
    assert "tied: results/ablation_deen/tied.json exists, kept" in r.stdout
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    trains = [c for c in calls if c.startswith("train ")]
    assert len(trains) == 1 and trains[0].endswith("name=ablation_deen_word-dropout --resume")
    assert "model.word_dropout=0.1" in trains[0]
    selects = sorted(c.split()[1] for c in calls if c.startswith("select "))
    assert selects == ["runs/ablation_deen_cgru", "runs/ablation_deen_word-dropout"]
    r = _run(tmp_path, "tied", "nope", script="ablation_deen.sh", NMT=str(fake))
    assert r.returncode == 2 and "unknown run 'nope'" in r.stderr


def test_a_damaged_validation_log_stops_the_script_naming_its_line(tmp_path):
    fake = _tree(tmp_path, "quality.sh")
    _log(tmp_path / "runs" / "quality_deen_s1", 2)
    with open(tmp_path / "runs" / "quality_deen_s1" / "valid_log.jsonl", "a") as f:
        f.write("garbage\n")
    r = _run(tmp_path, "deen", "1", NMT=str(fake), EPOCHS="2")
    assert r.returncode != 0 and "valid_log.jsonl, line 3: not a JSON record" in r.stderr
    assert not (tmp_path / "calls.txt").exists()  # nothing trained on a damaged run


def test_run_state_reads_a_log_without_importing_torch():
    """scripts/run_state.sh asks where a run stands a few times per model: its reader must
    not pay torch's import (seconds of CPU each time) for a few lines of JSON."""
    code = (
        "import sys\n"
        "from nmt.ops.validlog import CheckpointError, read_valid_log\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numpy'}))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=TIMEOUT_S
    )
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
    assert "from nmt.ops.validlog import" in (REPO / "scripts" / "run_state.sh").read_text()


def test_quality_translations_decodes_what_the_summary_scored_and_registers_it(tmp_path):
    """scripts/quality_translations.py: each member and the ensemble decoded with the summary's
    checkpoints, beam, alpha and precision; one registry entry per file, never two; a
    checkpoint that is not the scored one is refused."""
    import gzip
    import hashlib

    fake = tmp_path / "fake_nmt"  # records its arguments and echoes the source back
    fake.write_text('#!/usr/bin/env bash\necho "$*" >> "$(dirname "$0")/calls.txt"\ncat\n')
    fake.chmod(0o755)
    (tmp_path / "data").mkdir()
    src = "Ein Hund.\nZwei Katzen.\nEin Haus.\n"
    (tmp_path / "data" / "test_2016_flickr.de.gz").write_bytes(gzip.compress(src.encode()))
    ck = {}
    for name in ("a.pt", "b.pt"):
        (tmp_path / name).write_bytes(name.encode())
        ck[name] = hashlib.sha256(name.encode()).hexdigest()
    scored = {
        "test_2016_flickr": {"search": "beam 5, bf16 matrix products"},
        "test_2017_mscoco": {},
    }
    member = {"beam": 5, "alpha": 1.0, "test": scored}
    summary = {
        "members": [
            {
                **member,
                "run": "runs/q_s1",
                "chosen_checkpoint": "a.pt",
                "chosen_checkpoint_sha256": ck["a.pt"],
            },
            {
                **member,
                "run": "runs/q_s2",
                "chosen_checkpoint": "b.pt",
                "chosen_checkpoint_sha256": ck["b.pt"],
            },
        ],
        "ensemble": {
            **member,
            "alpha": 1.4,
            "checkpoints": ["a.pt", "b.pt"],
            "checkpoints_sha256": [ck["a.pt"], ck["b.pt"]],
        },
    }
    (tmp_path / "results" / "quality").mkdir(parents=True)
    (tmp_path / "results" / "quality" / "deen.json").write_text(json.dumps(summary))
    (tmp_path / "results" / "hypotheses.json").write_text('{"about": "x", "files": []}\n')
    cmd = [sys.executable, str(REPO / "scripts" / "quality_translations.py"), "deen"]
    cmd += ["--data", "data", "--nmt", str(fake)]
    for _ in range(2):  # a second run replaces its entries
        r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert r.returncode == 0, r.stderr
    assert "test_2017_mscoco: skipped" in r.stderr
    out = tmp_path / "results" / "quality" / "deen_translations"
    for system in ("s1", "s2", "ensemble"):
        hyp = out / f"{system}.test_2016_flickr.hyp.en.gz"
        assert gzip.decompress(hyp.read_bytes()).decode() == src
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert "translate a.pt b.pt --beam 5 --alpha 1.4 --precision bf16" in calls
    assert "translate b.pt --beam 5 --alpha 1.0 --precision bf16" in calls
    files = json.loads((tmp_path / "results" / "hypotheses.json").read_text())["files"]
    assert [f["checks"][0]["value"] for f in files] == [
        "members/0/test/test_2016_flickr/beam_bleu",
        "members/1/test/test_2016_flickr/beam_bleu",
        "ensemble/test/test_2016_flickr/beam_bleu",
    ]
    r = subprocess.run(
        [*cmd[:3], "--data", "nowhere", "--nmt", str(fake)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert r.returncode == 1 and "nothing written (--data)" in r.stderr, r.stderr
    (tmp_path / "b.pt").write_bytes(b"retrained")
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode != 0 and "b.pt: not the checkpoint" in r.stderr, r.stderr
