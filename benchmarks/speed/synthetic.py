"""The training benchmarks' shared setup: random token batches shaped like Multi30k and a
Trainer for the reference architecture (configs/bench_reference.yaml), on the CPU, with no
data or vocabulary on disk. Used by train_step_speed.py and ab/step_ab.py."""

import dataclasses
import random
from pathlib import Path

import torch

from nmt.config.load import load_config
from nmt.data.batches import Example
from nmt.data.bucketing import make_batches
from nmt.model.seq2seq import build_model
from nmt.training.loop import Trainer

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 8000


def synthetic_trainer(out_dir: str, overrides: list[str] = ()):
    """(trainer, model, batches): 6,000 random pairs (source ~ N(15, 5) pieces, target
    0.8-1.1x as long), batched as training would, and a Trainer writing into out_dir."""
    cfg = load_config(str(ROOT / "configs/bench_reference.yaml"), list(overrides))
    rng = random.Random(0)
    ex = []
    for i in range(6000):
        s = max(2, int(rng.gauss(15, 5)))
        t = max(2, int(s * rng.uniform(0.8, 1.1)))
        ex.append(
            Example(
                [rng.randrange(4, VOCAB) for _ in range(s)] + [3],
                [rng.randrange(4, VOCAB) for _ in range(t)],
                i,
            )
        )
    batches = make_batches(
        ex, cfg.train.batch_size, max_tokens=cfg.train.max_tokens, shuffle_seed=1
    )
    torch.manual_seed(1)
    model = build_model(cfg.model, VOCAB, VOCAB)
    cfg = dataclasses.replace(
        cfg, train=dataclasses.replace(cfg.train, out_dir=out_dir, device="cpu")
    )
    trainer = Trainer(
        cfg,
        model,
        None,
        None,
        train_set=[],
        valid_examples=[],
        validate=lambda m: {},
        log=lambda m: None,
    )
    model.train()
    return trainer, model, batches
