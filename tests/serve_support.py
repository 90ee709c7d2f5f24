"""What the ``nmt serve`` tests share: three tiny models (additive, none, multihead)
trained once per test session on a 200-pair slice of Multi30k, a synthetic study report,
and a live server on loopback (uvicorn in a thread).

The models are trained once for all the serve test files: the first pytest worker to need
them trains them under a lock in the session's shared temporary folder, the others wait
and reuse them.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import MULTI30K

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "data.train_limit=200",
    "data.valid_limit=20",
    "subwords.vocab_size=300",
    "model.emb_dim=32",
    "model.enc_hidden=32",
    "model.dec_hidden=64",
    "model.attn_dim=32",
    "model.output_dim=32",
    "train.max_epochs=2",
    "train.batch_size=32",
    "train.progress=false",
    "search.precision=fp32",
    "search.beam_size=3",
    "train.threads=1",
]
MODELS = {
    "additive": ["model.attention=additive"],
    "none": ["model.attention=none"],
    "multihead": ["model.attention=multihead", "model.heads=2"],
}
LINES = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee vor einem Haus.",
    "Eine Frau mit einem roten Hut liest ein Buch.",
]


def _train(out: Path) -> None:
    from nmt.commands.train import run_training
    from nmt.config.load import load_config

    for name, extra in MODELS.items():
        cfg = load_config(
            REPO / "configs/multi30k_deen_additive.yaml",
            [
                *TINY,
                *extra,
                f"data.path={MULTI30K}",
                f"name=serve_{name}",
                f"train.out_dir={out}/{{name}}",
            ],
        )
        run_training(cfg, log=lambda m: None)
    (out / "done").write_text("ok")


def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{attention: best.pt} of the three tiny models (trained once per session)."""
    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K} (set NMT_MULTI30K)")
    root = tmp_path_factory.getbasetemp()
    shared = root.parent if root.name.startswith("popen-gw") else root
    # NMT_SERVE_TEST_MODELS=DIR keeps the models between runs (while working on the tests)
    out = Path(os.environ.get("NMT_SERVE_TEST_MODELS") or shared / "serve_models")
    shared = out.parent
    out.mkdir(parents=True, exist_ok=True)
    with open(shared / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (out / "done").exists():
                shutil.rmtree(out)
                out.mkdir()
                _train(out)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return {name: out / f"serve_{name}" / "best.pt" for name in MODELS}


def synthetic_study(folder: Path) -> Path:
    """A study report folder whose results.json has two systems on test_2016_flickr in three
    buckets (the layout of nmt.study.report; the counts are Multi30k's)."""

    def row(system: str, lo: int, hi: int | None, n: int, bleu: float) -> dict[str, Any]:
        return {
            "min_len": lo,
            "max_len": hi,
            "system": system,
            "baseline": "none",
            "n": n,
            "mean_src_words": lo + 3,
            "too_few": n < 30,
            "bleu": {"score": bleu, "low": bleu - 2, "high": bleu + 2},
            "chrf": {"score": bleu + 20, "low": bleu + 18, "high": bleu + 22},
            "vs_baseline": None,
            "len_ratio": 0.9,
            "brevity_penalty": 0.89,
            "over_long": 0.0,
        }

    rows = []
    for system, base in (("none", 20.0), ("additive", 30.0)):
        rows += [
            row(system, 1, 10, 528, base),
            row(system, 11, 20, 446, base - 5),
            row(system, 21, None, 26, base - 12),
        ]
    results = {
        "study": {
            "name": "synthetic",
            "test_splits": ["test_2016_flickr"],
            "long_set_split": "test_2016_flickr",
            "join_ks": [1, 2],
            "buckets": "1-10,11-20,21-",
            "baseline": "none",
        },
        "decoding": "greedy search",
        "test_sets": {
            "test_2016_flickr": {"buckets": rows, "signature": "sig", "chrf_signature": "csig"}
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


def diagonal_alignments(folder: Path, split: str = "test_2016_flickr") -> Path:
    """A hand-made reference alignment of Multi30k's ``split`` (de-en) in ``folder``: each
    line links word k to word k for k below the shorter side's length. Returns ``folder``."""
    import gzip

    def lines(lang: str) -> list[str]:
        with gzip.open(MULTI30K / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
            return f.read().splitlines()

    rows = [
        " ".join(f"{k}-{k}" for k in range(min(len(s.split()), len(t.split()))))
        for s, t in zip(lines("de"), lines("en"), strict=True)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.de-en.gdfa").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on loopback in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def build_app(
    models: dict[str, Path],
    studies: list[Path] | None = None,
    queue: int = 16,
    ids: list[str] | None = None,
    alignments: Path | None = None,
    threads: int = 1,
    **batching: Any,
) -> Any:
    """The nmt serve application of ``models`` (id=path) on ``threads`` torch threads
    (one per search by default);
    ``alignments``: the reference alignments' folder (default: none, whatever data/
    holds); ``batching``: fields of :class:`nmt.serve.batcher.Batching`."""
    from nmt.serve.batcher import Batching
    from nmt.serve.server import ServeOptions, build

    specs = [f"{name}={path}" for name, path in models.items() if ids is None or name in ids]
    return build(
        ServeOptions(
            models=specs,
            studies=studies or [],
            threads=threads,
            queue=queue,
            device="cpu",
            batching=Batching(**batching),
            alignments=alignments,
        ),
        log=lambda m: None,
    )
