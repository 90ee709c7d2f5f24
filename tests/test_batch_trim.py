"""``train.batch_trim`` (nmt/data/bucketing.py): batches cut back to a multiple of N
sentences, the rest starting the next batch, with no pair lost, duplicated or padded;
both batching functions agree; applied only under CPU autocast, where the kernel caches
keep the libraries' size; bad values refused."""

from __future__ import annotations

import numpy as np
import pytest
from test_batch_multiple import bench_bf16, seen_shapes
from test_bench import REFERENCE, tiny_corpus  # noqa: F401 (a fixture)
from test_store import _examples

from nmt.config.load import load_config
from nmt.config.schema import Config, ConfigError, TrainConfig
from nmt.data.bucketing import make_batches, token_batches, trimmed_count
from nmt.ops.primitive_cache import (
    DEFAULT_CAPACITY,
    TRIMMED_CAPACITY,
    VARIABLES,
    cap_primitive_caches,
)

from conftest import bare_trainer


def _lengths(n: int, seed: int, longest: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(1, longest, n).astype(np.int32)
    return src, rng.integers(0, longest, n).astype(np.int32)


def test_trimmed_count_keeps_a_multiple_or_everything_below_it():
    assert [trimmed_count(n, 32) for n in (0, 5, 31, 32, 33, 63, 64, 95)] == [
        0, 5, 31, 32, 32, 32, 64, 64,
    ]  # fmt: skip
    assert trimmed_count(45, None) == 45


@pytest.mark.parametrize("trim", [1, 4, 16, 32])
def test_trimmed_batches_hold_multiples_every_pair_once_within_the_limits(trim):
    src, tgt = _lengths(3000, 0)
    max_tokens, batch_size = 600, 80
    batches = make_batches(_examples(src, tgt), batch_size, max_tokens=max_tokens, trim=trim)
    seen = sorted(e.index for b in batches for e in b)
    assert seen == list(range(3000))
    sizes = [len(b) for b in batches]
    # every batch but the sorted order's last: a multiple, or fewer than trim (long pairs,
    # or the rest of one whose next pair did not fit beside them)
    assert all(n % trim == 0 or n < trim for n in sizes[:-1])
    for b in batches:
        width = max(max(len(e.src), len(e.tgt) + 1) for e in b)
        assert len(b) <= batch_size and (len(b) * width <= max_tokens or len(b) == 1)
    untrimmed = make_batches(_examples(src, tgt), batch_size, max_tokens=max_tokens)
    if trim > 1:  # the point: few batch sizes
        assert len(set(sizes)) < len({len(b) for b in untrimmed})
    else:
        assert [[e.index for e in b] for b in batches] == [[e.index for e in b] for b in untrimmed]


@pytest.mark.parametrize("batch_size,max_tokens,trim", [(64, 500, 16), (50, None, 8), (7, 40, 4)])
def test_token_batches_trim_as_make_batches_does(batch_size, max_tokens, trim):
    src, tgt = _lengths(2000, 1, longest=60)
    ours = token_batches(src, tgt, batch_size, max_tokens=max_tokens, trim=trim)
    theirs = make_batches(_examples(src, tgt), batch_size, max_tokens=max_tokens, trim=trim)
    assert [b.tolist() for b in ours] == [[e.index for e in b] for b in theirs]
    seeded = token_batches(src, tgt, batch_size, max_tokens=max_tokens, shuffle_seed=3, trim=trim)
    assert sorted(np.concatenate(list(seeded)).tolist()) == list(range(2000))


def test_a_rest_that_does_not_fit_beside_the_next_pair_is_a_batch_of_its_own():
    """Three pairs of width 10 then one of width 40, max_tokens 40, trim 2: the first batch
    (width 10) closes at the wide pair with 3, keeps 2, and the third pair cannot join the
    wide one (2 x 40 > 40), so it is a batch alone; no batch exceeds max_tokens."""
    src = np.array([10, 10, 10, 40], dtype=np.int32)
    tgt = np.array([1, 1, 1, 1], dtype=np.int32)
    for batches in (
        [b.tolist() for b in token_batches(src, tgt, 8, max_tokens=40, trim=2)],
        [[e.index for e in b] for b in make_batches(_examples(src, tgt), 8, max_tokens=40, trim=2)],
    ):
        assert batches == [[0, 1], [2], [3]]


def test_a_bad_batch_trim_is_refused_naming_the_option():
    with pytest.raises(ConfigError, match=r"train.batch_trim: must be positive, got 0$"):
        load_config(REFERENCE, ["train.batch_trim=0"])
    with pytest.raises(ConfigError, match="train.batch_trim: expected an integer"):
        load_config(REFERENCE, ["train.batch_trim=many"])
    assert load_config(REFERENCE).train.batch_trim is None  # off by default


def test_trimmed_runs_keep_the_libraries_cache_size_and_the_environment_wins():
    env: dict[str, str] = {}
    cap_primitive_caches(env)
    assert env == dict.fromkeys(VARIABLES, str(DEFAULT_CAPACITY))
    env = {}
    cap_primitive_caches(env, trimmed=True)
    assert env == dict.fromkeys(VARIABLES, str(TRIMMED_CAPACITY))
    env = {VARIABLES[0]: "64"}
    cap_primitive_caches(env, trimmed=True)
    assert env == {VARIABLES[0]: "64", VARIABLES[1]: str(TRIMMED_CAPACITY)}


@pytest.mark.slow
@pytest.mark.parametrize("precision,applied", [("fp32", False), ("bf16", True)])
def test_the_trainer_trims_only_under_cpu_autocast(tmp_path, toy_vocabs, precision, applied):
    """fp32 (and CUDA) batches stay as they are: trimming is for oneDNN's bf16 shapes."""
    cfg = Config(
        train=TrainConfig(
            out_dir=str(tmp_path), device="cpu", precision=precision, batch_trim=4, batch_size=7
        )
    )
    trainer = bare_trainer(cfg, toy_vocabs)
    assert trainer.batch_trim == (4 if applied else None)


@pytest.mark.slow
def test_bench_trims_bf16_batches_and_records_it(tiny_corpus, monkeypatch):  # noqa: F811
    """``nmt bench CONFIG train.batch_trim=4 --precision bf16``: every timed batch but those
    under 4 sentences holds a multiple of 4, and the JSON says the option applied."""
    seen = seen_shapes(monkeypatch)
    result = bench_bf16(tiny_corpus, "train.batch_trim=4", 3)
    assert result["train"]["batch_trim"] == 4
    assert len(seen) == 4 and all(b % 4 == 0 or b < 4 for b, _ in seen), seen
