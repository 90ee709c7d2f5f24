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
    check_primitive_caches,
    primitive_cache_capacities,
)
from nmt.training import loop

from conftest import REPO, bare_trainer


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
    bare_trainer(cfg, toy_vocabs)
    assert seen == [[str(DEFAULT_CAPACITY), preset or str(DEFAULT_CAPACITY)]]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LRU_CACHE_CAPACITY", "abc"),
        ("LRU_CACHE_CAPACITY", "0"),
        ("LRU_CACHE_CAPACITY", "-1"),
        ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "-1"),
        ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1.5"),
    ],
)
def test_values_the_libraries_crash_on_or_misread_are_refused(name, value):
    env = {name: value}
    with pytest.raises(ValueError, match=f"^{name}={value!r}: must be a whole number"):
        cap_primitive_caches(env)
    assert env == {name: value}  # nothing set when refused


def test_accepted_values_and_empty_ones():
    env = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0", "LRU_CACHE_CAPACITY": " 64"}
    check_primitive_caches(env)
    assert env == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0", "LRU_CACHE_CAPACITY": " 64"}
    env = {"LRU_CACHE_CAPACITY": "  "}
    check_primitive_caches(env)
    assert env == {}  # set but empty is unset: ideep would read it as 0 and crash


def _nmt(args, env_extra, stdin=""):
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES} | env_extra
    return subprocess.run(
        [sys.executable, "-m", "nmt", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def test_every_command_refuses_a_bad_value_in_one_line():
    out = _nmt(["translate", "--help"], {"LRU_CACHE_CAPACITY": "abc"})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "error: LRU_CACHE_CAPACITY='abc': must be a whole number of at least 1 (the kernel "
        f"cache's entries; unset, nmt's training uses {DEFAULT_CAPACITY})"
    ]


def test_an_empty_value_does_not_crash_a_bf16_search():
    """An empty LRU_CACHE_CAPACITY (``export LRU_CACHE_CAPACITY=``) crashed bf16 search with
    a segmentation fault; the command now unsets it first."""
    out = _nmt(
        ["translate", "models/deen-additive", "--precision", "bf16"],
        {"LRU_CACHE_CAPACITY": ""},
        stdin="Ein Hund läuft.\n",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
