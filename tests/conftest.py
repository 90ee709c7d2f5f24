"""Shared fixtures: a tiny in-memory vocabulary and model, and the local Multi30k slice."""

from __future__ import annotations

import gzip
import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

# Tiny test models run fastest on one thread, and several threads spin badly when the
# machine is busy; subprocesses started by the tests inherit this.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# train.precision=auto caches its measurement (nmt/training/calibrate.py); tests and the
# subprocesses they start keep theirs apart from the user's ~/.cache/nmt
os.environ["NMT_CACHE_DIR"] = tempfile.mkdtemp(prefix="nmt-test-cache-")
# and cache it whatever runs beside (parallel test workers always do): the limit's own tests
# in tests/test_calibrate.py unset this
os.environ["NMT_CACHE_BUSY_SHARE"] = "1"

import pytest
import torch

from nmt.config.schema import ModelConfig
from nmt.data.vocab import train_vocab
from nmt.model.seq2seq import build_model

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
MULTI30K = Path(os.environ.get("NMT_MULTI30K", REPO.parent / "shared" / "data" / "multi30k"))


def torchrun(nproc: int = 2) -> list[str]:
    """The torchrun command (as ``python -m``) on a port free now: two pytest workers may
    each start one, and torchrun's default port would be taken by the first."""
    import socket
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
    ]


def nmt_here(*args, input=None, cwd: Path = REPO):
    """``nmt ARGS`` run in this process (typer's CliRunner, from ``cwd``: the project root
    unless given), answered like ``subprocess.run`` of ``python -m nmt ARGS``: returncode,
    stdout, stderr. For the refusals and options that need no process of their own: each
    ``python -m nmt`` pays torch's import again (seconds of CPU, far more on a busy 2-core
    machine). The command's own error handling (nmt/cli/app.py) prints what the user sees,
    so the answer is the real command's (but for Click's usage errors, a bad option or
    argument, which come as Click frames them: nmt.cli.app.main makes them one line); an
    exception that the command does not turn into an exit status is raised here, as the
    real command would print its traceback."""
    import types

    from typer.testing import CliRunner

    from nmt.cli.app import app

    here = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(app, list(map(str, args)), input=input)
    finally:
        os.chdir(here)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return types.SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


TOY_PAIRS = [
    ("ein mann läuft .", "a man runs ."),
    ("eine frau singt .", "a woman sings ."),
    ("zwei hunde spielen im schnee .", "two dogs play in the snow ."),
    ("ein kind isst einen apfel .", "a child eats an apple ."),
    ("der mann liest ein buch .", "the man reads a book ."),
    ("eine katze schläft .", "a cat sleeps ."),
]


@pytest.fixture(scope="session")
def toy_vocabs():
    """Character-level-ish SentencePiece models trained on the toy pairs."""
    src = train_vocab([s for s, _ in TOY_PAIRS] * 5, vocab_size=40, model_type="bpe")
    tgt = train_vocab([t for _, t in TOY_PAIRS] * 5, vocab_size=40, model_type="bpe")
    return src, tgt


def tiny_model(src_vocab, tgt_vocab, **overrides):
    """A small model for fast tests; ``overrides`` are ModelConfig fields."""
    fields: dict[str, Any] = dict(
        emb_dim=16, enc_hidden=16, dec_hidden=32, attn_dim=16, output_dim=16, dropout=0.0
    )
    fields.update(overrides)
    torch.manual_seed(0)
    return build_model(ModelConfig(**fields), len(src_vocab), len(tgt_vocab))


def bare_trainer(cfg, vocabs, log=lambda _m: None):
    """A Trainer of :func:`tiny_model` with no training or validation data, for tests of what
    constructing one does (its device, precision, kernel caches, batch padding)."""
    from nmt.training.loop import Trainer

    return Trainer(
        cfg,
        tiny_model(*vocabs),
        *vocabs,
        train_set=[],
        valid_examples=[],
        validate=lambda _m: {},
        log=log,
    )


def write_split(directory: Path, split: str, lang: str, lines: list[str], gz: bool = False):
    """Write ``lines`` as ``{directory}/{split}.{lang}[.gz]``."""
    directory.mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path = directory / f"{split}.{lang}{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.fixture
def multi30k() -> Path:
    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K} (set NMT_MULTI30K)")
    return MULTI30K


# test sentences of each split in a tiny study's corpus: the study decodes every test set
# (and its joined set) with every model, which on the full 1,000-pair splits was most of
# a study test's cost; 250 pairs still fill every length bucket the tests read
STUDY_TEST_PAIRS = 250


def multi30k_slice(
    directory: Path, test_pairs: int = STUDY_TEST_PAIRS, val_pairs: int | None = None
) -> Path:
    """A de-en Multi30k in ``directory``: the local train file (linked), val (linked, or
    its first ``val_pairs`` pairs) and the first ``test_pairs`` pairs of test_2016_flickr
    and test_2017_flickr."""
    directory.mkdir(parents=True, exist_ok=True)
    cut = {"test_2016_flickr": test_pairs, "test_2017_flickr": test_pairs, "val": val_pairs}
    for split in ("train", *cut):
        for lang in ("de", "en"):
            source = MULTI30K / f"{split}.{lang}.gz"
            if cut.get(split) is None:
                (directory / source.name).symlink_to(source)
                continue
            with gzip.open(source, "rt", encoding="utf-8") as f:
                lines = [line.rstrip("\n") for line in itertools.islice(f, cut[split])]
            write_split(directory, split, lang, lines, gz=True)
    return directory


def run_tiny_study(tmp: Path, overrides: list[str], spec: dict):
    """Write ``{tmp}/study.yaml`` (``spec`` plus ``overrides`` applied to every model, runs
    under ``{tmp}/runs``, the corpus :func:`multi30k_slice` in ``{tmp}/corpus``), run
    ``nmt study`` on it and return (config path, result); skips the test when the local
    Multi30k is missing."""
    import json
    import subprocess
    import sys

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    corpus = multi30k_slice(tmp / "corpus")
    cfg = tmp / "study.yaml"
    cfg.write_text(
        json.dumps(
            {
                "base_config": "configs/multi30k_deen_additive.yaml",
                "long_set_split": "test_2016_flickr",
                "report_dir": f"{tmp}/report",
                **spec,
                "overrides": [
                    f"data.path={corpus}",
                    *overrides,
                    "train.max_epochs=1",
                    "train.progress=false",
                    f"train.out_dir={tmp}/runs/{{name}}",
                ],
            }
        )
    )
    r = subprocess.run(
        [sys.executable, "-m", "nmt", "study", str(cfg)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    return cfg, r
