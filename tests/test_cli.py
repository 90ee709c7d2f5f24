"""End to end through the ``nmt`` command on a 200-pair slice of Multi30k."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import nmt_here, torchrun

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "data.train_limit=200",
    "data.valid_limit=40",
    "subwords.vocab_size=300",
    "model.emb_dim=32",
    "model.enc_hidden=32",
    "model.dec_hidden=64",
    "model.attn_dim=32",
    "model.output_dim=32",
    "train.max_epochs=2",
    "train.batch_size=32",
    "train.progress=false",
]


def nmt(*args, input=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "nmt", *map(str, args)],
        capture_output=True,
        text=True,
        input=input,
        cwd=REPO,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from conftest import MULTI30K

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    out = tmp_path_factory.mktemp("runs")
    runs = {}
    for attention in ["additive", "none"]:
        r = nmt(
            "train",
            "configs/multi30k_deen_additive.yaml",
            *TINY,
            f"data.path={MULTI30K}",
            f"model.attention={attention}",
            f"name=tiny_{attention}",
            f"train.out_dir={out}/{{name}}",
        )
        assert r.returncode == 0, r.stderr
        runs[attention] = out / f"tiny_{attention}"
    return runs


# pairs of val and of each test split that the decoding tests read (--data-path): every
# model decodes a whole split there, and the tests check the options and the output's
# layout, which 200 pairs show as well as 1,000
SMALL_SPLITS = 200


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    """Multi30k with val and the test splits cut to their first SMALL_SPLITS pairs."""
    from conftest import MULTI30K, multi30k_slice

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    return multi30k_slice(tmp_path_factory.mktemp("corpus"), SMALL_SPLITS, SMALL_SPLITS)


@pytest.mark.slow
def test_train_writes_checkpoints_config_and_log(trained):
    run = trained["additive"]
    for name in ["best.pt", "last.pt", "config.yaml", "valid_log.jsonl", "summary.json"]:
        assert (run / name).exists(), name
    records = [json.loads(line) for line in (run / "valid_log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]
    assert all({"val_loss", "val_ppl", "val_bleu", "train_loss"} <= r.keys() for r in records)


@pytest.mark.slow
def test_evaluate_side_by_side_with_json(trained, small_corpus, tmp_path):
    out = tmp_path / "scores.json"
    r = nmt(
        "evaluate",
        trained["additive"] / "best.pt",
        trained["none"] / "best.pt",
        "--data-path",
        small_corpus,
        "--split",
        "val",
        "--buckets",
        "1-10,11-",
        "--json",
        out,
    )
    assert r.returncode == 0, r.stderr
    additive, none = trained["additive"] / "best.pt", trained["none"] / "best.pt"
    assert f"{additive}" in r.stdout and f"{none}" in r.stdout  # the columns, as typed
    assert "BLEU 1-10" in r.stdout and "BLEU signature: nrefs:1" in r.stdout
    assert f"decoding of {additive}: beam search, beam 5" in r.stdout
    data = json.loads(out.read_text())
    assert len(data) == 2
    assert {"bleu", "chrf", "signature", "buckets", "bleu_papers", "papers_signature"} <= data[
        0
    ].keys()
    assert sum(b["n"] for b in data[0]["buckets"]) == SMALL_SPLITS
    assert [(b["min_len"], b["max_len"]) for b in data[0]["buckets"]] == [(1, 10), (11, None)]


@pytest.mark.slow
def test_evaluate_on_given_files_and_errors(trained, tmp_path):
    src, ref = tmp_path / "s.de", tmp_path / "r.en"
    src.write_text("Ein Hund rennt.\nZwei Männer.\n")
    ref.write_text("A dog runs.\nTwo men.\n")
    r = nmt("evaluate", trained["additive"] / "best.pt", "--src", src, "--ref", ref, "--beam", "1")
    assert r.returncode == 0, r.stderr
    assert "(2 sentences)" in r.stdout and "greedy search" in r.stdout
    ref.write_text("A dog runs.\n")
    r = nmt_here("evaluate", trained["additive"] / "best.pt", "--src", src, "--ref", ref)
    assert r.returncode == 2 and "has 2 lines but" in r.stderr
    r = nmt_here("evaluate", tmp_path / "missing.pt")
    assert r.returncode == 2 and "checkpoint not found" in r.stderr
    src.write_text("")
    ref.write_text("")
    r = nmt_here("evaluate", trained["additive"] / "best.pt", "--src", src, "--ref", ref)
    assert r.returncode == 2 and "s.de has no non-empty line" in r.stderr
    # a --json that cannot be written is refused before decoding, not after it (a traceback)
    src.write_text("Ein Hund rennt.\n")
    ref.write_text("A dog runs.\n")
    for json_out, message in (
        (tmp_path, f"--json {tmp_path}: is a directory"),
        (tmp_path / "no" / "s.json", f"folder {tmp_path / 'no'} does not exist"),
        (Path("/proc/nmt_scores.json"), "--json /proc/nmt_scores.json: cannot write in /proc"),
    ):
        args = ("--src", src, "--ref", ref, "--json", json_out)
        r = nmt_here("evaluate", trained["additive"] / "best.pt", *args)
        assert r.returncode == 2 and message in r.stderr, r.stderr
        assert "BLEU" not in r.stdout  # nothing was decoded


@pytest.mark.slow
def test_translate_filter_keeps_one_line_per_input(trained, tmp_path):
    lines = [
        "Ein Mann fährt Fahrrad.",
        "",
        "   ",
        "Zwei Hunde 🐕 spielen \x07 im Schnee.",
        "Hund " * 600,
    ]
    r = nmt("translate", trained["additive"] / "best.pt", input="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[1] == "" and out[2] == ""
    assert "1 input line cut to the first 400 pieces (line 5," in r.stderr
    src = tmp_path / "in.txt"
    src.write_text("Ein Mann.\nEine Frau.\n")
    r = nmt(
        "translate",
        trained["additive"] / "best.pt",
        "--input",
        src,
        "--output",
        tmp_path / "out.txt",
        "--attention",
    )
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 2
    assert "<-" in r.stderr  # the most-attended source piece per target piece
    # a missing input or an output folder that does not exist: one line naming the option
    ck = trained["additive"] / "best.pt"
    for args, message in (
        (("--input", tmp_path / "nofile.de"), f"--input {tmp_path / 'nofile.de'}: no such file"),
        (("--input", tmp_path), f"--input {tmp_path}: is a directory"),
        (
            ("--input", src, "--output", tmp_path / "nodir" / "out.en"),
            f"folder {tmp_path / 'nodir'} does not exist",
        ),
    ):
        r = nmt_here("translate", ck, *args)
        assert r.returncode != 0 and message in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    # an input that exists but is not a regular file: /dev/null, a shell's <(...) pipe
    r = nmt_here("translate", ck, "--input", "/dev/null")
    assert r.returncode == 0 and r.stdout == "", r.stderr
    r = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m nmt translate "{ck}" -i <(printf "Ein Mann.\\n")'],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1 and r.stdout.strip(), r.stderr
    # an output that is the input or the checkpoint is refused, and both are left intact
    before = ck.read_bytes()
    for args, what in (
        (("--input", src, "--output", tmp_path / "." / "in.txt"), "--input"),
        (("--input", src, "--output", ck), "checkpoint"),
    ):
        r = nmt_here("translate", ck, *args)
        assert r.returncode == 2 and f"is the same file as the {what}" in r.stderr, r.stderr
    assert src.read_text() == "Ein Mann.\nEine Frau.\n" and ck.read_bytes() == before
    # a reader that stops early (`| head -1`) ends the filter quietly, as SIGPIPE would
    many = tmp_path / "many.de"
    many.write_text("Ein Hund rennt.\n" * 3000)
    r = subprocess.run(
        [
            "bash",
            "-c",
            f'"{sys.executable}" -m nmt translate "{ck}" -i "{many}" '
            '| head -1; exit "${PIPESTATUS[0]}"',
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert r.returncode == 141 and len(r.stdout.splitlines()) == 1 and r.stderr == "", r.stderr


@pytest.mark.slow
def test_translate_plot_and_beam_options(trained, tmp_path):
    png = tmp_path / "river.png"
    r = nmt(
        "translate",
        trained["additive"] / "best.pt",
        "--plot",
        png,
        "--beam",
        "3",
        input="Das Ufer des Flusses war steil.\n",
    )
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = nmt_here(
        "translate",
        trained["additive"] / "best.pt",
        "--plot",
        tmp_path / "m.png",
        input="Ein Hund.\nEine Katze.\n",
    )
    assert r.returncode == 0 and (tmp_path / "m_1.png").exists() and (tmp_path / "m_2.png").exists()
    # the suffix names the format; `-i -` and `-o -` are stdin and stdout
    r = nmt(
        "translate",
        trained["additive"] / "best.pt",
        "--plot",
        tmp_path / "river.pdf",
        "-i",
        "-",
        "-o",
        "-",
        input="Ein Hund.\n",
    )
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r.stderr
    assert (tmp_path / "river.pdf").read_bytes()[:5] == b"%PDF-"
    r = nmt_here(
        "translate",
        trained["additive"] / "best.pt",
        "--plot",
        tmp_path / "x.xyz",
        input="Ein Hund.\n",
    )
    assert r.returncode == 2
    assert f"--plot {tmp_path / 'x.xyz'}: cannot write a .xyz image" in r.stderr
    # pgf needs LaTeX: refused before translating, not a traceback after it
    r = nmt_here(
        "translate",
        trained["additive"] / "best.pt",
        "--plot",
        tmp_path / "x.pgf",
        input="Ein Hund.\n",
    )
    assert r.returncode == 2 and "cannot write a .pgf image" in r.stderr
    # a heatmap must not replace the input, the checkpoint or the translations
    src = tmp_path / "one.png"
    src.write_text("Ein Hund.\n")
    for extra, what in ((["-i", src], "--input"), (["-o", tmp_path / "o.png"], "--output")):
        r = nmt_here(
            "translate",
            trained["additive"] / "best.pt",
            *extra,
            "--plot",
            extra[1],
            input="Ein Hund.\n",
        )
        assert r.returncode == 2 and f"is the same file as the {what}" in r.stderr, r.stderr
    assert src.read_text() == "Ein Hund.\n"
    r = nmt_here("translate", trained["none"] / "best.pt", "--plot", png, input="Ein Hund.\n")
    assert r.returncode == 2 and "fixed-vector model" in r.stderr
    for where, message in ((tmp_path / "nodir" / "x.png", "folder"), (tmp_path, "is a directory")):
        r = nmt_here(
            "translate", trained["additive"] / "best.pt", "--plot", where, input="Ein Hund.\n"
        )
        assert r.returncode == 2 and f"--plot {where}: " in r.stderr and message in r.stderr
    r = nmt(
        "translate",
        trained["additive"] / "best.pt",
        "--beam",
        "4",
        "--nbest",
        "3",
        input="Ein Hund.\n\nEine Katze.\n",
    )
    assert r.returncode == 0, r.stderr
    rows = [line.split(" ||| ") for line in r.stdout.splitlines()]
    assert [row[0] for row in rows] == ["0", "0", "0", "1", "2", "2", "2"]
    scores = [float(row[2]) for row in rows if row[0] == "0"]
    if "reached the length limit" not in r.stderr:  # else cut ones follow the complete
        assert scores == sorted(scores, reverse=True)
    r = nmt_here(
        "translate", trained["additive"] / "best.pt", "--beam", "2", "--nbest", "3", input="x\n"
    )
    assert r.returncode == 2 and "--nbest 3 needs --beam" in r.stderr
    r = nmt_here(
        "translate", trained["additive"] / "best.pt", "--length-penalty", "huge", input="x\n"
    )
    assert r.returncode == 2 and "--length-penalty" in r.stderr


@pytest.mark.slow
def test_train_rejects_unknown_key_before_work():
    r = nmt_here("train", "configs/multi30k_deen_additive.yaml", "model.atention=dot")
    assert r.returncode == 2
    assert "model.atention: unknown key" in r.stderr


@pytest.mark.slow
def test_torchrun_two_processes_train_with_ddp(tmp_path):
    from conftest import MULTI30K

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    r = subprocess.run(
        [
            *torchrun(2),
            "-m",
            "nmt",
            "train",
            "configs/multi30k_deen_additive.yaml",
            *TINY,
            f"data.path={MULTI30K}",
            "name=ddp",
            f"train.out_dir={tmp_path}/{{name}}",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("best val BLEU") == 1  # only rank 0 reports
    records = (tmp_path / "ddp" / "valid_log.jsonl").read_text().splitlines()
    assert len(records) == 2
    # 200 pairs / 32 per batch = 7 batches, 3 per rank per epoch
    assert json.loads(records[-1])["step"] == 6
    assert "ranks agree: identical weights, learning rate and step on 2 ranks" in r.stderr
    # evaluate under torchrun: one report, printed once
    from conftest import multi30k_slice

    small = multi30k_slice(tmp_path / "corpus", SMALL_SPLITS, SMALL_SPLITS)
    r = subprocess.run(
        [
            *torchrun(2),
            "-m",
            "nmt",
            "evaluate",
            str(tmp_path / "ddp" / "best.pt"),
            "--data-path",
            str(small),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("BLEU signature") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [
        [
            "train.lr_schedule=plateau",
            "train.lr_patience=1",
            "train.max_epochs=4",
            "train.patience=2",
            "train.valid_every_steps=2",
        ],
        [
            "train.lr_schedule=warmup_decay",
            "train.warmup_steps=3",
            "train.valid_every_steps=2",
            "train.max_minutes=0.05",
            "train.max_epochs=50",
            "train.patience=null",
        ],
    ],
)
def test_torchrun_ranks_agree_for_every_schedule_and_budget(tmp_path, extra):
    """Decisions taken from validation or the clock (LR steps, early stopping, best
    checkpoint, time budget) are rank 0's, shared; the run ends with a weight check."""
    from conftest import MULTI30K

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    r = subprocess.run(
        [
            *torchrun(2),
            "-m",
            "nmt",
            "train",
            "configs/multi30k_deen_additive.yaml",
            *TINY,
            f"data.path={MULTI30K}",
            "name=ddp",
            f"train.out_dir={tmp_path}/{{name}}",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "ranks agree: identical weights, learning rate and step on 2 ranks" in r.stderr
    assert r.stdout.count("best val BLEU") == 1


@pytest.mark.slow
def test_translate_is_interactive_on_a_terminal(trained):
    import os
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nmt",
            "translate",
            str(trained["additive"] / "best.pt"),
            "--attention",
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=REPO,
    )
    os.close(slave)

    def read_until(marker: bytes, timeout: float = 120.0) -> bytes:
        buf = b""
        while marker not in buf:
            ready, _, _ = select.select([master], [], [], timeout)
            assert ready, f"no {marker!r} in {buf!r}"
            buf += os.read(master, 4096)
        return buf

    assert b"Ctrl-D to quit" in read_until(b"> ")
    os.write(master, b"\n")  # an empty line is skipped: just a new prompt
    read_until(b"> ")
    os.write(master, "Ein Mann läuft.\n".encode())
    answer = read_until(b"> ")
    assert b"<-" in answer  # the attention lines
    os.write(master, b"\x04")  # Ctrl-D
    assert proc.wait(timeout=60) == 0
    os.close(master)


def test_stored_corpus_names_a_missing_data_directory(tmp_path, monkeypatch):
    from nmt.config.schema import DataConfig
    from nmt.data.corpus import DataError
    from nmt.data.stored import stored_corpus

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("nmt.data.stored.PROJECT_ROOT", tmp_path / "project")
    (tmp_path / "corpus").mkdir()
    corpus = str(tmp_path / "corpus")
    assert stored_corpus(DataConfig(path="x"), corpus).path == corpus
    with pytest.raises(DataError, match="--data-path '/no/such/dir' is not a directory"):
        stored_corpus(DataConfig(path="corpus"), "/no/such/dir")
    with pytest.raises(
        DataError,
        match="'../shared/data/multi30k' stored in the checkpoint "
        r"\(the corpus it was trained on\) is not a directory",
    ) as e:
        stored_corpus(DataConfig())
    # both places looked in, and what to pass instead: not "run from where you trained"
    assert f"from here ({tmp_path})" in str(e.value)
    assert f"nor from the project root ({tmp_path / 'project'})" in str(e.value)
    assert "pass --data-path DIR" in str(e.value) and "test_2016_flickr.de" not in str(e.value)
    assert "{split}.de[.gz]" in str(e.value) and "--src/--ref" in str(e.value)
    with pytest.raises(DataError) as e:
        stored_corpus(DataConfig(), files_option=False)  # nmt serve has no --src/--ref
    assert "--src/--ref" not in str(e.value) and "directory you trained in" not in str(e.value)
    tsv = DataConfig(source="tsv", path=str(tmp_path / "pairs.tsv"))
    assert stored_corpus(tsv, str(tmp_path / "other.tsv")).path == str(tmp_path / "other.tsv")


def test_stored_corpus_finds_a_relative_data_path_from_the_project_root(tmp_path, monkeypatch):
    # `cd /tmp && nmt serve` (or nmt evaluate deen-additive): the shipped models' data.path
    # ../shared/data/multi30k is relative to the project root, not to where nmt runs
    from nmt.config.schema import DataConfig
    from nmt.data.stored import stored_corpus

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "corpus").mkdir(parents=True)
    elsewhere.mkdir()
    monkeypatch.setattr("nmt.data.stored.PROJECT_ROOT", project)
    monkeypatch.chdir(elsewhere)
    for source in ("auto", "dir"):
        found = stored_corpus(DataConfig(source=source, path="corpus"))
        assert found.path == str(project / "corpus")
    (elsewhere / "corpus").mkdir()  # one from here comes first, as before
    assert stored_corpus(DataConfig(path="corpus")).path == "corpus"


def test_help_shows_flags_without_a_value():
    # typer 0.29 printed every flag as "--help <bool>", as if it took a value
    r = nmt_here("bench", "--help")
    assert r.returncode == 0 and "--skip-train" in r.stdout
    assert "<bool>" not in r.stdout
    r = nmt_here("--version")
    assert r.returncode == 0 and r.stdout.startswith("nmt ") and "torch 2." in r.stdout


@pytest.mark.slow
def test_select_chooses_alpha_on_val_and_scores_test(trained, small_corpus, tmp_path):
    out = tmp_path / "select.json"
    r = nmt(
        "select",
        trained["additive"],
        "--data-path",
        small_corpus,
        "--beam",
        "2",
        "--alphas",
        "0.6,1.4",
        "--average",
        "0",
        "--test-splits",
        "test_2016_flickr",
        "--json",
        out,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(out.read_text())
    beam_rows = [row for row in summary["val_selection"] if row["beam"] == 2]
    assert [row["alpha"] for row in beam_rows] == [0.6, 1.4]
    assert summary["alpha"] == max(beam_rows, key=lambda row: row["bleu"])["alpha"]
    test = summary["test"]["test_2016_flickr"]
    assert test["signature"].startswith("nrefs:1|") and 0 <= test["beam_bleu"] <= 100
    assert "test_2016_flickr: BLEU greedy" in r.stdout
    assert "test_2016_flickr: BLEU papers (lc, Moses) greedy" in r.stdout
    assert test["papers_signature"].endswith("+moses-tok.en+lc")
    assert not list(trained["additive"].glob("averaged.pt"))  # --average 0 writes nothing


@pytest.mark.slow
def test_select_refuses_choosing_on_a_test_split_and_a_missing_run(trained, tmp_path):
    r = nmt_here(
        "select",
        trained["additive"],
        "--valid-split",
        "test_2016_flickr",
        "--test-splits",
        "test_2016_flickr",
    )
    assert r.returncode == 2 and "also a test split" in r.stderr
    r = nmt_here("select", tmp_path / "nothing")
    assert r.returncode == 2 and "best.pt not found" in r.stderr
    r = nmt_here("select", trained["additive"], "--alphas", "0.6,x")
    assert r.returncode == 2 and "--alphas: 'x'" in r.stderr


@pytest.mark.parametrize("command", ["translate", "evaluate"])
@pytest.mark.parametrize("alpha", ["nan", "inf", "-inf"])
def test_alpha_must_be_finite_before_any_checkpoint_is_read(command, alpha, tmp_path):
    """click's min=0 lets nan and inf through; they would print nan scores and exit 0."""
    from typer.testing import CliRunner

    from nmt.cli.app import app

    missing = str(tmp_path / "missing.pt")
    r = CliRunner().invoke(app, [command, missing, "--alpha", alpha])
    assert r.exit_code == 2 and "--alpha" in r.output and "missing.pt" not in r.output
    r = CliRunner().invoke(app, [command, missing, "--alpha", "1.0"])  # a finite alpha passes
    assert r.exit_code == 2 and "missing.pt" in r.output


@pytest.mark.parametrize("join", ["0", "-3"])
def test_heads_join_below_one_is_refused_before_any_checkpoint_is_read(join, tmp_path):
    """`nmt heads --join 0` used to load the checkpoint and the test set (minutes on a
    loaded machine) before saying that k must be at least 1."""
    from typer.testing import CliRunner

    from nmt.cli.app import app

    missing = str(tmp_path / "missing.pt")
    r = CliRunner().invoke(app, ["heads", missing, "--join", join])
    assert r.exit_code == 2 and "--join" in r.output and "missing.pt" not in r.output
    r = CliRunner().invoke(app, ["heads", missing, "--join", "2"])  # k >= 1 passes
    assert r.exit_code == 2 and "missing.pt" in r.output


def test_ctrl_c_while_torch_imports_exits_130_at_once_without_a_traceback():
    """A Ctrl-C in the first seconds of `nmt ...` (torch and numpy importing) printed a
    traceback, aborted, or was swallowed by a lazy loader. Here an import hook sends the
    SIGINT while nmt.cli.app imports, then stands for five seconds of an import that
    swallows KeyboardInterrupt, as a lazy loader did."""
    script = (
        "import os, signal, sys, time\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'nmt.cli.app':\n"
        "            try:\n"
        "                os.kill(os.getpid(), signal.SIGINT)\n"
        "                time.sleep(5)\n"
        "            except KeyboardInterrupt:\n"
        "                pass\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from nmt.cli import main\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", script, "translate", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 130 and r.stderr == "" and r.stdout == "", r.stderr


def test_translate_checks_its_input_before_loading_the_model(tmp_path):
    """A missing --input was reported only after torch and the model had loaded; with a
    checkpoint that cannot load, the input's error now comes first."""
    r = nmt_here("translate", tmp_path / "no_model.pt", "--input", tmp_path / "no.de")
    assert r.returncode == 2 and f"--input {tmp_path / 'no.de'}: no such file" in r.stderr
    assert "checkpoint" not in r.stderr and "Traceback" not in r.stderr


def test_a_bad_option_or_argument_is_one_line_naming_it_and_exit_2():
    """Click's usage errors come as the commands' own errors do (nmt.cli.app.main), not as a
    framed box; `nmt` alone still prints its help. A real process: the runner of nmt_here
    calls the app itself, not the console command's entry point."""
    cases = [
        (["translate", "models/deen-additive", "--beam", "0", "-i", "x"], "'--beam'"),
        (["bench", "models/deen-additive", "--search-passes", "abc"], "'--search-passes'"),
        (["trian"], "No such command 'trian'"),
        (["translate", "models/deen-additive", "--bogus"], "--bogus"),
    ]
    for args, named in cases:
        r = subprocess.run(
            [sys.executable, "-m", "nmt", *args], capture_output=True, text=True, cwd=REPO
        )
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
        assert named in lines[0] and "--help)" in lines[0]
    r = subprocess.run([sys.executable, "-m", "nmt"], capture_output=True, text=True, cwd=REPO)
    assert "Usage: python -m nmt" in r.stdout and "Traceback" not in r.stderr
