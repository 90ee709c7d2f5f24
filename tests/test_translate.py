"""Decoding several batches at once (translate_lines' workers) changes nothing but speed."""

from typing import cast

import pytest
import torch

from nmt.data.vocab import Vocab
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator, decode_workers, translate_lines

from conftest import TOY_PAIRS, tiny_model, write_split

Vocabs = tuple[Vocab, Vocab]  # the toy_vocabs fixture: source and target

LINES = [s for s, _ in TOY_PAIRS] + ["ein mann", "", "zwei katzen schlafen im schnee ."]


@pytest.mark.parametrize("beam", [1, 3])
def test_workers_give_the_same_translations_as_one_batch_at_a_time(toy_vocabs: Vocabs, beam):
    model = tiny_model(*toy_vocabs).eval()
    threads = torch.get_num_threads()
    dec = Decoding(beam_size=beam, n_best=beam)
    ref = translate_lines(model, *toy_vocabs, LINES, batch_size=2, decoding=dec, workers=1)
    for workers in (2, 3):
        out = translate_lines(
            model, *toy_vocabs, LINES, batch_size=2, decoding=dec, workers=workers
        )
        assert torch.get_num_threads() == threads  # restored
        assert [t.source for t in out] == LINES
        for a, b in zip(ref, out, strict=True):
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


def test_an_error_in_one_batch_reaches_the_caller_and_the_threads_are_restored(
    toy_vocabs: Vocabs, monkeypatch
):
    import nmt.inference.translator

    model = tiny_model(*toy_vocabs).eval()
    threads, calls = torch.get_num_threads(), []
    real = nmt.inference.translator._search

    def failing(model, src, src_len, decoding):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("batch 2 failed")
        return real(model, src, src_len, decoding)

    monkeypatch.setattr(nmt.inference.translator, "_search", failing)
    with pytest.raises(RuntimeError, match="batch 2 failed"):
        translate_lines(model, *toy_vocabs, LINES, batch_size=1, workers=2)
    assert torch.get_num_threads() == threads


def _loaded(toy_vocabs):
    from types import SimpleNamespace

    model = tiny_model(*toy_vocabs).eval()
    cfg = SimpleNamespace(
        model=SimpleNamespace(attention="additive"),
        data=SimpleNamespace(src_lang="de", tgt_lang="en"),
    )
    return SimpleNamespace(model=model, src_vocab=toy_vocabs[0], tgt_vocab=toy_vocabs[1], cfg=cfg)


def _filter(loaded, data: bytes, tmp_path, capsys, **kw):
    from nmt.commands.translate import run_filter

    src, out = tmp_path / "in.de", tmp_path / "out.en"
    src.write_bytes(data)
    translator = Translator.from_loaded(
        loaded, decoding=kw.pop("decoding", Decoding()), batch_size=2
    )
    run_filter(
        translator,
        input_path=src,
        output_path=out,
        show_attention=kw.pop("show_attention", False),
        **kw,
    )
    return out.read_text(encoding="utf-8"), capsys.readouterr().err


def test_filter_output_does_not_depend_on_the_chunk_size(toy_vocabs, tmp_path, capsys):
    loaded = _loaded(toy_vocabs)
    lines = LINES + ["ein " * 450, "der hund \xff läuft"] + LINES
    data = "\n".join(lines).encode("utf-8").replace("\xff".encode(), b"\xff") + b"\n"
    dec = Decoding(beam_size=3, n_best=2)
    whole, err_whole = _filter(loaded, data, tmp_path, capsys, decoding=dec)
    chunked, err_chunked = _filter(loaded, data, tmp_path, capsys, decoding=dec, lines_per_chunk=3)
    assert chunked == whole
    # n-best indices count over the whole input, not within a chunk
    indices = [int(r.split(" ||| ")[0]) for r in chunked.splitlines()]
    assert sorted(set(indices)) == list(range(len(lines)))
    assert indices == sorted(indices)
    n = len(LINES)
    for err in (err_whole, err_chunked):  # line numbers over the whole input too
        assert f"in.de: 1 input line cut to the first 400 pieces (line {n + 1}," in err
        assert (
            f"in.de: 1 input line not valid UTF-8: invalid bytes replaced by U+FFFD "
            f"(line {n + 2}, counting from 1)"
        ) in err


def test_interactive_lists_the_n_best_with_their_scores(toy_vocabs):
    import io

    from nmt.commands.translate import run_interactive

    out = io.StringIO()
    translator = Translator.from_loaded(
        _loaded(toy_vocabs), decoding=Decoding(beam_size=3, n_best=3)
    )
    code = run_interactive(
        translator, show_attention=False, stdin=io.StringIO("der hund läuft\n"), stdout=out
    )
    rows = [r.removeprefix("> ") for r in out.getvalue().splitlines()]
    rows = [r for r in rows if r[:2] in ("1.", "2.", "3.")]
    assert code == 0 and [r[:2] for r in rows] == ["1.", "2.", "3."], out.getvalue()
    # complete hypotheses first, by score; those cut at the length limit marked, after them
    order = [
        ("[cut at the length limit" in r, -float(r.rsplit("(", 1)[1].rstrip(")"))) for r in rows
    ]
    assert order == sorted(order)


def test_gzip_input_is_decompressed_and_a_damaged_one_named(toy_vocabs, tmp_path, capsys):
    import gzip

    loaded = _loaded(toy_vocabs)
    data = "\n".join(LINES).encode() + b"\n"
    plain, _ = _filter(loaded, data, tmp_path, capsys)
    packed, err = _filter(loaded, gzip.compress(data), tmp_path, capsys)  # named in.de
    assert packed == plain and "UTF-8" not in err
    with pytest.raises(ValueError, match="in.de: damaged gzip file"):
        _filter(loaded, gzip.compress(data)[:20], tmp_path, capsys)


def test_an_eof_of_the_search_is_not_called_a_damaged_input(
    toy_vocabs, tmp_path, capsys, monkeypatch
):
    """An EOFError from the search (a search process's pipe closing when the fork server
    died) was reported as ``--input ...: damaged gzip file``, the input being fine."""
    import gzip

    def closed_pipe(self, lines):
        raise EOFError("the search processes' pipe closed")

    monkeypatch.setattr(Translator, "translate", closed_pipe)
    data = gzip.compress("\n".join(LINES).encode() + b"\n")
    with pytest.raises(EOFError, match="pipe closed"):
        _filter(_loaded(toy_vocabs), data, tmp_path, capsys)


def test_gzip_on_standard_input_is_decompressed(toy_vocabs, tmp_path, capsys, monkeypatch):
    """A gzip --input was decompressed, gzip piped into stdin read as invalid UTF-8."""
    import gzip
    import io
    import sys

    from nmt.commands.translate import run_filter

    data = "\n".join(LINES).encode() + b"\n"
    plain, _ = _filter(_loaded(toy_vocabs), data, tmp_path, capsys)
    stdin = io.TextIOWrapper(io.BufferedReader(io.BytesIO(gzip.compress(data))))
    monkeypatch.setattr(sys, "stdin", stdin)
    translator = Translator.from_loaded(_loaded(toy_vocabs), decoding=Decoding(), batch_size=2)
    run_filter(translator, input_path=None, output_path=tmp_path / "piped.en", show_attention=False)
    assert (tmp_path / "piped.en").read_text(encoding="utf-8") == plain
    assert "UTF-8" not in capsys.readouterr().err


def test_filter_prints_alignments_also_with_nbest(toy_vocabs, tmp_path, capsys):
    data = "\n".join(LINES[:2]).encode() + b"\n"
    out, err = _filter(
        _loaded(toy_vocabs),
        data,
        tmp_path,
        capsys,
        show_attention=True,
        decoding=Decoding(beam_size=3, n_best=2),
    )
    assert [r.split(" ||| ")[0] for r in out.splitlines()] == ["0", "0", "1", "1"]
    assert LINES[0] in err and LINES[1] in err  # each source line heads its alignments


def test_many_invalid_utf8_lines_give_one_warning(toy_vocabs, tmp_path, capsys):
    out, err = _filter(_loaded(toy_vocabs), b"der \xff hund\n" * 30, tmp_path, capsys)
    assert len(out.splitlines()) == 30
    assert err.count("UTF-8") == 1
    assert "30 input lines not valid UTF-8" in err
    assert "lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ..." in err


def test_filter_keeps_the_chunks_written_before_a_ctrl_c(
    toy_vocabs: Vocabs, tmp_path, capsys, monkeypatch
):
    loaded, calls = _loaded(toy_vocabs), []
    real = Translator.translate

    def interrupted(self, *args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kw)

    monkeypatch.setattr(Translator, "translate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _filter(loaded, ("\n".join(LINES) + "\n").encode(), tmp_path, capsys, lines_per_chunk=2)
    written = (tmp_path / "out.en").read_text(encoding="utf-8").splitlines()
    expected = [t.text for t in translate_lines(loaded.model, *toy_vocabs, LINES[:4], batch_size=2)]
    assert written == expected  # the two chunks before the interruption, complete


def test_lines_the_model_knows_nothing_of_are_flagged_and_warned(
    toy_vocabs: Vocabs, tmp_path, capsys
):
    loaded = _loaded(toy_vocabs)
    lines = ["ein mann", "🐕🐕 🐕", "", "ein 🐕"]
    out = translate_lines(loaded.model, *toy_vocabs, lines)
    assert [t.unknown for t in out] == [False, True, False, False]
    data = ("\n".join(lines) + "\n").encode()
    _, err = _filter(loaded, data, tmp_path, capsys, lines_per_chunk=1)
    assert (
        "in.de: 1 input line made only of pieces the model does not know (<unk>): "
        "translated, but as guesses (line 2, counting from 1)"
    ) in err


def test_decoding_defaults_are_the_configs_and_from_config_takes_given_values():
    from nmt.config.schema import Config, SearchConfig, TrainConfig

    d, s = Decoding(), SearchConfig()
    assert (d.beam_size, d.alpha, d.length_penalty, d.precision) == (
        s.beam_size,
        s.alpha,
        s.length_penalty,
        s.precision,
    )
    assert d.max_ratio == TrainConfig().max_output_ratio
    cfg = Config(
        search=SearchConfig(beam_size=3, alpha=1.0), train=TrainConfig(max_output_ratio=1.5)
    )
    got = Decoding.from_config(cfg, beam_size=None, alpha=0.2, n_best=2)
    assert (got.beam_size, got.alpha, got.max_ratio, got.n_best) == (3, 0.2, 1.5, 2)


def test_translator_encodes_cuts_and_flags_one_way(toy_vocabs: Vocabs):
    from nmt.inference.translator import Translator

    model = tiny_model(*toy_vocabs).eval()
    short = len(Translator(model, *toy_vocabs).encode("ein mann").ids)
    tr = Translator(model, *toy_vocabs, Decoding(beam_size=1), max_src_pieces=short)
    enc = tr.encode("ein mann " * 10)
    assert len(enc.ids) == short and enc.truncated and not enc.unknown
    assert tr.encode("🐕🐕").unknown and tr.encode("   ").ids == []
    out = tr.translate(["ein mann " * 10, "", "ein mann"])
    assert [t.truncated for t in out] == [True, False, False] and out[1].text == ""
    # a fixed thread count: the call restores torch's count whatever it used
    before = torch.get_num_threads()
    Translator(model, *toy_vocabs, Decoding(beam_size=1), threads=1).translate(["ein mann"])
    assert torch.get_num_threads() == before


def test_a_beam_wider_than_the_target_vocabulary_is_capped_with_one_warning(
    toy_vocabs: Vocabs, tmp_path, capsys
):
    """``nmt bench --beam 100000`` on a 64-piece vocabulary ran for minutes: every command
    searches through the Translator, which caps the beam at the vocabulary (and says so)."""
    from nmt.inference.translator import Translator

    loaded, V = _loaded(toy_vocabs), len(toy_vocabs[1])
    warned: list[str] = []
    wide = Translator(
        loaded.model, *toy_vocabs, Decoding(beam_size=100_000, n_best=2), warn=warned.append
    )
    assert wide.decoding.beam_size == V and wide.decoding.n_best == 2
    assert warned == [
        f"warning: beam 100000 is more than the {V} pieces of the target "
        f"vocabulary; searching with beam {V}"
    ]
    out = wide.translate(LINES[:2])
    out = wide.translate(LINES[:2], Decoding(beam_size=100_000, n_best=2))
    assert len(warned) == 1  # once per decoding, not per call
    ref = translate_lines(
        loaded.model, *toy_vocabs, LINES[:2], decoding=Decoding(beam_size=V, n_best=2)
    )
    assert [(t.text, t.nbest) for t in out] == [(t.text, t.nbest) for t in ref]
    assert Decoding(beam_size=3).capped(V) == (Decoding(beam_size=3), None)
    capped, line = Decoding(beam_size=99, n_best=99).capped(8)
    assert line is not None
    assert (capped.beam_size, capped.n_best) == (8, 8) and line.endswith("and n_best 99 to 8")
    # translate's filter (stderr) and the interactive prompt print the one line
    _, err = _filter(loaded, b"ein mann\n", tmp_path, capsys, decoding=Decoding(beam_size=100_000))
    assert err.count("is more than the") == 1 and f"searching with beam {V}" in err


def test_evaluate_and_serve_cap_or_refuse_a_beam_wider_than_the_vocabulary(toy_vocabs, tmp_path):
    from types import SimpleNamespace

    from nmt.commands.evaluate import evaluate_checkpoints
    from nmt.config.load import from_dict
    from nmt.model.checkpoint import make_payload, save_atomic
    from nmt.serve.decode import decoding_for
    from nmt.serve.limits import ApiError
    from nmt.serve.registry import ModelEntry
    from nmt.serve.schemas import TranslateRequest

    V = len(toy_vocabs[1])
    cfg = from_dict(
        {
            "model": {
                "emb_dim": 16,
                "enc_hidden": 16,
                "dec_hidden": 32,
                "attn_dim": 16,
                "output_dim": 16,
                "dropout": 0.0,
            }
        }
    )
    save_atomic(make_payload(cfg, tiny_model(*toy_vocabs), *toy_vocabs), tmp_path / "m.pt")
    (tmp_path / "s.txt").write_text("ein mann läuft .\n")
    (tmp_path / "r.txt").write_text("a man runs .\n")
    report = evaluate_checkpoints(
        [tmp_path / "m.pt"],
        src=tmp_path / "s.txt",
        ref=tmp_path / "r.txt",
        beam_size=100_000,
        device="cpu",
    )
    assert any(f"searching with beam {V}" in w for w in report.warnings)
    assert report.json[0]["search"].startswith(f"beam search, beam {V},")
    # nmt serve: a 6-piece vocabulary (the API allows beams up to 16)
    # stand-ins with just the fields decoding_for reads
    small = cast(
        ModelEntry,
        SimpleNamespace(
            id="m",
            decoding=Decoding(beam_size=12),
            loaded=SimpleNamespace(tgt_vocab=list(range(6))),
        ),
    )
    with pytest.raises(ApiError, match="beam 8 is more than the 6 target pieces of model 'm'"):
        decoding_for(small, TranslateRequest.model_validate({"lines": ["x"], "beam": 8}))
    assert (
        decoding_for(small, TranslateRequest.model_validate({"lines": ["x"]})).beam_size == 6
    )  # its default
    wide = cast(
        ModelEntry,
        SimpleNamespace(
            id="w",
            decoding=Decoding(beam_size=40, n_best=12),
            loaded=SimpleNamespace(tgt_vocab=list(range(30))),
        ),
    )
    served = decoding_for(wide, TranslateRequest.model_validate({"lines": ["x"]}))
    assert (served.beam_size, served.n_best) == (16, 1)  # MAX_BEAM; the request's n_best


def test_evaluate_gives_each_language_pair_its_own_table_and_signature(toy_vocabs, tmp_path):
    """A de->en, a de->fr and an en->fr model on one split are scored on different sources
    or references: each pair gets its own header, length buckets and papers' signature, not
    the first model's. One pair of --src/--ref files fits one language pair only."""
    from nmt.commands.evaluate import evaluate_checkpoints
    from nmt.config.load import from_dict
    from nmt.data.corpus import DataError
    from nmt.model.checkpoint import make_payload, save_atomic

    small = {
        "emb_dim": 16,
        "enc_hidden": 16,
        "dec_hidden": 32,
        "attn_dim": 16,
        "output_dim": 16,
        "dropout": 0.0,
    }
    corpus = {
        "de": ["ein mann läuft .", "ein hund"],
        "en": ["a man runs .", "a dog"],
        "fr": ["un homme court .", "un chien"],
    }
    corpus["en"][1] = "a dog runs in the park with a ball ."  # en sources: another bucket
    for lang, lines in corpus.items():
        write_split(tmp_path / "data", "test", lang, lines)
    for name, src, tgt in (
        ("de_en", "de", "en"),
        ("de_fr", "de", "fr"),
        ("en_fr", "en", "fr"),
        ("also_de_en", "de", "en"),
    ):
        cfg = from_dict(
            {
                "name": name,
                "model": small,
                "data": {
                    "source": "dir",
                    "path": str(tmp_path / "data"),
                    "src_lang": src,
                    "tgt_lang": tgt,
                    "test_splits": ["test"],
                },
            }
        )
        save_atomic(
            make_payload(cfg, tiny_model(*toy_vocabs), *toy_vocabs), tmp_path / f"{name}.pt"
        )
    names = ("de_en", "de_fr", "en_fr", "also_de_en")
    report = evaluate_checkpoints(
        [tmp_path / f"{n}.pt" for n in names], beam_size=1, buckets="1-5,6-", device="cpu"
    )
    de_en, de_fr, en_fr = _tables(report.table)
    assert "de→en" in de_en and "also_de_en" in de_en and "fr" not in de_en.split("\n")[0]
    assert "de→fr" in de_fr and "en_fr" not in de_fr and "moses-tok.fr" in de_fr
    assert "moses-tok.en" in de_en and "moses-tok.fr" not in de_en
    # the length buckets count each pair's own sources
    assert "BLEU 6+ (n=0)" in de_fr and "BLEU 6+ (n=1)" in en_fr
    assert [(r["src_lang"], r["tgt_lang"]) for r in report.json] == [
        ("de", "en"),
        ("de", "fr"),
        ("en", "fr"),
        ("de", "en"),
    ]
    one = evaluate_checkpoints(
        [tmp_path / "de_en.pt", tmp_path / "also_de_en.pt"], beam_size=1, device="cpu"
    )
    assert len(_tables(one.table)) == 1 and "de→en" not in one.table  # one pair: as before
    (tmp_path / "s.txt").write_text("ein mann läuft .\n")
    (tmp_path / "r.txt").write_text("a man runs .\n")
    with pytest.raises(DataError, match=r"de_en.pt translates de->en and .*de_fr.pt de->fr"):
        evaluate_checkpoints(
            [tmp_path / "de_en.pt", tmp_path / "de_fr.pt"],
            src=tmp_path / "s.txt",
            ref=tmp_path / "r.txt",
            device="cpu",
        )


def _tables(text: str) -> list[str]:
    """The tables of an ``nmt evaluate`` report, each starting at its ``test set:`` line."""
    return ["test set:" + t for t in text.split("test set:")[1:]]


def test_from_paths_is_the_one_root_of_model_and_decoding_settings(toy_vocabs, tmp_path):
    """Translator.from_paths loads, takes the checkpoint's search settings with the given
    ones on top, keeps what it loaded, and refuses --nbest above the beam before decoding."""
    from nmt.config.load import from_dict
    from nmt.model.checkpoint import make_payload, save_atomic

    cfg = from_dict(
        {
            "search": {"beam_size": 4, "alpha": 0.8},
            "model": {
                "emb_dim": 16,
                "enc_hidden": 16,
                "dec_hidden": 32,
                "attn_dim": 16,
                "output_dim": 16,
                "dropout": 0.0,
            },
        }
    )
    save_atomic(make_payload(cfg, tiny_model(*toy_vocabs), *toy_vocabs), tmp_path / "m.pt")
    own = Translator.from_paths([tmp_path / "m.pt"], "cpu")
    assert (own.decoding.beam_size, own.decoding.alpha) == (4, 0.8)
    assert own.loaded.cfg.search.beam_size == 4 and own.decoding.precision != "auto"
    given = Translator.from_paths([tmp_path / "m.pt"], "cpu", beam_size=3, n_best=2, batch_size=7)
    assert (
        given.decoding.beam_size,
        given.decoding.n_best,
        given.decoding.alpha,
        given.batch_size,
    ) == (3, 2, 0.8, 7)
    with pytest.raises(ValueError, match="--nbest 5 needs --beam of at least 5"):
        Translator.from_paths([tmp_path / "m.pt"], "cpu", beam_size=3, n_best=5)
