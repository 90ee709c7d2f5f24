"""Decoding several batches at once (translate_lines' workers) changes nothing but speed."""

import pytest
import torch

from conftest import TOY_PAIRS, tiny_model
from nmt.translate import Decoding, decode_workers, translate_lines

LINES = [s for s, _ in TOY_PAIRS] + ["ein mann", "", "zwei katzen schlafen im schnee ."]


@pytest.mark.parametrize("beam", [1, 3])
def test_workers_give_the_same_translations_as_one_batch_at_a_time(toy_vocabs, beam):
    model = tiny_model(*toy_vocabs).eval()
    threads = torch.get_num_threads()
    dec = Decoding(beam_size=beam, n_best=beam)
    ref = translate_lines(model, *toy_vocabs, LINES, batch_size=2, decoding=dec, workers=1)
    for workers in (2, 3):
        out = translate_lines(model, *toy_vocabs, LINES, batch_size=2, decoding=dec,
                              workers=workers)
        assert torch.get_num_threads() == threads  # restored
        assert [t.source for t in out] == LINES
        for a, b in zip(ref, out):
            assert (a.text, a.tgt_pieces, a.nbest) == (b.text, b.tgt_pieces, b.nbest)
            assert a.score == pytest.approx(b.score, abs=1e-5)
            if a.attention is None:
                assert b.attention is None
            else:
                torch.testing.assert_close(a.attention, b.attention)


def test_decode_workers_counts_and_checks():
    cpu = torch.device("cpu")
    assert decode_workers(cpu, batches=10, workers=4) == 4
    assert decode_workers(cpu, batches=3, workers=4) == 3  # never more than the batches
    assert decode_workers(cpu, batches=10) == min(torch.get_num_threads(), 10)
    assert decode_workers(torch.device("cuda"), batches=10, workers=4) == 1
    with pytest.raises(ValueError, match="workers must be >= 1"):
        decode_workers(cpu, batches=10, workers=0)


def test_an_error_in_one_batch_reaches_the_caller_and_the_threads_are_restored(toy_vocabs,
                                                                         monkeypatch):
    import nmt.translate

    model = tiny_model(*toy_vocabs).eval()
    threads, calls = torch.get_num_threads(), []
    real = nmt.translate._search

    def failing(model, src, src_len, decoding):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("batch 2 failed")
        return real(model, src, src_len, decoding)

    monkeypatch.setattr(nmt.translate, "_search", failing)
    with pytest.raises(RuntimeError, match="batch 2 failed"):
        translate_lines(model, *toy_vocabs, LINES, batch_size=1, workers=2)
    assert torch.get_num_threads() == threads
