"""``search.precision=auto`` on a CPU measures the search in each precision the CPU has and
takes the fastest only when clearly faster than fp32; the answer is cached
(nmt/inference/search_choice.py)."""

import itertools
import json
from types import SimpleNamespace

import pytest
import torch
from test_search import _trained

import nmt.inference.search_choice as sc
import nmt.training.calibrate as calibrate
from nmt.config.schema import Config
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator


def test_pick_takes_the_fastest_only_when_clearly_faster_than_fp32():
    assert sc.pick({"fp32": 1.0, "bf16": 0.8, "int8": 0.7}) == "int8"
    assert sc.pick({"fp32": 1.0, "bf16": 0.8, "int8": 0.9}) == "bf16"
    assert sc.pick({"fp32": 1.0, "bf16": 0.96}) == "fp32"  # within the margin: noise
    assert sc.pick({"fp32": 1.0, "bf16": 1.5, "int8": 1.2}) == "fp32"


def test_measure_alternates_the_order_and_gives_each_round_its_own_batch():
    calls = []
    ticks = itertools.count()
    seconds = {"fp32": 3, "bf16": 1, "int8": 2}

    def timing(precision, k):
        calls.append((precision, k))
        for _ in range(seconds[precision] - 1):
            next(ticks)  # the fake clock moves by this precision's cost

    got = sc.measure(timing, ["fp32", "bf16", "int8"], rounds=2, clock=lambda: next(ticks))
    assert calls[:3] == [("fp32", 0), ("bf16", 0), ("int8", 0)]  # untimed warm-up
    assert calls[3:6] == [("fp32", 1), ("bf16", 1), ("int8", 1)]
    assert calls[6:] == [("int8", 2), ("bf16", 2), ("fp32", 2)]
    assert got == {"fp32": 3, "bf16": 1, "int8": 2}
    with pytest.raises(ValueError, match="at least one round"):
        sc.measure(timing, ["fp32"], rounds=0)


def test_candidates_follow_the_cpu(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(sc, "native_bf16", lambda device: False)
    assert sc.candidates(cpu)[0] == "fp32" and "bf16" not in sc.candidates(cpu)
    monkeypatch.setattr(sc, "native_bf16", lambda device: True)
    assert "bf16" in sc.candidates(cpu)


def test_the_answer_is_measured_once_then_cached(toy_vocabs, tmp_path, monkeypatch):
    model = _trained(toy_vocabs, "additive", "bahdanau")
    monkeypatch.setattr(sc, "candidates", lambda device: ["fp32", "bf16"])
    measured = []

    def fake_measure(timing, precisions):
        timing("bf16", 1)  # the timing really searches in that precision
        measured.append(precisions)
        return {"fp32": 2.0, "bf16": 1.0}

    monkeypatch.setattr(sc, "measure", fake_measure)
    lines: list[str] = []
    path = tmp_path / "precision.json"
    first = sc.choose_search_precision(
        model, len(toy_vocabs[0]), batch_size=4, beam=2, log=lines.append, path=path
    )
    assert (first.choice, first.cached, first.path) == ("bf16", False, path)
    assert len(lines) == 1 and "bf16 taken" in lines[0] and "measured now" in lines[0]
    again = sc.choose_search_precision(
        model, len(toy_vocabs[0]), batch_size=4, beam=2, log=lines.append, path=path
    )
    assert (again.choice, again.cached, again.seconds) == ("bf16", True, first.seconds)
    assert len(measured) == 1 and len(lines) == 1  # a cached answer is not logged
    other_beam = sc.choose_search_precision(
        model, len(toy_vocabs[0]), batch_size=4, beam=1, log=lines.append, path=path
    )
    assert not other_beam.cached and len(json.loads(path.read_text())) == 2


def test_an_unreadable_cache_is_measured_over(toy_vocabs, tmp_path, monkeypatch):
    model = _trained(toy_vocabs, "additive", "bahdanau")
    monkeypatch.setattr(sc, "candidates", lambda device: ["fp32", "int8"])
    monkeypatch.setattr(sc, "measure", lambda timing, precisions: {"fp32": 1.0, "int8": 0.99})
    path = tmp_path / "precision.json"
    path.write_text("{not json", encoding="utf-8")
    lines: list[str] = []
    cal = sc.choose_search_precision(model, 10, batch_size=2, beam=1, log=lines.append, path=path)
    assert cal.choice == "fp32"  # 1% faster is noise
    assert "unreadable precision cache" in lines[0]


def test_a_cpu_with_fp32_only_measures_nothing(toy_vocabs, tmp_path, monkeypatch):
    model = _trained(toy_vocabs, "additive", "bahdanau")
    monkeypatch.setattr(sc, "candidates", lambda device: ["fp32"])
    cal = sc.choose_search_precision(model, 10, batch_size=2, beam=1, path=tmp_path / "p.json")
    assert cal.choice == "fp32" and not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("precision", ["auto", "fp32"])
def test_a_command_measures_auto_and_keeps_a_given_precision(toy_vocabs, monkeypatch, precision):
    """Translator.from_loaded (every command's Translator) measures ``auto`` on a CPU; an
    explicit precision, and a Translator built directly, are not measured."""
    model = _trained(toy_vocabs, "additive", "bahdanau")
    seen = []

    def fake_choose(model, src_vocab, *, batch_size, beam, log):
        seen.append((beam, batch_size, torch.get_num_threads()))
        return sc.SearchCalibration("int8", {"fp32": 1.0, "int8": 0.5}, False, None)

    monkeypatch.setattr("nmt.inference.translator.choose_search_precision", fake_choose)

    src_vocab, tgt_vocab = toy_vocabs
    loaded = SimpleNamespace(model=model, src_vocab=src_vocab, tgt_vocab=tgt_vocab, cfg=Config())
    tr = Translator.from_loaded(loaded, beam_size=2, precision=precision, threads=2, batch_size=8)
    if precision == "auto":
        assert tr.decoding.precision == "int8" and seen == [(2, 8, 1)]  # 1 thread a worker
    else:
        assert tr.decoding.precision == "fp32" and seen == []
    direct = Translator(model, src_vocab, tgt_vocab, Decoding(precision="auto"))
    assert direct.decoding.precision == "auto" and len(seen) == (precision == "auto")


@pytest.mark.parametrize("bad", [None, "fast", {"x": 1}, -1.0, float("nan")])
def test_a_malformed_cache_entry_is_measured_over_with_a_warning(
    toy_vocabs, tmp_path, monkeypatch, bad
):
    """A hand-edited or damaged entry (fresh-user finding: null crashed with a traceback)."""
    model = _trained(toy_vocabs, "additive", "bahdanau")
    monkeypatch.setattr(sc, "candidates", lambda device: ["fp32", "int8"])
    monkeypatch.setattr(sc, "measure", lambda timing, precisions: {"fp32": 1.0, "int8": 0.5})
    path = tmp_path / "precision.json"
    lines: list[str] = []
    sc.choose_search_precision(model, 10, batch_size=2, beam=1, log=lines.append, path=path)
    cache = json.loads(path.read_text())
    (key,) = cache
    cache[key]["int8"] = bad
    path.write_text(json.dumps(cache), encoding="utf-8")
    lines.clear()
    cal = sc.choose_search_precision(model, 10, batch_size=2, beam=1, log=lines.append, path=path)
    assert (cal.choice, cal.cached) == ("int8", False)
    assert "malformed precision cache entry" in lines[0] and str(path) in lines[0]
    assert json.loads(path.read_text())[key]["int8"] == 0.5  # repaired


def test_the_line_names_the_search_the_cache_and_how_to_measure_again(tmp_path):
    shape = sc.SearchShape(5, 64, 1)
    cal = sc.SearchCalibration(
        "int8", {"fp32": 0.4, "int8": 0.3}, False, tmp_path / "p.json", shape
    )
    line = cal.describe()
    assert "beam 5, 64 sentences a batch, 1 thread)" in line and "400.0 ms fp32" in line
    assert f"cached in {tmp_path / 'p.json'} (delete it to measure again)" in line
    assert "greedy search" in str(sc.SearchShape(1, 8, 2)) and "2 threads" in str(
        sc.SearchShape(1, 8, 2)
    )


def test_fp16_on_a_cpu_search_names_every_precision_it_could_use():
    from nmt.ops.precision import PrecisionError, search_dtype

    with pytest.raises(PrecisionError, match=r"--precision: fp16 needs a CUDA.*fp32, bf16, int8"):
        search_dtype("fp16", torch.device("cpu"), "--precision")


def test_a_one_sentence_batch_is_named_in_the_singular():
    from nmt.inference.search_choice import SearchShape

    assert str(SearchShape(5, 1, 2)) == "beam 5, 1 sentence a batch, 2 threads"
    assert str(SearchShape(1, 64, 1)) == "greedy search, 64 sentences a batch, 1 thread"


def test_a_search_measured_beside_other_work_is_not_cached(toy_vocabs, tmp_path, monkeypatch):
    model = _trained(toy_vocabs, "additive", "bahdanau")
    monkeypatch.setattr(sc, "candidates", lambda device: ["fp32", "int8"])
    monkeypatch.setattr(sc, "measure", lambda timing, precisions: {"fp32": 2.0, "int8": 1.0})
    monkeypatch.setattr(calibrate, "others_share", lambda start: 0.6)
    monkeypatch.delenv(calibrate.BUSY_ENV)  # conftest's limit for the tests: 1
    lines: list[str] = []
    path = tmp_path / "precision.json"
    cal = sc.choose_search_precision(model, 10, batch_size=2, beam=1, log=lines.append, path=path)
    assert cal.choice == "int8" and cal.path is None and not path.exists()
    assert "not cached" in lines[0] and "not cached" in cal.describe()
