"""Search in forked worker processes (nmt/inference/search_processes.py): the same output
as threads, a fresh fork after the model changes, errors reach the caller, bad splits are
refused with the option's name."""

from __future__ import annotations

import multiprocessing

import pytest
import torch
from typer.testing import CliRunner

from nmt.data.vocab import Vocab
from nmt.inference.search_processes import ProcessSearchError, check_processes
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator

from conftest import TOY_PAIRS, tiny_model

Vocabs = tuple[Vocab, Vocab]
LINES = [s for s, _ in TOY_PAIRS] * 3 + ["ein mann", "", "zwei katzen schlafen im schnee ."]


def _same(a, b) -> None:
    assert [t.source for t in b] == [t.source for t in a]
    for x, y in zip(a, b, strict=True):
        assert (x.text, x.tgt_pieces, x.nbest, x.complete) == (
            y.text,
            y.tgt_pieces,
            y.nbest,
            y.complete,
        )
        assert x.score == y.score  # searched alone either way: the very same numbers
        if x.attention is None:
            assert y.attention is None
        else:
            assert isinstance(y.attention, torch.Tensor)
            torch.testing.assert_close(x.attention, y.attention, rtol=0, atol=0)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("beam", [1, 3])
def test_processes_translate_as_threads_do(toy_vocabs: Vocabs, precision, beam):
    model = tiny_model(*toy_vocabs).eval()
    dec = Decoding(beam_size=beam, n_best=beam, precision=precision)
    threads = torch.get_num_threads()
    kw = dict(decoding=dec, threads=2, workers=2, batch_size=2)
    ref = Translator(model, *toy_vocabs, **kw).translate(LINES)  # type: ignore[arg-type]
    forked = Translator(model, *toy_vocabs, processes=True, **kw)  # type: ignore[arg-type]
    _same(ref, forked.translate(LINES))
    _same(ref, forked.translate(LINES))  # the same children, a second time
    assert torch.get_num_threads() == threads
    peaks = forked.search_process_peaks_mib()
    assert 1 <= len(peaks) <= 2 and all(p > 10 for p in peaks)  # torch alone takes more
    assert Translator(model, *toy_vocabs, **kw).search_process_peaks_mib() == []  # type: ignore[arg-type]


def test_a_changed_model_is_forked_anew(toy_vocabs: Vocabs):
    model = tiny_model(*toy_vocabs).eval()
    forked = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=2, processes=True)
    before = forked.translate(LINES)
    first = forked._forks
    with torch.no_grad():  # as an optimizer step changes it: in place, version counter moved
        model.generator.bias.add_(torch.linspace(-3, 3, model.generator.bias.numel()))
    after = forked.translate(LINES)
    assert forked._forks is not first
    ref = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=2).translate(LINES)
    _same(ref, after)
    assert [t.text for t in after] != [t.text for t in before]  # the change was seen


def test_an_error_in_a_child_reaches_the_caller(toy_vocabs: Vocabs, monkeypatch):
    import nmt.inference.translator

    real = nmt.inference.translator._search

    def failing(model, src, src_len, decoding):
        if src.size(0) == 1:  # the batch of the one-line chunk below
            raise RuntimeError("batch of one failed")
        return real(model, src, src_len, decoding)

    monkeypatch.setattr(nmt.inference.translator, "_search", failing)
    model = tiny_model(*toy_vocabs).eval()
    forked = Translator(model, *toy_vocabs, threads=2, workers=2, batch_size=4, processes=True)
    with pytest.raises(RuntimeError, match="batch of one failed"):
        forked.translate(LINES[:5])  # batches of 4 and 1
    # the failed children were stopped; the next call forks new ones and succeeds
    assert len(forked.translate(LINES[:4])) == 4


def test_check_processes_refuses_what_cannot_run(monkeypatch):
    cpu = torch.device("cpu")
    check_processes(2, 2, cpu)  # one thread each: fine
    with pytest.raises(
        ProcessSearchError, match=r"--workers must equal --threads \(got 2 workers for 4"
    ):
        check_processes(2, 4, cpu)
    with pytest.raises(ProcessSearchError, match="for the CPU, not cuda"):
        check_processes(2, 2, torch.device("cuda"))
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    with pytest.raises(ProcessSearchError, match="'fork' start method"):
        check_processes(2, 2, cpu)


def test_translator_checks_at_construction(toy_vocabs: Vocabs):
    model = tiny_model(*toy_vocabs).eval()
    with pytest.raises(ValueError, match="--workers must equal --threads"):
        Translator(model, *toy_vocabs, threads=4, workers=2, processes=True)


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_cli_refuses_processes_with_shared_threads(command):
    from nmt.cli.app import app

    workers = str(torch.get_num_threads() + 1)  # more than the threads: one would need less than 1
    args = [command, "deen-additive", "--processes", "--workers", workers]
    res = CliRunner().invoke(app, args + (["-i", "/dev/null"] if command == "translate" else []))
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--workers must equal --threads" in lines[0], res.output
