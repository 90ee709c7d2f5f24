"""Shared fixtures: a tiny in-memory vocabulary and model, and the local Multi30k slice."""

from __future__ import annotations

import gzip
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


def run_tiny_study(tmp: Path, overrides: list[str], spec: dict):
    """Write ``{tmp}/study.yaml`` (``spec`` plus ``overrides`` applied to every model, runs
    under ``{tmp}/runs``), run ``nmt study`` on it and return (config path, result); skips
    the test when the local Multi30k is missing."""
    import json
    import subprocess
    import sys

    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    cfg = tmp / "study.yaml"
    cfg.write_text(
        json.dumps(
            {
                "base_config": "configs/multi30k_deen_additive.yaml",
                "long_set_split": "test_2016_flickr",
                "report_dir": f"{tmp}/report",
                **spec,
                "overrides": [
                    f"data.path={MULTI30K}",
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
