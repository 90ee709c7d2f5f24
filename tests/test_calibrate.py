"""train.precision=auto on a CPU with native bf16 chooses by measurement (issue 30, item 4)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
import torch

import nmt.training.calibrate as calibrate
import nmt.training.precision_choice
from nmt.config.schema import Config, TrainConfig
from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.training.loop import Trainer

from conftest import TOY_PAIRS, tiny_model


def _fake_step(seconds: dict, clock: list):
    """A step that advances a fake clock by the time given for its dtype."""

    def step(dtype):
        clock[0] += seconds[dtype]

    return step


@pytest.mark.parametrize("bf16_s, want", [(0.50, "bf16"), (0.96, "fp32"), (1.30, "fp32")])
def test_bf16_is_chosen_only_when_clearly_faster(tmp_path, monkeypatch, bf16_s, want):
    clock = [0.0]
    monkeypatch.setattr(calibrate.time, "perf_counter", lambda: clock[0])
    step = _fake_step({None: 1.0, torch.bfloat16: bf16_s}, clock)
    cal = calibrate.choose([step] * 4, "k", log=print, path=tmp_path / "p.json")
    assert (cal.choice, cal.cached) == (want, False)
    assert (cal.fp32_s, cal.bf16_s) == pytest.approx((1.0, bf16_s))


def test_the_answer_is_cached_and_reused_without_measuring(tmp_path):
    calls = []
    path = tmp_path / "sub" / "precision.json"
    steps = [lambda dtype, i=i: calls.append((i, dtype)) for i in range(4)]
    first = calibrate.choose(steps, "key1", path=path)
    bf = torch.bfloat16
    # one warm-up each on batch 0, then every batch once in each precision, order alternating
    assert calls == [(0, None), (0, bf), (1, None), (1, bf), (2, bf), (2, None), (3, None), (3, bf)]
    assert "key1" in json.loads(path.read_text())

    def no_step(_dtype):
        raise AssertionError("measured again despite the cache")

    again = calibrate.choose([no_step] * 4, "key1", path=path)
    assert again.cached and (again.fp32_s, again.choice) == (first.fp32_s, first.choice)
    assert f"cached in {path}" in again.describe()
    calibrate.choose(steps, "key2", path=path)  # another model or batch size
    assert len(calls) == 16
    assert set(json.loads(path.read_text())) == {"key1", "key2"}


def test_a_damaged_cache_is_measured_over_with_a_warning(tmp_path):
    path = tmp_path / "precision.json"
    path.write_text("{not json")
    messages: list[str] = []
    cal = calibrate.choose([lambda dtype: None] * 2, "k", log=messages.append, path=path)
    assert not cal.cached
    assert any(str(path) in m and "unreadable" in m for m in messages)
    assert "k" in json.loads(path.read_text())


def test_the_key_changes_with_what_decides_the_answer(monkeypatch):
    base = calibrate.calibration_key({"enc_hidden": 64}, 64)
    assert base == calibrate.calibration_key({"enc_hidden": 64}, 64)
    assert base != calibrate.calibration_key({"enc_hidden": 128}, 64)
    assert base != calibrate.calibration_key({"enc_hidden": 64}, 32)
    monkeypatch.setattr(calibrate.torch, "__version__", "0.0.0")
    assert base != calibrate.calibration_key({"enc_hidden": 64}, 64)


def test_measuring_needs_a_timed_step():
    with pytest.raises(ValueError, match="at least one timed step"):
        calibrate.measure([lambda dtype: None])


def test_measuring_leaves_the_random_state_and_the_gradients_alone(toy_vocabs):
    src_v, tgt_v = toy_vocabs
    model = tiny_model(src_v, tgt_v, dropout=0.3)
    batch = collate(encode_pairs([Pair(s, t, "toy") for s, t in TOY_PAIRS], src_v, tgt_v))
    torch.manual_seed(7)
    want = torch.rand(3)
    torch.manual_seed(7)
    fp32_s, bf16_s = calibrate.measure([calibrate.training_step(model, batch)] * 2)
    assert fp32_s > 0 and bf16_s > 0
    assert torch.equal(torch.rand(3), want)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.slow
@pytest.mark.parametrize("bf16_faster", [False, True])
def test_trainer_auto_follows_the_measurement_on_a_native_bf16_cpu(
    tmp_path, toy_vocabs, monkeypatch, bf16_faster
):
    monkeypatch.setattr(
        nmt.training.precision_choice,
        "autocast_dtype",
        lambda p, _dev, *_a: torch.bfloat16 if p != "fp32" else None,
    )
    monkeypatch.setenv(calibrate.CACHE_ENV, str(tmp_path / "cache"))
    seen: list[int] = []

    def fake_measure(steps: Sequence[calibrate.Step]) -> tuple[float, float]:
        seen.append(len(steps))
        return (1.0, 0.5 if bf16_faster else 1.1)

    monkeypatch.setattr(calibrate, "measure", fake_measure)
    src_v, tgt_v = toy_vocabs
    examples = encode_pairs([Pair(s, t, "toy") for s, t in TOY_PAIRS], src_v, tgt_v)
    messages: list[str] = []
    cfg = Config(
        train=TrainConfig(
            out_dir=str(tmp_path / "run"), device="cpu", precision="auto", batch_size=2
        )
    )
    tr = Trainer(
        cfg,
        tiny_model(src_v, tgt_v),
        src_v,
        tgt_v,
        train_set=examples,
        valid_examples=[],
        validate=lambda _m: {},
        log=messages.append,
    )
    assert tr.amp_dtype is (torch.bfloat16 if bf16_faster else None)
    line = next(m for m in messages if m.startswith("training precision:"))
    assert line.startswith(f"training precision: {'bf16' if bf16_faster else 'fp32'} (")
    assert "1000 ms/step fp32" in line and "measured now" in line
    assert (tmp_path / "cache" / "precision.json").exists()
    assert seen == [3]  # the toy set's three batches of two: a warm-up and two timed


@pytest.mark.slow
def test_explicit_precisions_are_never_measured(tmp_path, toy_vocabs, monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("explicit precision was measured")

    monkeypatch.setattr(calibrate, "measure", boom)
    src_v, tgt_v = toy_vocabs
    examples = encode_pairs([Pair(s, t, "toy") for s, t in TOY_PAIRS], src_v, tgt_v)
    for p in ("fp32", "bf16"):
        messages: list[str] = []
        cfg = Config(train=TrainConfig(out_dir=str(tmp_path), device="cpu", precision=p))
        Trainer(
            cfg,
            tiny_model(src_v, tgt_v),
            src_v,
            tgt_v,
            train_set=examples,
            valid_examples=[],
            validate=lambda _m: {},
            log=messages.append,
        )
        assert f"training precision: {p} (train.precision={p})" in messages


def test_store_keeps_what_another_process_wrote_meanwhile(tmp_path):
    """Two processes measuring at once with one cache: the later write keeps the earlier
    one's entry (fresh-user finding: the file ended with one entry of two)."""
    from nmt.training.calibrate import store

    path = tmp_path / "precision.json"
    store(path, "a", {"fp32_s": 1.0}, print)
    path.write_text(json.dumps({"a": {"fp32_s": 1.0}, "b": {"fp32_s": 2.0}}), encoding="utf-8")
    assert store(path, "c", {"fp32_s": 3.0}, print) == path
    assert sorted(json.loads(path.read_text())) == ["a", "b", "c"]


def test_a_cache_that_is_not_an_object_or_holds_nulls_is_measured_over(tmp_path):
    from nmt.training.calibrate import cached_seconds, read_cache

    path = tmp_path / "precision.json"
    path.write_text("[1, 2]", encoding="utf-8")
    lines: list[str] = []
    assert read_cache(path, lines.append) == {} and "not a JSON object" in lines[0]
    cache = {"k": {"fp32_s": None, "bf16_s": 1.0}}
    assert cached_seconds(cache, "k", ("fp32_s", "bf16_s"), path, lines.append) is None
    assert "malformed" in lines[1]
    assert cached_seconds(cache, "other", ("fp32_s",), path, lines.append) is None
    assert len(lines) == 2  # a missing entry is no news


def test_a_quoted_tilde_in_the_cache_dir_means_home(monkeypatch):
    from pathlib import Path

    from nmt.training.calibrate import cache_path

    monkeypatch.setenv("NMT_CACHE_DIR", "~/nmt-cache-x")
    assert cache_path() == Path.home() / "nmt-cache-x" / "precision.json"


def test_a_boolean_timing_and_a_file_for_a_cache_folder_are_named(tmp_path):
    """Fresh-user findings: ``true`` read as 1.0 s without a word; a cache folder that is
    a file was reported as "File exists"."""
    from nmt.training.calibrate import cached_seconds, read_cache, store

    lines: list[str] = []
    path = tmp_path / "precision.json"
    assert cached_seconds({"k": {"fp32_s": True}}, "k", ("fp32_s",), path, lines.append) is None
    assert "malformed" in lines[-1]
    folder = tmp_path / "not_a_folder"
    folder.write_text("", encoding="utf-8")
    lines.clear()
    assert read_cache(folder / "precision.json", lines.append) == {}
    assert store(folder / "precision.json", "k", {"fp32_s": 1.0}, lines.append) is None
    assert lines == [f"warning: could not cache the precision choice: {folder} is not a directory"]


def _clocks(monkeypatch, *clocks):
    """cpu_clock returns these in turn: (machine busy s, own CPU s, wall s)."""
    it = iter(calibrate.CpuClock(*c) for c in clocks)
    monkeypatch.setattr(calibrate, "cpu_clock", lambda: next(it))


def test_others_share_is_their_busy_time_over_the_machine(monkeypatch):
    monkeypatch.setattr(calibrate.os, "cpu_count", lambda: 2)
    # 10 s on 2 CPUs: 16 busy seconds, 12 of them this process's -> others 4 of 20
    _clocks(monkeypatch, (100.0, 5.0, 50.0), (116.0, 17.0, 60.0))
    assert calibrate.others_share(calibrate.cpu_clock()) == pytest.approx(0.2)
    _clocks(monkeypatch, (100.0, 5.0, 50.0), (108.0, 17.0, 60.0))  # ticks coarser than own
    assert calibrate.others_share(calibrate.cpu_clock()) == 0.0
    monkeypatch.setattr(calibrate, "cpu_clock", lambda: None)  # no /proc/stat
    assert calibrate.others_share(None) is None


def test_others_share_of_a_window_below_the_ticks_resolution_is_unknown(monkeypatch):
    """One 10 ms tick of other work in a 5 ms window read as 100% of both CPUs (a fresh
    user's test run, where a stand-in measurement was then not cached): too short to tell;
    a longer window is read, and never above all the CPUs."""
    monkeypatch.setattr(calibrate.os, "cpu_count", lambda: 2)
    _clocks(monkeypatch, (100.0, 5.0, 50.0), (100.01, 5.0, 50.005))
    assert calibrate.others_share(calibrate.cpu_clock()) is None
    _clocks(monkeypatch, (100.0, 5.0, 50.0), (103.0, 5.0, 51.0))  # 3 s busy in 1 s on 2 CPUs
    assert calibrate.others_share(calibrate.cpu_clock()) == 1.0


@pytest.mark.parametrize("busy, cached", [(4.0, True), (12.0, False)])
def test_an_answer_measured_beside_other_work_is_used_but_not_cached(
    tmp_path, monkeypatch, busy, cached
):
    monkeypatch.delenv(calibrate.BUSY_ENV)  # conftest's limit for the tests: 1
    monkeypatch.setattr(calibrate.os, "cpu_count", lambda: 2)
    # the measurement's 10 s: this process 12 CPU s, others 4 (20%) or 12 (60%)
    _clocks(monkeypatch, (100.0, 5.0, 50.0), (100.0 + 12.0 + busy, 17.0, 60.0))
    path, lines = tmp_path / "p.json", list[str]()
    cal = calibrate.choose([lambda dtype: None] * 3, "k", log=lines.append, path=path)
    assert path.exists() is cached and (cal.path == path) is cached
    assert any("used for this run only, not cached" in m for m in lines) is not cached


def test_the_clock_reads_this_linux_machine():
    now = calibrate.cpu_clock()
    assert now is not None and now.machine_busy > 0 and now.own > 0
    later = calibrate.cpu_clock()
    assert later is not None and later.machine_busy >= now.machine_busy and later.wall > now.wall


def test_the_limit_can_be_set_and_a_bad_one_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(calibrate, "others_share", lambda start: 0.6)
    for value, cached, warned in (("0.7", True, False), ("0.5", False, False), ("x", False, True)):
        monkeypatch.setenv(calibrate.BUSY_ENV, value)
        path, lines = tmp_path / f"{value}.json", list[str]()
        calibrate.choose([lambda dtype: None] * 3, "k", log=lines.append, path=path)
        assert path.exists() is cached
        assert any(f"{calibrate.BUSY_ENV}='x' is not a number" in m for m in lines) is warned
