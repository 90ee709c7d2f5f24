"""The caps nmt puts on the bf16 kernel caches: set by a training process where unset, never
overriding the environment, and left alone by a search process."""

import os
import subprocess
import sys

import pytest

from nmt.config.schema import Config, TrainConfig
from nmt.ops.primitive_cache import (
    DEFAULT_CAPACITY,
    VARIABLES,
    cap_primitive_caches,
    primitive_cache_capacities,
)
from nmt.training import loop
from nmt.training.loop import Trainer

from conftest import tiny_model


def test_unset_or_empty_variables_get_the_default_and_set_ones_are_kept():
    env = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024", "LRU_CACHE_CAPACITY": ""}
    cap_primitive_caches(env)
    assert env == {
        "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024",
        "LRU_CACHE_CAPACITY": str(DEFAULT_CAPACITY),
    }
    env = {}
    cap_primitive_caches(env)
    assert env == {v: str(DEFAULT_CAPACITY) for v in VARIABLES}
    assert primitive_cache_capacities({}) == {v: "" for v in VARIABLES}


def test_importing_nmt_leaves_the_caches_alone():
    """A search process (nmt translate, evaluate, serve) keeps the libraries' default: the
    caps cost bf16 search speed (results/speed/2026-12-07-zen5-caches/)."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    code = (
        "import os, nmt, nmt.cli.app, nmt.inference.translator\n"
        f"print([os.environ.get(v) for v in {VARIABLES!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr([None, None])


@pytest.mark.slow  # builds a Trainer (the tiers' rule), though it takes no step
@pytest.mark.parametrize("preset", [None, "7"])
def test_a_trainer_caps_the_caches_before_its_first_product(
    monkeypatch, tmp_path, toy_vocabs, preset
):
    """Trainer sets the caps (where the environment has none) before anything it runs could
    make oneDNN or ideep read them: before its precision calibration and first step."""
    for v in VARIABLES:
        monkeypatch.delenv(v, raising=False)
    if preset is not None:
        monkeypatch.setenv("LRU_CACHE_CAPACITY", preset)
    seen = []
    monkeypatch.setattr(
        loop,
        "training_precision",
        lambda *a, **k: seen.append([os.environ.get(v) for v in VARIABLES]),
    )
    cfg = Config(train=TrainConfig(out_dir=str(tmp_path), device="cpu", precision="fp32"))
    Trainer(
        cfg,
        tiny_model(*toy_vocabs),
        *toy_vocabs,
        train_set=[],
        valid_examples=[],
        validate=lambda _m: {},
        log=lambda _m: None,
    )
    assert seen == [[str(DEFAULT_CAPACITY), preset or str(DEFAULT_CAPACITY)]]
